package mirror

import (
	"errors"
	"strings"
	"testing"
)

// TestPolicyRefusal: a restart under another policy is refused naming
// both policies, their flags and --reset-policy (the decision is core's,
// TestDecidePolicy there).
func TestPolicyRefusal(t *testing.T) {
	for _, c := range []struct {
		stored  string
		current Policy
		says    []string
	}{
		{"prune", Keep, []string{"policy prune (--prune)", "policy keep (neither --overwrite nor --prune)", "--reset-policy"}},
		{"keep", Prune, []string{"policy keep", "policy prune (--prune)"}},
		{"overwrite", Prune, []string{"policy overwrite (--overwrite)", "policy prune (--prune)"}},
	} {
		err := policyRefusal(c.stored, c.current, "m")
		if !errors.Is(err, ErrRefused) {
			t.Errorf("stored %q, current %s: %v, want a refusal", c.stored, c.current, err)
			continue
		}
		for _, w := range append(c.says, `mirror "m"`) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("stored %q, current %s: refusal %q does not say %q", c.stored, c.current, err, w)
			}
		}
	}
}
