package harness

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// Every test's T is a TB.
var _ TB = testing.TB(nil)

func TestRunnerFatalCleanupTempDir(t *testing.T) {
	r := NewRunner("r", nil)
	var order []int
	var dir string
	err := r.Do(func() {
		r.Cleanup(func() { order = append(order, 1) })
		r.Cleanup(func() { order = append(order, 2) })
		dir = r.TempDir()
		r.Fatalf("stopped at %d", 7)
		t.Error("Fatalf returned")
	})
	if err == nil || !strings.Contains(err.Error(), "stopped at 7") || !r.Failed() {
		t.Fatalf("Do after Fatalf: err %v, Failed %v; want the message and Failed", err, r.Failed())
	}
	if err := r.Do(func() {}); err != nil {
		t.Fatalf("Do without Fatal: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("TempDir before Finish: %v", err)
	}
	r.Finish()
	if len(order) != 2 || order[0] != 2 || order[1] != 1 {
		t.Fatalf("cleanups ran %v, want [2 1]", order)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("TempDir after Finish: %v, want it removed", err)
	}
}
