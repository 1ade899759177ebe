package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/understudy-kv/understudy/"

// listed is one package as `go list -json` tells it.
type listed struct {
	ImportPath, Dir                    string
	Imports, TestImports, XTestImports []string
	GoFiles                            []string
}

// ownImports are the understudy packages among imports, module prefix cut.
func ownImports(imports []string) []string {
	var out []string
	for _, i := range imports {
		if p, ok := strings.CutPrefix(i, module); ok && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// packageRow is a row of docs/architecture.md's package table: the
// package, in backticks, first; its understudy imports last.
var packageRow = regexp.MustCompile("^\\| `([a-z0-9/]+)`[^|]*\\|.*\\| ([^|]*) \\|$")

// The package table of docs/architecture.md names every package of the
// module, and for each exactly the understudy packages it imports (go
// list); a row marked "(tests)" lists what its tests import.
func TestArchitectureTableIsTrue(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]listed{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module)] = p
	}
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "\n## Packages\n")
	table, _, _ = strings.Cut(table, "\n## ")
	rows := map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		if m := packageRow.FindStringSubmatch(line); m != nil {
			rows[m[1]] = m[2]
		}
	}
	for name, p := range pkgs {
		col, ok := rows[name]
		if !ok {
			t.Errorf("docs/architecture.md's package table has no row for %s", name)
			continue
		}
		want := ownImports(p.Imports)
		if strings.HasSuffix(col, "(tests)") || len(p.GoFiles) == 0 {
			want = ownImports(append(append(slices.Clone(p.Imports), p.TestImports...), p.XTestImports...))
			col = strings.TrimSuffix(col, "(tests)")
		}
		var got []string
		for _, f := range strings.Split(col, ",") {
			f = strings.TrimSpace(f)
			if f == "" || strings.HasPrefix(f, "—") {
				continue
			}
			got = append(got, f)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("docs/architecture.md says %s imports %v; go list says %v", name, got, want)
		}
	}
	for name := range rows {
		if _, ok := pkgs[name]; !ok && name != "test/kube" {
			t.Errorf("docs/architecture.md's package table has a row for %s, which is no package", name)
		}
	}
}
