package deploy

import (
	"os"
	"os/exec"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

var (
	// mdLink is an inline Markdown link, [text](target) or
	// [text](target "title"); the target is the first group.
	mdLink = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// codeSpan is inline code, which Markdown does not read links in.
	codeSpan = regexp.MustCompile("`[^`]*`")
	// heading is an ATX heading: its text is the second group.
	heading = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	// testName is a Go test or fuzz target named in prose or in a -run
	// pattern (where it may be the prefix of several).
	testName = regexp.MustCompile(`\b(?:Test|Fuzz)[A-Z][A-Za-z0-9_]*`)
	// testFunc is a test or fuzz target's declaration.
	testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)[A-Za-z0-9_]+)\(`)
)

// repoFiles is every file git tracks, relative to the repository's root,
// with every directory that holds one.
func repoFiles(t *testing.T) (files []string, exists map[string]bool) {
	t.Helper()
	out, err := exec.Command("git", "-C", "../..", "ls-files").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files = strings.Fields(string(out))
	exists = map[string]bool{}
	for _, f := range files {
		exists[f] = true
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			exists[d] = true
		}
	}
	return files, exists
}

// proseLines calls fn with each line of a Markdown file that is outside
// fenced code blocks, its inline code removed, and its 1-based number.
func proseLines(t *testing.T, file string, keepCode bool, fn func(n int, line string)) {
	t.Helper()
	b, err := os.ReadFile("../../" + file)
	if err != nil {
		t.Fatal(err)
	}
	fenced := false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced && !keepCode {
			continue
		}
		if !keepCode {
			line = codeSpan.ReplaceAllString(line, "")
		}
		fn(i+1, line)
	}
}

// anchor is the fragment GitHub gives a heading: its text without links'
// targets and without punctuation, lower case, spaces as hyphens.
func anchor(text string) string {
	text = mdLink.ReplaceAllStringFunc(text, func(l string) string { return l[1:strings.Index(l, "](")] })
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// anchors is every fragment a Markdown file's headings give, numbered as
// GitHub numbers repeated ones (x, x-1, x-2).
func anchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	have, seen := map[string]bool{}, map[string]int{}
	proseLines(t, file, false, func(_ int, line string) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		a := anchor(m[2])
		if n, ok := seen[a]; ok {
			seen[a] = n + 1
			have[a+"-"+strconv.Itoa(n+1)] = true
			return
		}
		seen[a] = 0
		have[a] = true
	})
	return have
}

// Every relative link of every Markdown file in the repository leads to a
// file or directory git tracks, and every fragment (#…) into a Markdown
// file to one of its headings, as GitHub renders them: a page moved or a
// section renamed breaks no reader's link.
func TestDocsLinksResolve(t *testing.T) {
	files, exists := repoFiles(t)
	heads := map[string]map[string]bool{}
	links := 0
	for _, f := range files {
		if !strings.HasSuffix(f, ".md") {
			continue
		}
		proseLines(t, f, false, func(n int, line string) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, ":") && !strings.HasPrefix(target, "#") {
					continue // http:, https:, mailto:
				}
				links++
				file, frag, _ := strings.Cut(target, "#")
				dest := f
				if file != "" {
					dest = path.Clean(path.Join(path.Dir(f), file))
					if !exists[dest] {
						t.Errorf("%s:%d links to %s: %s is not in the repository", f, n, target, dest)
						continue
					}
				}
				if frag == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				if heads[dest] == nil {
					heads[dest] = anchors(t, dest)
				}
				if !heads[dest][frag] {
					t.Errorf("%s:%d links to %s: %s has no heading whose anchor is #%s", f, n, target, dest, frag)
				}
			}
		})
	}
	if links < 100 {
		t.Fatalf("found %d relative links in the docs: is the link pattern still right?", links)
	}
}

// Every Go test the docs name (in prose, or as a -run pattern's prefix)
// exists. CHANGELOG.md is history and keeps the names tests had then.
func TestDocsNameTestsThatExist(t *testing.T) {
	files, _ := repoFiles(t)
	var tests []string
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile("../../" + f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
			tests = append(tests, m[1])
		}
	}
	named := 0
	for _, f := range files {
		if !strings.HasSuffix(f, ".md") || f == "CHANGELOG.md" {
			continue
		}
		proseLines(t, f, true, func(n int, line string) {
			for _, name := range testName.FindAllString(line, -1) {
				named++
				found := false
				for _, have := range tests {
					if strings.HasPrefix(have, name) {
						found = true
						break
					}
				}
				if !found {
					t.Errorf("%s:%d names %s, which is no test of the repository (nor a prefix of one)", f, n, name)
				}
			}
		})
	}
	if named < 50 {
		t.Fatalf("found %d test names in the docs: is the pattern still right?", named)
	}
}
