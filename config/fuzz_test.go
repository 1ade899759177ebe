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
		fuzzLoad(t, "UNDERSTUDY_FRESHNESS_INTERVAL", env, "replica.yaml", file, args, DefaultReplica, func(cfg *Replica, argv []string) error { return LoadReplica(cfg, NewReplicaFlags(cfg), argv) })
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
		fuzzLoad(t, "UNDERSTUDY_COMMAND_TIMEOUT", env, "mirror.yaml", file, args, DefaultMirror, func(cfg *Mirror, argv []string) error { return LoadMirror(cfg, NewMirrorFlags(cfg), argv) })
	})
}

// FuzzLoadCompare: the same for `replica compare`'s flags, environment and
// config file.
func FuzzLoadCompare(f *testing.F) {
	f.Add("--local --fault leader-kill --fault-at 5s", "x", "duration: 10s\n")
	f.Add("--primary http://a:1 --replica b --mirror-dest , --password p", "pw", "keys: -1\n")
	f.Add("--local --primary http://a:1 --doc d.md --out ''", "", "fault: [a, b]\n")
	f.Fuzz(func(t *testing.T, args, env, file string) {
		fuzzLoad(t, "UNDERSTUDY_PASSWORD", env, "compare.yaml", file, args, DefaultCompare, func(cfg *Compare, argv []string) error { return LoadCompare(cfg, NewCompareFlags(cfg), argv) })
	})
}

// validator is a config that Validate checks.
type validator interface{ Validate() error }

// fuzzLoad is the body of the Load fuzzers: env as envVar's value, file as
// the config file (named name), args as the flags; the config from
// newConfig either loads or fails with an error, and one Validate accepts
// it accepts again.
func fuzzLoad[C any, P interface {
	*C
	validator
}](t *testing.T, envVar, env, name, file, args string, newConfig func() C, load func(cfg P, argv []string) error) {
	// An environment value cannot hold NUL; every other byte goes.
	t.Setenv(envVar, strings.ReplaceAll(env, "\x00", ""))
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := newConfig()
	if err := load(P(&cfg), append(strings.Fields(args), "--config-file", path)); err != nil {
		if err.Error() == "" {
			t.Fatal("an error without a message")
		}
		return
	}
	if err := P(&cfg).Validate(); err == nil {
		if err := P(&cfg).Validate(); err != nil {
			t.Fatalf("Validate changed its mind: %v", err)
		}
	}
}
