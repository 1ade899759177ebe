package mirror

import (
	"errors"
	"strings"
	"testing"
)

func TestDecidePolicy(t *testing.T) {
	for _, c := range []struct {
		stored  string
		current Policy
		reset   bool
		want    policyChange
		refused []string // what the refusal names; nil: accepted
	}{
		{"keep", Keep, false, policySame, nil},
		{"prune", Prune, false, policySame, nil},
		{"", Prune, false, policyAdopt, nil},
		{"", Keep, true, policyAdopt, nil},
		{"prune", Keep, false, 0, []string{"policy prune (--prune)", "policy keep (neither --overwrite nor --prune)", "--reset-policy"}},
		{"keep", Prune, false, 0, []string{"policy keep", "policy prune (--prune)"}},
		{"overwrite", Prune, false, 0, []string{"policy overwrite (--overwrite)", "policy prune (--prune)"}},
		{"prune", Keep, true, policyReset, nil},
	} {
		got, err := decidePolicy(c.stored, c.current, c.reset, "m")
		if c.refused == nil {
			if err != nil || got != c.want {
				t.Errorf("stored %q, current %s, reset %v: %v, %v; want %v", c.stored, c.current, c.reset, got, err, c.want)
			}
			continue
		}
		if !errors.Is(err, ErrRefused) {
			t.Errorf("stored %q, current %s: %v, want a refusal", c.stored, c.current, err)
			continue
		}
		for _, w := range c.refused {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("stored %q, current %s: refusal %q does not say %q", c.stored, c.current, err, w)
			}
		}
	}
}
