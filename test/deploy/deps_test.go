package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestShippedBinariesLinkNoTestCode: the binaries built from ./cmd/...
// link neither package testing nor any
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

// TestNoBuildTagInProductCode: no build constraint hides a product file
// from the binary README's Install section builds (`replica compare
// --local` once needed -tags localcompare).
func TestNoBuildTagInProductCode(t *testing.T) {
	out, err := exec.Command("git", "-C", "../..", "ls-files", "*.go").CombinedOutput()
	if err != nil {
		t.Fatalf("git ls-files: %v\n%s", err, out)
	}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "test/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "package ") {
				break
			}
			if strings.HasPrefix(line, "//go:build") {
				t.Errorf("%s: %s: a product file behind a build tag", f, line)
			}
		}
	}
}
