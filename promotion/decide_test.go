package promotion

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func cfg(role Role) Config {
	c := DefaultConfig()
	c.Role, c.MaxLag, c.Hold, c.LeaderContact, c.FailoverAfter = role, 100, 5*time.Second, 2*time.Second, 10*time.Second
	return c
}

func voters(n int) []Voter {
	var vs []Voter
	for i := range n {
		vs = append(vs, Voter{ID: uint64(i + 1), Name: "m" + string(rune('1'+i)), PeerAnswered: true, PeerSeen: true, Leader: LeaderViewActive})
	}
	return vs
}

// caughtUp is an observation at t0+at of a learner 10 entries behind that
// heard from the leader 100ms ago.
func caughtUp(at time.Duration) Observation {
	now := t0.Add(at)
	return Observation{Now: now, SelfID: 99, SelfName: "s1", IsLearner: true, Leader: 1, LastLeaderContact: now.Add(-100 * time.Millisecond),
		Applied: 990, LeaderCommit: 1000, Voters: voters(3)}
}

func TestReaderNeverPromotes(t *testing.T) {
	d := NewDecider(cfg(RoleReader))
	for at := time.Duration(0); at < time.Hour; at += time.Second {
		if a := d.Step(caughtUp(at)); a.Kind != None {
			t.Fatalf("reader asked for %v at %v", a.Kind, at)
		}
	}
}

func TestVoterPromotesAfterAnUnbrokenHold(t *testing.T) {
	d := NewDecider(cfg(RoleVoter))
	for at := time.Duration(0); at < 5*time.Second; at += time.Second {
		if a := d.Step(caughtUp(at)); a.Kind != None {
			t.Fatalf("promoted after %v, before the 5s hold", at)
		}
	}
	// One lagging observation restarts the hold.
	lagging := caughtUp(4500 * time.Millisecond)
	lagging.Applied = 800
	d = NewDecider(cfg(RoleVoter))
	for _, o := range []Observation{caughtUp(0), caughtUp(2 * time.Second), lagging, caughtUp(5 * time.Second), caughtUp(9 * time.Second)} {
		if a := d.Step(o); a.Kind != None {
			t.Fatalf("promoted at %v although the hold restarted at 4.5s", o.Now.Sub(t0))
		}
	}
	if a := d.Step(caughtUp(10 * time.Second)); a.Kind != Promote || a.Target != 99 {
		t.Fatalf("after 5s caught up: %+v, want promote 99", a)
	}
	// A stale leader contact restarts it too.
	stale := caughtUp(3 * time.Second)
	stale.LastLeaderContact = stale.Now.Add(-3 * time.Second)
	d = NewDecider(cfg(RoleVoter))
	for _, o := range []Observation{caughtUp(0), stale, caughtUp(6 * time.Second)} {
		if a := d.Step(o); a.Kind != None {
			t.Fatalf("promoted at %v with the leader unheard at 3s", o.Now.Sub(t0))
		}
	}
	promoted := caughtUp(time.Minute)
	promoted.IsLearner = false
	if a := d.Step(promoted); a.Kind != None {
		t.Fatalf("a promoted voter asked for %v", a.Kind)
	}
}

func TestVoterWithoutLeaderNeverPromotes(t *testing.T) {
	d := NewDecider(cfg(RoleVoter))
	for at := time.Duration(0); at < time.Minute; at += time.Second {
		o := caughtUp(at)
		o.Leader = 0
		if a := d.Step(o); a.Kind != None {
			t.Fatalf("promoted with no leader known at %v", at)
		}
	}
}

func TestStoppedLearnerAFewPercentBehindIsNeverPromoted(t *testing.T) {
	// 97% of the leader's log: etcd's 90% rule would promote it.
	d := NewDecider(cfg(RoleVoter))
	for at := time.Duration(0); at < time.Hour; at += 10 * time.Second {
		o := caughtUp(at)
		o.Applied, o.LeaderCommit = 970_000, 1_000_000
		o.LastLeaderContact = t0.Add(-30 * time.Second) // stopped since
		if a := d.Step(o); a.Kind != None {
			t.Fatalf("promoted a stopped learner at %v", at)
		}
	}
	o := caughtUp(0)
	o.Applied, o.LeaderCommit = 970_000, 1_000_000
	o.LastLeaderContact = t0.Add(-30 * time.Second)
	ok, why := CaughtUp(cfg(RoleVoter), o)
	if ok || !strings.Contains(why, "30000 entries behind the leader's commit 1000000 (bound 100)") || !strings.Contains(why, "not heard from the leader for 30s") {
		t.Fatalf("CaughtUp = %v, %q; want a refusal giving the lag and the silence", ok, why)
	}
}

func TestValidateNamesEveryFlag(t *testing.T) {
	err := Config{Role: "leader", Hold: -time.Second, LeaderContact: 0, FailoverAfter: -1}.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{`--role "leader": want one of reader, standby, voter`, "--promote-hold -1s", "--promote-leader-contact 0s", "--failover-after -1ns"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
}
