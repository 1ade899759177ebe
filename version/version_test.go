package version

import (
	"strings"
	"testing"
)

func TestStringNamesVersionAndRevision(t *testing.T) {
	defer func(v, r string) { Version, Revision = v, r }(Version, Revision)
	Version, Revision = "v9.8.7", "0123abcd"
	s := String()
	for _, want := range []string{"understudy Version: v9.8.7\n", "Git SHA: 0123abcd\n", "etcd Version: 3.", "Go OS/Arch: "} {
		if !strings.Contains(s, want) {
			t.Errorf("String() = %q, want it to contain %q", s, want)
		}
	}
}
