package compare

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The block of a document that UpdateDoc rewrites lies between these
// markers, each on a line of its own.
const (
	docBegin = "<!-- replica compare: begin"
	docEnd   = "<!-- replica compare: end -->"
)

// ErrNoDocBlock is returned when --doc names a file without the markers.
var ErrNoDocBlock = errors.New("compare: --doc: the file has no block to rewrite; add the lines " + docBegin + " -->" + " and " + docEnd)

// UpdateDoc rewrites the block between the markers in the Markdown file doc
// with the report's tables and the plots in dir (linked relative to doc),
// and records the command that regenerates it. Nothing outside the block
// changes.
func (a *Analysis) UpdateDoc(doc, dir, command string) error {
	b, err := os.ReadFile(doc)
	if err != nil {
		return fmt.Errorf("compare: --doc: %w", err)
	}
	start := bytes.Index(b, []byte(docBegin))
	end := bytes.Index(b, []byte(docEnd))
	if start < 0 || end < start {
		return fmt.Errorf("%w (%s)", ErrNoDocBlock, doc)
	}
	rel, err := filepath.Rel(filepath.Dir(doc), dir)
	if err != nil {
		return fmt.Errorf("compare: --doc: %w", err)
	}
	rel = filepath.ToSlash(rel)
	var blk strings.Builder
	fmt.Fprintf(&blk, "%s (written by `%s`; do not edit) -->\n\n", docBegin, command)
	if err := a.Markdown(&blk); err != nil {
		return err
	}
	fmt.Fprintf(&blk, "\n![Staleness over time, per path](%s/staleness-time.svg)\n\n![Staleness distribution, per path](%s/staleness-cdf.svg)\n\n", rel, rel)
	out := append(append(append([]byte{}, b[:start]...), blk.String()...), b[end:]...)
	if err := os.WriteFile(doc, out, 0o644); err != nil {
		return fmt.Errorf("compare: --doc: %w", err)
	}
	return nil
}
