package config

import (
	"crypto/tls"
	"errors"
	"math"
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
	if cfg.MaxTxnOps != 128 || cfg.MaxRequestBytes != 1.5*1024*1024 || cfg.MaxConcurrentStreams != math.MaxUint32 || cfg.WatchProgressNotifyInterval != 10*time.Minute || cfg.Learner.QuotaBackendBytes != 0 {
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

// etcd's TLS version and cipher flags, with etcd's defaults and rules.
func TestReplicaTLSVersionsAreEtcds(t *testing.T) {
	cfg := DefaultReplica()
	if cfg.TLSVersions.MinVersion != "TLS1.2" || cfg.TLSVersions.MaxVersion != "" || len(cfg.TLSVersions.CipherSuites) != 0 {
		t.Errorf("defaults differ from etcd's: %+v", cfg.TLSVersions)
	}
	for _, tc := range []struct {
		args []string
		want string // "" for valid
	}{
		{[]string{"--tls-min-version", "TLS1.3"}, ""},
		{[]string{"--tls-max-version", "TLS1.2", "--cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, ""},
		{[]string{"--tls-min-version", "TLS1.1"}, `--tls-min-version "TLS1.1": must be TLS1.2 or TLS1.3`},
		{[]string{"--tls-max-version", "1.3"}, `--tls-max-version "1.3": must be TLS1.2, TLS1.3 or empty`},
		{[]string{"--tls-min-version", "TLS1.3", "--tls-max-version", "TLS1.2"}, "--tls-min-version TLS1.3 is above --tls-max-version TLS1.2"},
		{[]string{"--cipher-suites", "TLS_RSA_WITH_NOTHING"}, "--cipher-suites TLS_RSA_WITH_NOTHING: "},
		{[]string{"--tls-min-version", "TLS1.3", "--cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}, "--cipher-suites: cannot be chosen when --tls-min-version is TLS1.3"},
	} {
		cfg := DefaultReplica()
		err := LoadReplica(&cfg, NewReplicaFlags(&cfg), tc.args)
		err = errors.Join(err, cfg.TLSVersions.Validate())
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want it to say %q", tc.args, err, tc.want)
		}
	}
	var c tls.Config
	v := TLSVersions{MinVersion: "TLS1.2", MaxVersion: "TLS1.2", CipherSuites: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}}
	v.Apply(&c)
	if c.MinVersion != tls.VersionTLS12 || c.MaxVersion != tls.VersionTLS12 || len(c.CipherSuites) != 1 || c.CipherSuites[0] != tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 {
		t.Errorf("applied: min %x max %x suites %x", c.MinVersion, c.MaxVersion, c.CipherSuites)
	}
	DefaultTLSVersions().Apply(nil) // no TLS: nothing to bound
}
