package config

import (
	"strings"
	"testing"
)

func TestMirrorValidateNamesEveryFlag(t *testing.T) {
	cfg := DefaultMirror()
	fs := NewMirrorFlags(&cfg)
	err := LoadMirror(&cfg, fs, []string{"--dest-endpoints", "localhost:2379", "--dest-prefix", "b/", "--no-dest-prefix",
		"--rev", "-3", "--max-txn-ops", "5", "--name", "a/b", "--source-cert", "c.pem", "--overwrite", "--prune",
		"--command-timeout", "0s", "--keepalive-time", "-1s", "--keepalive-timeout", "0s", "--stall-timeout", "0s", "--cycle-check-interval", "0s", "--drain-timeout", "0s"})
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	if err == nil {
		t.Fatal("bad mirror flags accepted")
	}
	for _, want := range []string{"--source-endpoints: required", "--dest-endpoints", "--dest-prefix \"b/\" and --no-dest-prefix", "--rev -3", "--max-txn-ops 5: must be at least 6", `--name "a/b"`, "--source-cert and --source-key",
		"--overwrite and --prune", "--command-timeout 0s", "--keepalive-time -1s", "--keepalive-timeout 0s", "--stall-timeout 0s", "--cycle-check-interval 0s", "--drain-timeout 0s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems %q do not name %q", err, want)
		}
	}
}

func TestMirrorDestPrefixMapping(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--prefix", "a/"}, "a/"},                        // keys keep their names
		{[]string{"--prefix", "a/", "--dest-prefix", "b/"}, "b/"}, // replaced
		{[]string{"--prefix", "a/", "--dest-prefix", ""}, ""},     // given empty: the root
		{[]string{"--prefix", "a/", "--no-dest-prefix"}, ""},      // stripped
	} {
		cfg := DefaultMirror()
		if err := LoadMirror(&cfg, NewMirrorFlags(&cfg), append(c.args, "--source-endpoints", "http://s:2379", "--dest-endpoints", "http://d:2379")); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if got := cfg.DestPrefix; got != c.want {
			t.Errorf("%v: destination prefix %q, want %q", c.args, got, c.want)
		}
	}
}

func TestReplicaRoleFlags(t *testing.T) {
	cfg := DefaultReplica()
	err := LoadReplica(&cfg, NewReplicaFlags(&cfg), []string{"--role", "leader"})
	if err == nil || !strings.Contains(err.Error(), `--role "leader": want one of reader, standby, voter`) {
		t.Fatalf("--role leader: %v", err)
	}
	cfg = DefaultReplica()
	if err := LoadReplica(&cfg, NewReplicaFlags(&cfg), []string{"--role", "standby", "--failover-after", "-1s"}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--failover-after -1s") {
		t.Fatalf("--failover-after -1s: %v", err)
	}
}

func TestMirrorResetPolicyFlag(t *testing.T) {
	cfg := DefaultMirror()
	if cfg.ResetPolicy {
		t.Fatal("--reset-policy on by default")
	}
	if err := LoadMirror(&cfg, NewMirrorFlags(&cfg), []string{"--source-endpoints", "http://s:2379", "--dest-endpoints", "http://d:2379", "--prune", "--reset-policy"}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if !cfg.ResetPolicy || !cfg.Prune {
		t.Fatalf("--prune --reset-policy parsed as prune %v, reset-policy %v", cfg.Prune, cfg.ResetPolicy)
	}
}
