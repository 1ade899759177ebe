package mirror

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/mirror/core"
)

// TestDrainReason: a drain that gives up says whether the source kept
// changing (and what to do) or the mirror did not catch up (the decision
// is core's, TestDrain there).
func TestDrainReason(t *testing.T) {
	changing := core.DrainReport{KeptChanging: true, Changes: 3, LastChange: 77, LastAgo: 200 * time.Millisecond, CheckpointRev: 70, Head: 80}
	err := drainReason(changing, "d/", 3*time.Second)
	if !errors.Is(err, ErrNotDrained) {
		t.Fatalf("%v: want ErrNotDrained", err)
	}
	for _, w := range []string{`kept changing under prefix "d/"`, "3s (--drain-timeout)", "revision 77", "200ms ago", "stop the writers"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("reason %q does not say %q", err, w)
		}
	}
	behind := core.DrainReport{CheckpointRev: 70, Head: 80}
	err = drainReason(behind, "d/", 3*time.Second)
	for _, w := range []string{"reached source revision 70, not the source's 80", "running and caught up"} {
		if !errors.Is(err, ErrNotDrained) || !strings.Contains(err.Error(), w) {
			t.Errorf("reason %q does not say %q", err, w)
		}
	}
}
