package config

import (
	"os"
	"strings"
	"testing"
)

func TestAdminFlagsAndProblems(t *testing.T) {
	const ep = "http://10.0.0.1:2379"
	for _, c := range []struct {
		cmd  string
		args []string
		want string // "" is valid
	}{
		{"status", nil, ""},
		{"status", []string{"r1"}, `"r1": unexpected argument`},
		{"promote", []string{"r1", "--force", "--endpoints", ep}, ""},
		{"promote", []string{"--endpoints", ep}, "give one member NAME or hex ID"},
		{"hold", []string{"m2", "--for", "30m", "--reason", "reboot", "--endpoints", ep}, ""},
		{"hold", []string{"--all", "--for", "30m", "--endpoints", ep}, ""},
		{"hold", []string{"--release", "m2", "--endpoints", ep}, ""},
		// What changes the cluster never defaults to 127.0.0.1:2379.
		{"promote", []string{"r1"}, "--endpoints: replica promote changes the cluster"},
		{"leave", []string{"r1"}, "--endpoints: replica leave changes the cluster"},
		{"hold", []string{"--all"}, "--endpoints: replica hold changes the cluster"},
		{"hold", []string{"m2", "--all"}, `"m2" and --all: give one voter NAME or hex ID, or --all, not both`},
		{"promote", []string{"r1", "--release"}, "--release: a flag of replica hold, not of replica promote"},
		{"status", []string{"--all", "--reason", "x"}, "--all: a flag of replica hold, not of replica status"},
		{"hold", nil, "give one voter NAME or hex ID, or --all"},
		{"hold", []string{"m2", "--for", "10ms"}, "--for 10ms: must be at least 1s"},
		{"status", []string{"-w", "yaml"}, `-w "yaml": want table or json`},
		{"leave", []string{"r1", "r2"}, `"r2": unexpected argument`},
		{"status", []string{"--password", "x"}, "--password: needs --user"},
		{"leave", []string{"--if-scaled-down", "--endpoints", ep}, ""},
		{"status", []string{"--if-scaled-down"}, "--if-scaled-down: a flag of replica leave, not of replica status"},
		{"leave", []string{"--if-scaled-down", "--shutdown-delay", "5s", "--endpoints", ep}, ""},
		{"leave", []string{"r1", "--shutdown-delay", "5s"}, "--shutdown-delay 5s: only with leave --if-scaled-down"},
		{"leave", []string{"--if-scaled-down", "--shutdown-delay", "-1s"}, "--shutdown-delay -1s: want 0 or more"},
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

// The admin commands read etcdctl's environment variables below their
// command line, as etcdctl does; leave --if-scaled-down is this pod's.
func TestAdminReadsEtcdctlEnvironment(t *testing.T) {
	t.Setenv("ETCDCTL_ENDPOINTS", "https://10.0.0.1:2379,https://10.0.0.2:2379")
	t.Setenv("ETCDCTL_CACERT", "/pki/ca.crt")
	var a Admin
	if err := LoadAdmin(&a, NewAdminFlags(&a, "leave"), []string{"--if-scaled-down", "--cacert", "/other/ca.crt"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(a.Conn.Endpoints, ","); got != "https://10.0.0.1:2379,https://10.0.0.2:2379" {
		t.Errorf("endpoints %q, want ETCDCTL_ENDPOINTS's", got)
	}
	if a.Conn.CACert != "/other/ca.crt" {
		t.Errorf("--cacert %q: the command line must win over ETCDCTL_CACERT", a.Conn.CACert)
	}
	host, _ := os.Hostname()
	if os.Getenv("POD_NAME") == "" && (a.Target != host || host == "") {
		t.Errorf("leave --if-scaled-down without a member: target %q, want the hostname %q", a.Target, host)
	}
	// Only the connection flags: a shell's ETCDCTL_WRITE_OUT=simple is
	// etcdctl's business.
	t.Setenv("ETCDCTL_WRITE_OUT", "simple")
	t.Setenv("ETCDCTL_FORCE", "true")
	var b Admin // promote's --endpoints from ETCDCTL_ENDPOINTS
	if err := LoadAdmin(&b, NewAdminFlags(&b, "promote"), []string{"r1"}); err != nil || b.Validate() != nil || b.Force || b.Write != "table" {
		t.Errorf("ETCDCTL_WRITE_OUT and ETCDCTL_FORCE changed promote: %v, %v, force %v, -w %q", err, b.Validate(), b.Force, b.Write)
	}
	t.Setenv("POD_NAME", "understudy-replica-reader-3")
	var c Admin
	if err := LoadAdmin(&c, NewAdminFlags(&c, "leave"), []string{"--if-scaled-down"}); err != nil || c.Target != "understudy-replica-reader-3" {
		t.Errorf("leave --if-scaled-down with POD_NAME: target %q, %v; want POD_NAME's", c.Target, err)
	}
	t.Setenv("ETCDCTL_INSECURE_SKIP_TLS_VERIFY", "maybe")
	if err := LoadAdmin(&a, NewAdminFlags(&a, "status"), nil); err == nil || !strings.Contains(err.Error(), "ETCDCTL_INSECURE_SKIP_TLS_VERIFY") {
		t.Errorf("a bad ETCDCTL_ variable: %v, want an error naming it", err)
	}
}
