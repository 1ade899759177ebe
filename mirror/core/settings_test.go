package core

import (
	"strings"
	"testing"
	"time"
)

// TestSettingsValidateNamesEveryFlag: the defaults pass; a setting bad in
// every field is refused with one problem per flag, all at once; the
// least --max-txn-ops is the nesting's (MinTxnOps), not a number of its own.
func TestSettingsValidateNamesEveryFlag(t *testing.T) {
	if err := DefaultSettings().Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	least := DefaultSettings()
	least.MaxTxnOps = MinTxnOps
	if err := least.Validate(); err != nil {
		t.Fatalf("--max-txn-ops %d (MinTxnOps): %v", MinTxnOps, err)
	}
	bad := Settings{Rev: -1, Name: "a/b", MaxTxnOps: MinTxnOps - 1, MaxRequestBytes: 1024, Overwrite: true, Prune: true,
		RequestTimeout: -time.Second}
	err := bad.Validate()
	if err == nil {
		t.Fatal("settings bad in every field passed")
	}
	want := []string{"--rev -1", `--name "a/b"`, "--max-txn-ops 5: must be at least 6", "--max-request-bytes 1024", "--page-size 0",
		"--overwrite and --prune", "--command-timeout -1s", "--stall-timeout 0s", "--progress-interval 0s",
		"--cycle-check-interval 0s", "--drain-timeout 0s"}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("problems do not name %q:\n%v", w, err)
		}
	}
	if n := len(strings.Split(err.Error(), "\n")); n != len(want) {
		t.Errorf("%d problems, want %d (one per flag):\n%v", n, len(want), err)
	}
	fb := DefaultSettings()
	fb.Failback, fb.Rev = true, 7
	if err := fb.Validate(); err == nil || !strings.Contains(err.Error(), "--failback with --rev 7") {
		t.Errorf("--failback --rev 7: %v", err)
	}
}

// TestSettingsPolicy: --prune wins over nothing, --overwrite over nothing,
// neither keeps.
func TestSettingsPolicy(t *testing.T) {
	for _, c := range []struct {
		overwrite, prune bool
		want             Policy
	}{{false, false, Keep}, {true, false, Overwrite}, {false, true, Prune}} {
		if got := (Settings{Overwrite: c.overwrite, Prune: c.prune}).Policy(); got != c.want {
			t.Errorf("overwrite %v prune %v: %v, want %v", c.overwrite, c.prune, got, c.want)
		}
	}
}
