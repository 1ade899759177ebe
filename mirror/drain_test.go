package mirror

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDrainReason(t *testing.T) {
	now := time.Unix(1000, 0)
	changing := drainState{changes: 3, lastChange: 77, lastAt: now.Add(-200 * time.Millisecond), cpRev: 70, head: 80}
	err := changing.reason("d/", 3*time.Second, now)
	if !errors.Is(err, ErrNotDrained) {
		t.Fatalf("%v: want ErrNotDrained", err)
	}
	for _, w := range []string{`kept changing under prefix "d/"`, "3s (--drain-timeout)", "revision 77", "stop the writers"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("reason %q does not say %q", err, w)
		}
	}
	behind := drainState{cpRev: 70, head: 80}
	err = behind.reason("d/", 3*time.Second, now)
	for _, w := range []string{"reached source revision 70, not the source's 80", "running and caught up"} {
		if !errors.Is(err, ErrNotDrained) || !strings.Contains(err.Error(), w) {
			t.Errorf("reason %q does not say %q", err, w)
		}
	}
}
