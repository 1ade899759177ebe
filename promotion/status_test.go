package promotion

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestStatusSaysWhyAStandbyWaits walks a standby through a failover and
// checks, at each point, the state and reason its Status gives.
func TestStatusSaysWhyAStandbyWaits(t *testing.T) {
	type step struct {
		name   string
		o      func() Observation
		state  State
		reason string
		detail string // a substring of Detail
	}
	noCommit := func(at time.Duration) Observation {
		o := silentAt(at, false, nil)
		o.LeaderCommit, o.LastRound = 0, t0
		return o
	}
	behind := func(at time.Duration) Observation {
		o := silentAt(at, false, nil)
		o.Applied = 100
		return o
	}
	twoSilent := func(at time.Duration) Observation {
		o := silentAt(at, false, nil)
		o.Voters[2].PeerAnswered, o.Voters[2].Leader = false, LeaderViewInactive
		return o
	}
	removing := func(at time.Duration) Observation {
		o := twoSilent(at)
		o.IsLearner, o.HoldsFailoverLock = false, true
		o.Failover = &Record{Dead: 2, DeadName: "m2", By: 99, ByName: "s1", Step: StepRemove, Since: t0}
		return o
	}
	steps := []step{
		{"all live", func() Observation { return caughtUp(0) }, StateIdle, ReasonLive, "every voter is live"},
		{"m2 silent", func() Observation { return silentAt(time.Second, false, nil) }, StateWaiting, ReasonSilence, "voter m2 silent for 0s of 10s"},
		{"m2 silent 2s", func() Observation { return silentAt(3*time.Second, false, nil) }, StateWaiting, ReasonSilence, "voter m2 silent for 2s of 10s (no peer URL answers, leader view inactive)"},
		{"commit unknown", func() Observation { return noCommit(12 * time.Second) }, StateBlind, ReasonNoRound, "no ReadIndex round for 12s"},
		{"hold", func() Observation { return silentAt(13*time.Second, false, nil) }, StateWaiting, ReasonHold, "hold 0s of 5s"},
		{"hold goes on", func() Observation { return silentAt(16*time.Second+100*time.Millisecond, false, nil) }, StateWaiting, ReasonHold, "hold 3.1s of 5s"},
		{"behind", func() Observation { return behind(17 * time.Second) }, StateBlocked, ReasonNotCaughtUp, "900 entries behind"},
		{"caught up again", func() Observation { return silentAt(18*time.Second, false, nil) }, StateWaiting, ReasonHold, "hold 0s of 5s"},
		{"two dead", func() Observation { return twoSilent(40 * time.Second) }, StateBlocked, ReasonQuorumAfterPromote, "no live quorum"},
		{"acts", func() Observation { return silentAt(41*time.Second, false, nil) }, StateActing, AcquireFailoverLock.String(), "voter m2 silent"},
		{"removal without quorum", func() Observation { return removing(42 * time.Second) }, StateActing, ReleaseFailoverLock.String(), "removing m2 would leave no live quorum"},
	}
	d := NewDecider(cfg(RoleStandby))
	for _, s := range steps {
		d.Step(s.o())
		got := d.Status()
		if got.State != s.state || got.Reason != s.reason || !strings.Contains(got.Detail, s.detail) {
			t.Fatalf("%s: status %q (state %s, reason %s), want state %s, reason %s, detail containing %q", s.name, got, got.State, got.Reason, s.state, s.reason, s.detail)
		}
	}
	if d.Blind(t0.Add(time.Minute), false, errors.New("read index: deadline exceeded")); d.Status().State != StateBlind || !strings.Contains(d.Status().Detail, "deadline exceeded") {
		t.Fatalf("blind: status %q", d.Status())
	}
}

// TestStatusNamesTheRefusedCall: a step refused by the cluster makes the
// standby wait, saying which call failed and why; a busy lock blocks it.
func TestStatusNamesTheRefusedCall(t *testing.T) {
	d := NewDecider(cfg(RoleStandby))
	a := runSilent(d, 16*time.Second, false)
	want(t, "after 16s", a, AcquireFailoverLock, 0)
	d.Done(t0.Add(16*time.Second), a, errors.New("etcdserver: permission denied"))
	d.Step(silentAt(16*time.Second+100*time.Millisecond, false, nil))
	if s := d.Status(); s.State != StateWaiting || s.Reason != ReasonRetry || !strings.Contains(s.Detail, "acquire-failover-lock failed: etcdserver: permission denied") {
		t.Fatalf("after a refusal: %q", s)
	}
	d.Done(t0.Add(16500*time.Millisecond), a, fmt.Errorf("%w: lock: permission denied (as user \"standby\")", ErrRefused))
	d.Step(silentAt(16600*time.Millisecond, false, nil))
	if s := d.Status(); s.State != StateBlocked || s.Reason != ReasonRefused || !strings.Contains(s.Detail, `permission denied (as user "standby")`) {
		t.Fatalf("refused by auth: %q (%s/%s)", s, s.State, s.Reason)
	}
	d.Done(t0.Add(17*time.Second), a, ErrLockBusy)
	d.Step(silentAt(17*time.Second+100*time.Millisecond, false, nil))
	if s := d.Status(); s.State != StateBlocked || s.Reason != ReasonLockBusy {
		t.Fatalf("with the lock busy: %q (%s/%s)", s, s.State, s.Reason)
	}
}

func TestStatusOfReadersAndVoters(t *testing.T) {
	d := NewDecider(cfg(RoleReader))
	d.Step(caughtUp(0))
	if s := d.Status(); s.State != StateIdle || s.Reason != ReasonReader {
		t.Fatalf("reader: %q", s)
	}
	d = NewDecider(cfg(RoleVoter))
	d.Step(caughtUp(0))
	d.Step(caughtUp(3 * time.Second))
	if s := d.Status(); s.State != StateWaiting || s.Detail != "hold 3s of 5s" {
		t.Fatalf("voter role, caught up 3s: %q", s)
	}
	d.Step(caughtUp(5 * time.Second))
	if s := d.Status(); s.State != StateActing || s.Reason != Promote.String() {
		t.Fatalf("voter role, caught up 5s: %q", s)
	}
}
