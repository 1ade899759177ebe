package mirror

import (
	"strings"
	"testing"

	"github.com/understudy-kv/understudy/mirror/core"
)

// TestConfigValidate: a mirror's Config is refused without its clients
// and logger, and with bad settings, which core.Settings names by flag:
// the one Validate of the settings config.Mirror checks too.
func TestConfigValidate(t *testing.T) {
	err := Config{Settings: core.Settings{Name: "a/b"}}.Validate()
	if err == nil {
		t.Fatal("an empty config passed")
	}
	for _, want := range []string{"mirror: Source and Dest clients are required", "mirror: Logger is required", `--name "a/b"`, "--max-txn-ops 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems do not say %q:\n%v", want, err)
		}
	}
}
