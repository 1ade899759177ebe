package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocumentedBuildsAreStatic: every build of the binaries the docs
// show sets CGO_ENABLED=0. The docs call the binaries static; where Go's
// default is CGO_ENABLED=1 (any host with a C compiler), a plain go build
// links libc dynamically.
func TestDocumentedBuildsAreStatic(t *testing.T) {
	root := filepath.Join("..", "..")
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md"), filepath.Join(root, "deploy", "README.md"))
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "go build -o") || !strings.Contains(line, "./cmd/") {
				continue
			}
			seen++
			if !strings.Contains(line, "CGO_ENABLED=0 go build") {
				t.Errorf("%s:%d builds the binaries without CGO_ENABLED=0: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
	if seen == 0 {
		t.Fatal("no documented build found: is README's Install section gone?")
	}
}
