package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// citation is a file named in a comment: a path (docs/read-modes.md,
// readpath/kv.go), a top-level document (README.md) or a Go file (kv.go).
var citation = regexp.MustCompile(`\b(?:[A-Za-z0-9_-]+/)*[A-Za-z0-9_-]+\.(?:go|md)\b`)

// Every file of this repository that a comment of the product code cites
// exists: a path whose first directory is one of the repository's, a
// top-level document, or a Go file somewhere in the tree (comments also
// cite etcd's files by their own paths, which are left alone).
func TestCommentsCiteFilesThatExist(t *testing.T) {
	root := "../.."
	out, err := exec.Command("git", "-C", root, "ls-files").Output()
	if err != nil {
		t.Fatal(err)
	}
	files := strings.Fields(string(out))
	tracked, base, tops := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, f := range files {
		tracked[f], base[filepath.Base(f)] = true, true
		if i := strings.IndexByte(f, '/'); i > 0 {
			tops[f[:i]] = true
		}
	}
	for _, f := range files {
		if !strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			_, comment, ok := strings.Cut(line, "//")
			if !ok {
				continue
			}
			for _, c := range citation.FindAllString(comment, -1) {
				dir, _, nested := strings.Cut(c, "/")
				switch {
				case nested && tops[dir] && !tracked[c]:
					t.Errorf("%s:%d cites %s, which is not in the repository", f, n+1, c)
				case !nested && strings.HasSuffix(c, ".md") && strings.ToUpper(c[:1]) == c[:1] && !tracked[c]:
					t.Errorf("%s:%d cites %s, which is not in the repository", f, n+1, c)
				case !nested && strings.HasSuffix(c, ".go") && !base[c] && !strings.Contains(comment, "etcd"):
					t.Errorf("%s:%d cites %s, which no file of the repository is", f, n+1, c)
				}
			}
		}
	}
}
