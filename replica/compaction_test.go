package replica

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/understudy-kv/understudy/autocompact"
)

// A learned policy is kept in the member's directory and read back at the
// next start; a file that does not parse is ignored (learned again).
func TestCompactionRemembersALearnedPolicy(t *testing.T) {
	dir := t.TempDir()
	c := &compaction{lg: zaptest.NewLogger(t), path: filepath.Join(dir, rememberedCompactionFile)}
	if got := c.load(); got.Policy != (autocompact.Policy{}) {
		t.Fatalf("nothing kept yet: %+v", got)
	}
	at := time.Date(2026, 11, 29, 1, 2, 3, 0, time.UTC)
	for _, p := range []autocompact.Policy{
		{Mode: autocompact.ModePeriodic, Retention: 5 * time.Second},
		{Mode: autocompact.ModePeriodic, Retention: 90 * time.Minute},
		{Mode: autocompact.ModeRevision, Revisions: 1000},
	} {
		c.remembered = autocompact.Remembered{Policy: p, At: at, Why: "4 compactions seen"}
		c.save()
		if got := c.load(); got != c.remembered {
			t.Errorf("kept %+v, read back %+v", c.remembered, got)
		}
	}
	if err := os.WriteFile(c.path, []byte(`{"mode":"hourly","retention":"1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := c.load(); got.Policy != (autocompact.Policy{}) {
		t.Fatalf("a file that does not parse read as %+v", got)
	}
}
