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
		vs = append(vs, Voter{ID: uint64(i + 1), Name: "m" + string(rune('1'+i)), Reachable: true})
	}
	return vs
}

// caughtUp is an observation at t0+at of a learner 10 entries behind that
// heard from the leader 100ms ago.
func caughtUp(at time.Duration) Observation {
	now := t0.Add(at)
	return Observation{Now: now, SelfID: 99, IsLearner: true, Leader: 1, LastLeaderContact: now.Add(-100 * time.Millisecond),
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

// standbyWith is caughtUp(at) with voter m2 unreachable since t0+since.
func standbyWith(at, since time.Duration, lock bool) Observation {
	o := caughtUp(at)
	o.Voters[1].Reachable, o.Voters[1].UnreachableSince = false, t0.Add(since)
	o.HoldsFailoverLock = lock
	return o
}

func TestStandbyReplacesADeadVoter(t *testing.T) {
	d := NewDecider(cfg(RoleStandby))
	for at := time.Duration(0); at <= 10*time.Second; at += time.Second {
		if a := d.Step(standbyWith(at, 0, false)); a.Kind != None {
			t.Fatalf("standby acted (%v) %v after the voter died, before --failover-after", a.Kind, at)
		}
	}
	if a := d.Step(standbyWith(11*time.Second, 0, false)); a.Kind != AcquireFailoverLock {
		t.Fatalf("voter dead 11s: %v, want to take the failover lock", a.Kind)
	}
	if a := d.Step(standbyWith(12*time.Second, 0, true)); a.Kind != Promote || a.Target != 99 {
		t.Fatalf("with the lock: %+v, want promote self", a)
	}
	after := standbyWith(13*time.Second, 0, true)
	after.IsLearner = false
	if a := d.Step(after); a.Kind != RemoveVoter || a.Target != 2 {
		t.Fatalf("promoted: %+v, want remove voter 2", a)
	}
	after.Voters = []Voter{after.Voters[0], after.Voters[2]} // removed
	if a := d.Step(after); a.Kind != ReleaseFailoverLock {
		t.Fatalf("after the removal: %v, want the lock released", a.Kind)
	}
	after.HoldsFailoverLock = false
	if a := d.Step(after); a.Kind != None {
		t.Fatalf("done: %v, want nothing", a.Kind)
	}
}

func TestStandbyWaitsForTheLockAndForCatchUp(t *testing.T) {
	d := NewDecider(cfg(RoleStandby))
	for at := 11 * time.Second; at < time.Minute; at += time.Second {
		if a := d.Step(standbyWith(at, 0, false)); a.Kind == Promote || a.Kind == RemoveVoter {
			t.Fatalf("promoted or removed without the lock at %v", at)
		}
	}
	d = NewDecider(cfg(RoleStandby))
	for at := 11 * time.Second; at < time.Minute; at += time.Second {
		o := standbyWith(at, 0, true)
		o.Applied = 500 // 500 behind
		if a := d.Step(o); a.Kind != None {
			t.Fatalf("acted (%v) while 500 entries behind at %v", a.Kind, at)
		}
	}
}

func TestStandbyStandsDownWhenTheVoterComesBack(t *testing.T) {
	d := NewDecider(cfg(RoleStandby))
	d.Step(standbyWith(11*time.Second, 0, false))
	back := caughtUp(12 * time.Second)
	back.HoldsFailoverLock = true
	if a := d.Step(back); a.Kind != ReleaseFailoverLock {
		t.Fatalf("voter back: %v, want the lock released", a.Kind)
	}
	back.HoldsFailoverLock = false
	for at := 12 * time.Second; at < time.Minute; at += time.Second {
		o := caughtUp(at)
		if a := d.Step(o); a.Kind != None {
			t.Fatalf("acted (%v) with every voter reachable", a.Kind)
		}
	}
}

func TestStandbyKeepsALiveQuorum(t *testing.T) {
	// 3 voters, 2 dead: no change can keep a live quorum.
	d := NewDecider(cfg(RoleStandby))
	for at := 11 * time.Second; at < time.Minute; at += time.Second {
		o := standbyWith(at, 0, true)
		o.Voters[2].Reachable, o.Voters[2].UnreachableSince = false, t0
		if a := d.Step(o); a.Kind != None {
			t.Fatalf("acted (%v) with 2 of 3 voters dead", a.Kind)
		}
	}
	// 5 voters, 1 dead: it may.
	d = NewDecider(cfg(RoleStandby))
	var a Action
	for at := time.Duration(0); at <= 11*time.Second; at += time.Second {
		o := standbyWith(at, 0, true)
		o.Voters = append(o.Voters, Voter{ID: 4, Name: "m4", Reachable: true}, Voter{ID: 5, Name: "m5", Reachable: true})
		a = d.Step(o)
	}
	if a.Kind != Promote {
		t.Fatalf("5 voters, 1 dead for 11s: %v, want promote", a.Kind)
	}
}

func TestStandbyNeverRemovesAReachableVoterOrItself(t *testing.T) {
	d := NewDecider(cfg(RoleStandby))
	var a Action
	for at := time.Duration(0); at <= 11*time.Second; at += time.Second {
		a = d.Step(standbyWith(at, 0, true))
	}
	if a.Kind != Promote {
		t.Fatalf("voter dead 11s, lock held: %v, want promote", a.Kind)
	}
	o := caughtUp(12 * time.Second) // m2 is back
	o.IsLearner = false
	o.Voters = append(o.Voters, Voter{ID: 99, Name: "self", Reachable: false, UnreachableSince: t0})
	for range 3 {
		if a := d.Step(o); a.Kind == RemoveVoter {
			t.Fatalf("removed %d, reachable or itself", a.Target)
		}
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
