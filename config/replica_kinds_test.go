package config

import (
	"errors"
	"flag"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// loadReplica loads args as the command does: every problem it would
// print, and the config.
func loadReplica(t *testing.T, args ...string) (Replica, error) {
	t.Helper()
	cfg := DefaultReplica()
	err := LoadReplica(&cfg, NewReplicaFlags(&cfg), args)
	return cfg, errors.Join(err, cfg.Validate())
}

// The flags make one kind: --upstream a cascaded replica, with no learner
// settings at all; no --upstream a learner replica, with no cascaded ones.
func TestReplicaFlagsMakeOneKind(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct {
		args     []string
		cascaded bool
	}{
		{nil, false},
		{[]string{"--join", "http://10.0.0.1:2379"}, false},
		{[]string{"--resolver-ttl", "3", "--announce=false"}, false}, // unused without --upstream, as before
		{[]string{"--upstream", "http://10.0.0.9:2379"}, true},
		{[]string{"--upstream", "http://10.0.0.9:2379", "--heartbeat-interval", "200", "--listen-peer-urls", "http://0.0.0.0:2480"}, true}, // unused with it
		{[]string{"--upstream", ""}, false},
	} {
		cfg, err := loadReplica(t, tc.args...)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if got := cfg.Cascaded != nil; got != tc.cascaded || (cfg.Learner != nil) == tc.cascaded {
			t.Errorf("%q: learner part %v, cascaded part %v; want cascaded %v and no part of the other kind", tc.args, cfg.Learner != nil, cfg.Cascaded != nil, tc.cascaded)
		}
	}
	cfg, err := loadReplica(t, "--upstream", "http://10.0.0.9:2379,http://10.0.0.8:2379", "--resolver-ttl", "3", "--resolver-prefix", "/p/", "--announce=false")
	if err != nil {
		t.Fatal(err)
	}
	if c := *cfg.Cascaded; strings.Join(c.Upstream, ",") != "http://10.0.0.9:2379,http://10.0.0.8:2379" || c.ResolverTTL != 3 || c.ResolverPrefix != "/p/" || c.Announce {
		t.Errorf("cascaded part %+v", c)
	}
}

// A learner replica's setting beside --upstream is refused, in the words
// the refusal has always had, one line each, all at once.
func TestCascadedReplicaRefusesLearnerSettings(t *testing.T) {
	clearEnv(t)
	up := []string{"--upstream", "http://10.0.0.9:2379"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--join", "http://10.0.0.1:2379"}, "--upstream and --join: give --join for a learner replica (a member of the cluster) or --upstream for a cascaded replica (fed by another replica's watch), not both"},
		{[]string{"--join", ""}, "--upstream and --join: give --join for a learner replica (a member of the cluster) or --upstream for a cascaded replica (fed by another replica's watch), not both"},
		{[]string{"--role", "standby"}, "--role standby with --upstream: a cascaded replica is no member of the cluster and cannot be promoted; give --join for a standby or voter role"},
		{[]string{"--read-index-via", "http://10.0.0.2:2479"}, "--read-index-via with --upstream: a cascaded replica's strong reads already go through its upstream"},
		{[]string{"--remove-on-exit"}, "--remove-on-exit with --upstream: a cascaded replica has no member entry to remove"},
		{[]string{"--replace-own-learner"}, "--replace-own-learner with --upstream: a cascaded replica has no member entry"},
		{[]string{"--replace-stale-data-dir", "abc"}, "--replace-stale-data-dir with --upstream: a cascaded replica bootstraps its store again by itself"},
		{[]string{"--resolver-ttl", "0"}, "--resolver-ttl 0: must be at least 1 (seconds)"},
		{[]string{"--listen-client-urls", "http://10.0.0.9:2379"}, "--upstream http://10.0.0.9:2379: is this replica's own client URL; name a replica or member of the source cluster"},
	} {
		_, err := loadReplica(t, append(append([]string{}, up...), tc.args...)...)
		if got := lines(err); len(got) != 1 || got[0] != tc.want {
			t.Errorf("%q: %q, want %q", tc.args, got, tc.want)
		}
	}
	// Given through the environment, as through flags.
	t.Setenv("UNDERSTUDY_ROLE", "voter")
	if _, err := loadReplica(t, up...); err == nil || !strings.Contains(err.Error(), "--role voter with --upstream") {
		t.Errorf("UNDERSTUDY_ROLE=voter with --upstream: %v", err)
	}
	t.Setenv("UNDERSTUDY_ROLE", "reader")
	_, err := loadReplica(t, append(up, "--join", "http://10.0.0.1:2379", "--remove-on-exit", "--role", "voter")...)
	if got := lines(err); len(got) != 3 {
		t.Errorf("three learner settings with --upstream: %q, want three problems", got)
	}
}

// Validate takes one kind: both or neither is refused.
func TestReplicaValidateWantsOneKind(t *testing.T) {
	l, c := DefaultLearner(), DefaultCascaded()
	c.Upstream = []string{"http://10.0.0.9:2379"}
	for _, tc := range []struct {
		cfg  Replica
		want string
	}{
		{Replica{Front: DefaultFront(), Learner: &l}, ""},
		{Replica{Front: DefaultFront(), Cascaded: &c}, ""},
		{Replica{Front: DefaultFront(), Learner: &l, Cascaded: &c}, "not both"},
		{Replica{Front: DefaultFront()}, "set one"},
	} {
		err := tc.cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("learner %v, cascaded %v: %v", tc.cfg.Learner != nil, tc.cfg.Cascaded != nil, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("learner %v, cascaded %v: %v, want %q", tc.cfg.Learner != nil, tc.cfg.Cascaded != nil, err, tc.want)
		}
	}
}

// Each part reports every bad field of its own, and only its own.
func TestEachPartReportsItsOwnFields(t *testing.T) {
	for _, tc := range []struct {
		part     string
		err      error
		want     []string
		notOwned []string
	}{
		{"front", Front{}.Validate(),
			[]string{"--name: must not be empty", "--data-dir: must not be empty", "--listen-client-urls: must name at least one URL", "--join-timeout 0s", "--grpc-keepalive-min-time 0s", "--watch-progress-notify-interval 0s", "--freshness-headers", "--log-level", "--max-request-bytes 0", "--max-txn-ops 0"},
			// etcd's --max-concurrent-streams 0 is no limit.
			[]string{"--heartbeat-interval", "--listen-peer-urls", "--upstream", "--resolver-ttl", "--max-concurrent-streams"}},
		{"learner", Learner{}.Validate(),
			[]string{"--listen-peer-urls: must name at least one URL", "--initial-advertise-peer-urls: must name at least one URL", "--heartbeat-interval 0", "--quota-check-interval 0s"},
			[]string{"--name", "--listen-client-urls", "--upstream", "--resolver-ttl", "--max-request-bytes", "--max-txn-ops"}},
		{"cascaded", Cascaded{}.Validate(),
			[]string{"--upstream: must name at least one client URL", "--resolver-ttl 0: must be at least 1"},
			[]string{"--name", "--listen-client-urls", "--heartbeat-interval", "--join"}},
	} {
		if tc.err == nil {
			t.Errorf("%s: the zero value validates", tc.part)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(tc.err.Error(), w) {
				t.Errorf("%s: %q missing from:\n%v", tc.part, w, tc.err)
			}
		}
		for _, n := range tc.notOwned {
			if strings.Contains(tc.err.Error(), n) {
				t.Errorf("%s: names %s, another part's flag:\n%v", tc.part, n, tc.err)
			}
		}
	}
}

// learnerFlags are exactly the flags bound to Learner's fields, and those
// given beside --upstream, but --join (refused), are named as unused.
func TestLearnerFlagsAreTheLearnersFields(t *testing.T) {
	clearEnv(t)
	cfg := DefaultReplica()
	fs := NewReplicaFlags(&cfg)
	l := cfg.Learner
	start := reflect.ValueOf(l).Pointer()
	end := start + reflect.TypeOf(*l).Size()
	var bound []string
	fs.VisitAll(func(f *flag.Flag) {
		if v := reflect.ValueOf(f.Value); v.Kind() == reflect.Pointer && v.Pointer() >= start && v.Pointer() < end {
			bound = append(bound, f.Name)
		}
	})
	// fs.Func: its Value holds no field (a learner flag defined so must
	// be added here and to learnerFlags).
	bound = append(bound, "join")
	slices.Sort(bound)
	if want := slices.Sorted(slices.Values(learnerFlags)); !slices.Equal(bound, want) {
		t.Errorf("flags bound to Learner's fields:\n%v\nlearnerFlags:\n%v", bound, want)
	}

	got, err := loadReplica(t, "--upstream", "http://10.0.0.9:2379", "--heartbeat-interval", "200", "--role", "reader", "--max-txn-ops", "7")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"--heartbeat-interval", "--role"}; !slices.Equal(got.Cascaded.Unused, want) {
		t.Errorf("unused flags %v, want %v (--max-txn-ops is the front's)", got.Cascaded.Unused, want)
	}
	if got.MaxTxnOps != 7 {
		t.Errorf("--max-txn-ops 7 with --upstream: %d", got.MaxTxnOps)
	}
}
