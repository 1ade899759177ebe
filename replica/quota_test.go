package replica

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/understudy-kv/understudy/membership"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/storage"
)

func TestDecideQuotaNeverBelowAVoter(t *testing.T) {
	const mib = 1 << 20
	voters := map[string]int64{"a": 64 * mib, "b": 128 * mib, "c": 64 * mib}
	for _, tc := range []struct {
		name     string
		explicit int64
		voters   map[string]int64
		want     int64
		wantErr  string
	}{
		{name: "default takes the largest voter's", voters: voters, want: 128 * mib},
		{name: "explicit at the largest", explicit: 128 * mib, voters: voters, want: 128 * mib},
		{name: "explicit above", explicit: 1 << 30, voters: voters, want: 1 << 30},
		{name: "explicit below is refused, naming the voter", explicit: 100 * mib, voters: voters, wantErr: "voter b's 134217728"},
		{name: "no voter answered: explicit", explicit: 100 * mib, want: 100 * mib},
		{name: "no voter answered: etcd's largest", want: storage.MaxQuotaBytes},
		{name: "a voter without a quota: none", voters: map[string]int64{"a": 64 * mib, "b": -1}, want: noQuota},
		{name: "explicit below a voter without a quota is refused", explicit: 1 << 30, voters: map[string]int64{"a": 64 * mib, "b": -1}, wantErr: "voter b's none (disabled)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decideQuota(tc.explicit, tc.voters)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrQuotaBelowVoters) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--quota-backend-bytes") {
					t.Fatalf("err = %v, want ErrQuotaBelowVoters naming the flag and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// The guard's rule: a replica adds a way to NOSPACE only while its quota
// is below every voter's (the smallest voter's stops the cluster first).
func TestBelowEveryVoter(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name   string
		own    int64
		voters map[string]int64
		who    string
		below  bool
	}{
		{"equal to the voters", 64 * mib, map[string]int64{"a": 64 * mib, "b": 64 * mib}, "a", false},
		{"one voter raised: the others still stop first", 64 * mib, map[string]int64{"a": 64 * mib, "b": 128 * mib, "c": 64 * mib}, "a", false},
		{"every voter raised", 64 * mib, map[string]int64{"a": 128 * mib, "b": 256 * mib, "c": 128 * mib}, "a", true},
		{"every voter without a quota", 64 * mib, map[string]int64{"a": -1, "b": -1}, "a", true},
		{"this member without a quota", -1, map[string]int64{"a": 128 * mib}, "a", false},
		{"one voter without a quota, one raised", 64 * mib, map[string]int64{"a": -1, "b": 128 * mib}, "b", true},
		{"no voter answered", 64 * mib, nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			who, _, below := belowEveryVoter(tc.own, tc.voters)
			if who != tc.who || below != tc.below {
				t.Fatalf("belowEveryVoter = %q, %v; want %q, %v", who, below, tc.who, tc.below)
			}
		})
	}
}

// The gate never lets the guard stop a member whose promotion is under
// way or in doubt, and no promotion starts once the guard stops.
func TestPromotionGate(t *testing.T) {
	learner := func() (bool, error) { return true, nil }
	t.Run("a refused promotion leaves no doubt", func(t *testing.T) {
		var g promotionGate
		refusal := &membership.ChangeError{Change: membership.Change{Op: membership.OpPromote, ID: 2}, Verdict: membership.Refused, Attempts: 1, Err: rpctypes.ErrMemberLearnerNotReady}
		if err := g.promote(func() error { return fmt.Errorf("at the leader m1: %w", refusal) }); err == nil {
			t.Fatal("promote: want the refusal")
		}
		if ok, err := g.stop(learner); !ok || err != nil {
			t.Fatalf("stop after a refused promotion: %v, %v; want true", ok, err)
		}
		called := false
		if err := g.promote(func() error { called = true; return nil }); !errors.Is(err, errStopping) || called {
			t.Fatalf("promote after stop: %v (called %v); want errStopping, not called", err, called)
		}
	})
	t.Run("no promotion while the quota is below every voter's", func(t *testing.T) {
		var g promotionGate
		g.setBelow(true)
		called := false
		if err := g.promote(func() error { called = true; return nil }); !errors.Is(err, errQuotaBelow) || called {
			t.Fatalf("promote while below: %v (called %v); want errQuotaBelow, not called", err, called)
		}
		g.setBelow(false)
		if err := g.promote(func() error { called = true; return nil }); err != nil || !called {
			t.Fatalf("promote once in line again: %v (called %v)", err, called)
		}
	})
	t.Run("a promotion in doubt keeps the member", func(t *testing.T) {
		var g promotionGate
		_ = g.promote(func() error { return fmt.Errorf("wrapped: %w", context.DeadlineExceeded) })
		if ok, err := g.stop(learner); ok || err == nil {
			t.Fatalf("stop after a promotion in doubt: %v, %v; want false and why", ok, err)
		}
	})
	t.Run("a voter is never stopped", func(t *testing.T) {
		var g promotionGate
		if ok, _ := g.stop(func() (bool, error) { return false, nil }); ok {
			t.Fatal("stop of a voter: true")
		}
		if ok, _ := g.stop(func() (bool, error) { return false, errors.New("member list: unavailable") }); ok {
			t.Fatal("stop when the member list cannot be read: true")
		}
		if err := g.promote(func() error { return nil }); err != nil {
			t.Fatalf("promote after a refused stop: %v", err)
		}
	})
	t.Run("neither waits for the other", func(t *testing.T) {
		var g promotionGate
		inPromote, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
		go func() {
			done <- g.promote(func() error { close(inPromote); <-release; return nil })
		}()
		<-inPromote
		called := false
		if ok, err := g.stop(func() (bool, error) { called = true; return true, nil }); ok || !errors.Is(err, errPromoting) || called {
			t.Fatalf("stop during a promotion: %v, %v (asked the member list: %v); want false, errPromoting, not asked", ok, err, called)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if ok, _ := g.stop(func() (bool, error) { return false, nil }); ok { // promoted by now
			t.Fatal("stop after the promotion: true")
		}

		var h promotionGate
		inCheck, release, stopped := make(chan struct{}), make(chan struct{}), make(chan bool)
		go func() {
			ok, _ := h.stop(func() (bool, error) { close(inCheck); <-release; return true, nil })
			stopped <- ok
		}()
		<-inCheck
		called = false
		if err := h.promote(func() error { called = true; return nil }); !errors.Is(err, errQuotaChecking) || called {
			t.Fatalf("promote during a quota check: %v (called %v); want errQuotaChecking, not called", err, called)
		}
		close(release)
		if !<-stopped {
			t.Fatal("the check that found a learner did not stop it")
		}
		if err := h.promote(func() error { called = true; return nil }); !errors.Is(err, errStopping) || called {
			t.Fatalf("promote after the stop: %v (called %v); want errStopping", err, called)
		}
	})
}
