package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestReplicaPasswordFromTheEnvironmentStaysOutOfArgs(t *testing.T) {
	t.Setenv("UNDERSTUDY_PASSWORD", "s3cret")
	cfg := DefaultReplica()
	if err := LoadReplica(&cfg, NewReplicaFlags(&cfg), []string{"--user", "root"}); err != nil {
		t.Fatal(err)
	}
	if u, p := cfg.Credentials(); u != "root" || p != "s3cret" {
		t.Fatalf("credentials %q %q, want root and the environment's password", u, p)
	}
	cfg.User, cfg.Password = "alice:pw", ""
	if u, p := cfg.Credentials(); u != "alice" || p != "pw" {
		t.Fatalf("--user name:password gave %q %q", u, p)
	}
}

func TestReplicaLimitsHaveEtcdsNamesAndDefaults(t *testing.T) {
	cfg := DefaultReplica()
	fs := NewReplicaFlags(&cfg)
	for _, name := range []string{"quota-backend-bytes", "max-request-bytes", "max-txn-ops", "max-concurrent-streams",
		"grpc-keepalive-min-time", "grpc-keepalive-interval", "grpc-keepalive-timeout", "watch-progress-notify-interval"} {
		if fs.Lookup(name) == nil {
			t.Errorf("no --%s", name)
		}
	}
	if cfg.MaxTxnOps != 128 || cfg.MaxRequestBytes != 1.5*1024*1024 || cfg.WatchProgressNotifyInterval != 10*time.Minute || cfg.QuotaBackendBytes != 0 {
		t.Errorf("defaults differ from etcd's: %+v", cfg)
	}
	if got := cfg.ReadyStaleness(); got != 5*time.Second {
		t.Errorf("ready staleness %v with 50ms rounds, want 5s", got)
	}
	cfg.ReadIndex.Interval, cfg.ReadIndex.IdleInterval = 5*time.Second, time.Second
	if got := cfg.ReadyStaleness(); got != 15*time.Second {
		t.Errorf("ready staleness %v with 5s rounds, want 15s", got)
	}
	err := LoadReplica(&cfg, NewReplicaFlags(&cfg), []string{"--quota-backend-bytes", "-1", "--max-txn-ops", "0", "--ready-max-staleness", "1s", "--max-concurrent-streams", "x"})
	err = errors.Join(err, cfg.Validate())
	for _, want := range []string{"--quota-backend-bytes -1", "--max-txn-ops 0", "--ready-max-staleness 1s", "max-concurrent-streams"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %q", err, want)
		}
	}
}
