package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The storage suite's table: a row per target in summary's order, cases
// passed of all, and the suite's tests that failed.
func TestStorageSuiteTable(t *testing.T) {
	rows := storageRows([]storageTarget{
		{Target: "cascaded", Passed: 406},
		{Target: "grpc-proxy", Passed: 405, Failed: 1, Skipped: 2, FailedTests: []string{"watch/ProgressNotify"}},
	}, 3*time.Minute)
	var b strings.Builder
	writeStorageSuite(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }, append(rows, Row{Scenario: "reads", Name: "other"}))
	got := b.String()
	for _, want := range []string{
		"| a cascaded replica | 406 of 406 | 0 | 0 | none |\n| grpc-proxy | 405 of 406 | 1 | 2 | watch/ProgressNotify |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table:\n%s\nwant it to hold:\n%s", got, want)
		}
	}
	if strings.Contains(got, "other") {
		t.Errorf("another scenario's row in the table:\n%s", got)
	}
	b.Reset()
	writeStorageSuite(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }, []Row{{Scenario: "reads"}})
	if b.Len() != 0 {
		t.Errorf("a section with no storage-suite row: %q", b.String())
	}
}
