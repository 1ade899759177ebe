package compare

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/understudy-kv/understudy/config"
)

func TestUpdateDocRewritesOnlyItsBlock(t *testing.T) {
	h := synthetic(100)
	for _, p := range Paths {
		addReads(h, p, 0, 0)
	}
	a := Analyze(config.DefaultCompare(), h, 0, 0)
	dir := t.TempDir()
	doc := filepath.Join(dir, "README.md")
	before, after := "# Title\n\nprose before\n\n", "\nprose after\n"
	if err := os.WriteFile(doc, []byte(before+docBegin+" -->\nold numbers\n"+docEnd+after), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // and again over its own output
		if err := a.UpdateDoc(doc, filepath.Join(dir, "docs", "compare"), "go run ./cmd/replica compare --local"); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(doc)
	s := string(b)
	if !strings.HasPrefix(s, before+docBegin) || !strings.HasSuffix(s, docEnd+after) || strings.Count(s, docBegin) != 1 {
		t.Fatalf("the text around the block changed:\n%s", s)
	}
	for _, want := range []string{"`go run ./cmd/replica compare --local`", "|  replica-weak   |", "](docs/compare/staleness-time.svg)"} {
		if !strings.Contains(s, want) {
			t.Errorf("the block has no %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "old numbers") {
		t.Errorf("the old block is still there:\n%s", s)
	}

	if err := os.WriteFile(doc, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.UpdateDoc(doc, dir, "x"); !errors.Is(err, ErrNoDocBlock) {
		t.Fatalf("a file without markers: %v, want ErrNoDocBlock", err)
	}
}
