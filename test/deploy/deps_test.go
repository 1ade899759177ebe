package deploy

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestShippedBinariesLinkNoTestCode: the binaries built from ./cmd/...
// link neither package testing nor any
// package under test/, so a change to the test harness cannot break the
// product; and no product package holds test code in disguise
// (productHoldsNoTestCode).
func TestShippedBinariesLinkNoTestCode(t *testing.T) {
	t.Run("no TB look-alike, no test hook", productHoldsNoTestCode)
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

// tbMethods mark an interface as a testing.TB look-alike: a product
// package that declares one takes a test's t, and a command that drives it
// must fake a test.
var tbMethods = []string{"Fatal", "Fatalf", "FailNow", "Helper"}

// productHoldsNoTestCode: no product package (every package of the module
// outside test/, its non-test files) declares an interface with Fatal,
// Fatalf, FailNow or Helper (loopback once took such a TB, and `replica
// compare --local` drove it through a Runner whose Fatal panicked), and no
// product file names an UNDERSTUDY_TEST variable (a test hook in the
// shipped code: hooks are injected from _test files).
func productHoldsNoTestCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	files := 0
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(p.ImportPath, module+"test/") {
			continue
		}
		for _, f := range p.GoFiles {
			files++
			for _, bad := range productFileProblems(t, filepath.Join(p.Dir, f)) {
				t.Errorf("%s: %s", strings.TrimPrefix(p.ImportPath, module), bad)
			}
		}
	}
	if files == 0 {
		t.Fatal("go list named no product file")
	}
}

// productFileProblems are the TB look-alikes file declares and the
// UNDERSTUDY_TEST variables it names.
func productFileProblems(t *testing.T, file string) []string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	if strings.Contains(string(src), "UNDERSTUDY_TEST") {
		bad = append(bad, filepath.Base(file)+" names an UNDERSTUDY_TEST variable: a test hook in product code")
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		it, ok := n.(*ast.InterfaceType)
		if !ok {
			return true
		}
		for _, m := range it.Methods.List {
			for _, name := range m.Names {
				if slices.Contains(tbMethods, name.Name) {
					bad = append(bad, fmt.Sprintf("%s:%d: an interface with %s, a testing.TB look-alike: return errors and let the tests call t.Fatal", filepath.Base(file), fset.Position(m.Pos()).Line, name.Name))
				}
			}
		}
		return true
	})
	return bad
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
