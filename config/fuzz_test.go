package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadReplica: any flags, environment value and config file either load
// or fail with an error; Validate never panics, and an accepted config is
// one Validate accepts the next time too.
func FuzzLoadReplica(f *testing.F) {
	f.Add("--name r1 --join http://127.0.0.1:2379", "50ms", "max-staleness: 1s\n")
	f.Add("--listen-client-urls http://127.0.0.1:2479 --quota-backend-bytes 1024", "x", "join: [http://a:1]\n")
	f.Add("--role standby --failover-after 1s", "", "role: voter\npromote-max-lag: -1\n")
	f.Add("--max-concurrent-streams 99999999999 --ready-max-staleness 1ms", "1h", "{{{")
	f.Add("--user root:pw --password x", "0s", "password: 3\n")
	f.Fuzz(func(t *testing.T, args, env, file string) {
		// An environment value cannot hold NUL; every other byte goes.
		t.Setenv("UNDERSTUDY_FRESHNESS_INTERVAL", strings.ReplaceAll(env, "\x00", ""))
		path := filepath.Join(t.TempDir(), "replica.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := DefaultReplica()
		argv := append(strings.Fields(args), "--config-file", path)
		if err := LoadReplica(&cfg, NewReplicaFlags(&cfg), argv); err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		if err := cfg.Validate(); err == nil {
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate changed its mind: %v", err)
			}
		}
	})
}

// FuzzLoadPrimary: the same for the primary's etcd flags and config file.
func FuzzLoadPrimary(f *testing.F) {
	f.Add("--name infra1 --max-learners 3", "name: x\n")
	f.Add("--listen-client-urls ::: --initial-cluster a=b", "initial-cluster-state: maybe\n")
	f.Fuzz(func(t *testing.T, args, file string) {
		path := filepath.Join(t.TempDir(), "etcd.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := DefaultPrimary()
		if err := NewPrimaryFlags(&cfg).Load(append(strings.Fields(args), "--config-file", path)); err != nil {
			return
		}
		_ = cfg.Validate()
	})
}

// FuzzLoadMirror: the same for `replica mirror`'s flags, environment and
// config file.
func FuzzLoadMirror(f *testing.F) {
	f.Add("--source-endpoints http://127.0.0.1:2379 --dest-endpoints http://127.0.0.1:3379 --prefix /registry/", "10s", "no-dest-prefix: true\n")
	f.Add("--source-endpoints a --dest-endpoints a --overwrite --prune", "-1s", "max-txn-ops: 0\n")
	f.Add("--dest-prefix /x --no-dest-prefix --rev -5 --page-size 0", "x", "stall-timeout: 1ns\n")
	f.Fuzz(func(t *testing.T, args, env, file string) {
		t.Setenv("UNDERSTUDY_COMMAND_TIMEOUT", strings.ReplaceAll(env, "\x00", ""))
		path := filepath.Join(t.TempDir(), "mirror.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := DefaultMirror()
		argv := append(strings.Fields(args), "--config-file", path)
		if err := LoadMirror(&cfg, NewMirrorFlags(&cfg), argv); err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		if err := cfg.Validate(); err == nil {
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate changed its mind: %v", err)
			}
		}
	})
}

// FuzzLoadCompare: the same for `replica compare`'s flags, environment and
// config file.
func FuzzLoadCompare(f *testing.F) {
	f.Add("--local --fault leader-kill --fault-at 5s", "x", "duration: 10s\n")
	f.Add("--primary http://a:1 --replica b --mirror-dest , --password p", "pw", "keys: -1\n")
	f.Add("--local --primary http://a:1 --doc d.md --out ''", "", "fault: [a, b]\n")
	f.Fuzz(func(t *testing.T, args, env, file string) {
		t.Setenv("UNDERSTUDY_PASSWORD", strings.ReplaceAll(env, "\x00", ""))
		path := filepath.Join(t.TempDir(), "compare.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := DefaultCompare()
		argv := append(strings.Fields(args), "--config-file", path)
		if err := LoadCompare(&cfg, NewCompareFlags(&cfg), argv); err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		if err := cfg.Validate(); err == nil {
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate changed its mind: %v", err)
			}
		}
	})
}
