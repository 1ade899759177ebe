package deploy

import (
	"os/exec"
	"strings"
	"testing"
)

// TestShippedBinariesLinkNoTestCode: the binaries built from ./cmd/...
// (without the localcompare tag) link neither package testing nor any
// package under test/, so a change to the test harness cannot break the
// product.
func TestShippedBinariesLinkNoTestCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../cmd/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/...: %v\n%s", err, out)
	}
	var bad []string
	for _, p := range strings.Fields(string(out)) {
		if p == "testing" || strings.HasPrefix(p, "github.com/understudy-kv/understudy/test/") {
			bad = append(bad, p)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("the shipped binaries link test code: %v", bad)
	}
}
