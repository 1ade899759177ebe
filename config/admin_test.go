package config

import (
	"strings"
	"testing"
)

func TestAdminFlagsAndProblems(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		args []string
		want string // "" is valid
	}{
		{"status", nil, ""},
		{"status", []string{"r1"}, `"r1": unexpected argument`},
		{"promote", []string{"r1", "--force"}, ""},
		{"promote", nil, "give one member NAME or hex ID"},
		{"hold", []string{"m2", "--for", "30m", "--reason", "reboot"}, ""},
		{"hold", []string{"--all", "--for", "30m"}, ""},
		{"hold", []string{"--release", "m2"}, ""},
		{"hold", []string{"m2", "--all"}, `"m2" and --all: give one voter NAME or hex ID, or --all, not both`},
		{"promote", []string{"r1", "--release"}, "--release: a flag of replica hold, not of replica promote"},
		{"status", []string{"--all", "--reason", "x"}, "--all: a flag of replica hold, not of replica status"},
		{"hold", nil, "give one voter NAME or hex ID, or --all"},
		{"hold", []string{"m2", "--for", "10ms"}, "--for 10ms: must be at least 1s"},
		{"status", []string{"-w", "yaml"}, `-w "yaml": want table or json`},
		{"leave", []string{"r1", "r2"}, `"r2": unexpected argument`},
		{"status", []string{"--password", "x"}, "--password: needs --user"},
	} {
		var a Admin
		fs := NewAdminFlags(&a, c.cmd)
		err := LoadAdmin(&a, fs, c.args)
		if err == nil {
			err = a.Validate()
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %v: %v", c.cmd, c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %v: %v, want %q", c.cmd, c.args, err, c.want)
		}
	}
}
