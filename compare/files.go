package compare

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFiles writes report.json, table.md and the plots into dir.
func (a *Analysis) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("compare: --out: %w", err)
	}
	for name, write := range map[string]func(io.Writer) error{
		"report.json": a.JSON,
		"table.md":    a.Markdown,
	} {
		if err := writeFile(filepath.Join(dir, name), write); err != nil {
			return err
		}
	}
	return a.Plots(dir)
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("compare: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	return nil
}
