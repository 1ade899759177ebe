// Package deploy checks the files under deploy/ against the code: the
// Grafana dashboard and the Prometheus alert rules name only metrics a
// replica or a mirror exports (scraped from live processes), the rules are
// the ones the PrometheusRule ships and every alert has a promtool test
// that fires it and one that does not. promtool itself runs in
// scripts/test-alerts.sh, outside CI.
package deploy

import (
	"fmt"
	"slices"
	"strings"
)

// keywords are PromQL's words that are not metric names when they are not
// followed by "(": binary operators, modifiers and number literals.
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true,
}

// labelLists are the words followed by a parenthesised list of label names.
var labelLists = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// MetricNames returns the metric names a PromQL expression selects, sorted
// and without repeats: every identifier that is not a function or
// aggregation (followed by "("), a keyword, a label name (inside {…} or a
// by/on/… list) or a number, duration or Grafana variable ($name). This is
// a lexer, not a parser: it accepts some expressions Prometheus would
// refuse, which promtool checks (scripts/test-alerts.sh).
func MetricNames(expr string) ([]string, error) {
	var names []string
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{' || c == '[':
			end, err := skipGroup(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '$':
			i = skipWord(expr, i+1)
		case isDigit(c) || (c == '.' && i+1 < len(expr) && isDigit(expr[i+1])):
			i = skipWord(expr, i) // 5m, 1e3, 0x1f, 0.99
		case isWordStart(c):
			end := skipWord(expr, i)
			word := expr[i:end]
			next := nextNonSpace(expr, end)
			switch {
			case labelLists[word] && next < len(expr) && expr[next] == '(':
				close, err := skipParens(expr, next)
				if err != nil {
					return nil, err
				}
				end = close
			case next < len(expr) && expr[next] == '(':
				// a function or an aggregation
			case !keywords[word] && (wordAt(expr, next) == "by" || wordAt(expr, next) == "without"):
				// an aggregation with its grouping first: sum by (a) (x)
			case keywords[strings.ToLower(word)]:
			default:
				names = append(names, word)
			}
			i = end
		default:
			i++
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string at %d in %q", i, s)
}

// skipGroup skips a {…} label matcher list or a […] range, strings inside
// included.
func skipGroup(s string, i int) (int, error) {
	closer := map[byte]byte{'{': '}', '[': ']'}[s[i]]
	for j := i + 1; j < len(s); {
		switch s[j] {
		case '"', '\'', '`':
			end, err := skipString(s, j)
			if err != nil {
				return 0, err
			}
			j = end
		case closer:
			return j + 1, nil
		default:
			j++
		}
	}
	return 0, fmt.Errorf("unclosed %q at %d in %q", s[i], i, s)
}

// skipParens skips a label list, (a, b): label names, commas and spaces.
func skipParens(s string, i int) (int, error) {
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == ')':
			return j + 1, nil
		case !isWordStart(c) && !isDigit(c) && strings.IndexByte(", \t\r\n", c) < 0:
			return 0, fmt.Errorf("%q in the label list at %d in %q", c, i, s)
		}
	}
	return 0, fmt.Errorf("unclosed label list at %d in %q", i, s)
}

// wordAt is the identifier that starts at i, or "".
func wordAt(s string, i int) string {
	if i >= len(s) || !isWordStart(s[i]) {
		return ""
	}
	return s[i:skipWord(s, i)]
}

func skipWord(s string, i int) int {
	for i < len(s) && (isWordStart(s[i]) || isDigit(s[i]) || s[i] == '.') {
		i++
	}
	return i
}

func nextNonSpace(s string, i int) int {
	for i < len(s) && strings.IndexByte(" \t\r\n", s[i]) >= 0 {
		i++
	}
	return i
}

func isWordStart(c byte) bool {
	return c == '_' || c == ':' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
