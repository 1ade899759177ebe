package promotion

import (
	"strings"
	"testing"
	"time"
)

// A voter under a maintenance hold is never replaced, however long it is
// silent; once the hold is gone, a voter silent for longer than
// --failover-after is replaced at once.
func TestAHeldVoterIsNotReplacedUntilTheHoldEnds(t *testing.T) {
	for _, h := range []MaintenanceHold{{Voter: 2, Name: "m2", Reason: "kubeadm upgrade", By: "root"}, {Reason: "all"}} {
		d := NewDecider(cfg(RoleStandby))
		held := func(at time.Duration, lock bool, rec *Record) Observation {
			o := silentAt(at, lock, rec)
			o.Holds = []MaintenanceHold{h}
			return o
		}
		for at := time.Duration(0); at < time.Hour; at += time.Second {
			if a := d.Step(held(at, false, nil)); a.Kind != None {
				t.Fatalf("hold %v: acted (%v: %s) at %v on a held voter", h, a.Kind, a.Reason, at)
			}
		}
		if s := d.Status(); s.State != StateBlocked || s.Reason != ReasonMaintenance || !strings.Contains(s.Detail, "m2") || !strings.Contains(s.Detail, "held for maintenance") {
			t.Fatalf("hold %v: status %q (%s/%s), want blocked, maintenance-hold, naming m2", h, s, s.State, s.Reason)
		}
		want(t, "hold gone", d.Step(silentAt(time.Hour, false, nil)), AcquireFailoverLock, 0)
	}
}

// A hold that appears during a failover stops it before the next
// membership change; the record stays, and the failover goes on when the
// hold ends.
func TestAHoldStopsAFailoverUnderWay(t *testing.T) {
	d := NewDecider(cfg(RoleStandby))
	runSilent(d, 11*time.Second, true)
	rec := &Record{Dead: 2, DeadName: "m2", By: 99, ByName: "s1", Step: StepPromote, Since: t0}
	o := silentAt(12*time.Second, true, rec)
	want(t, "record written, no hold", d.Step(o), Promote, 99)
	o = silentAt(13*time.Second, true, rec)
	o.Holds = []MaintenanceHold{{Voter: 2, Name: "m2"}}
	if a := d.Step(o); a.Kind != ReleaseFailoverLock || !strings.Contains(a.Reason, "held for maintenance") {
		t.Fatalf("a hold during the failover: %v (%s), want the lock let go and nothing else", a.Kind, a.Reason)
	}
	o.HoldsFailoverLock = false
	if a := d.Step(o); a.Kind != None {
		t.Fatalf("a hold during the failover, lock let go: %v (%s), want nothing", a.Kind, a.Reason)
	}
	if s := d.Status(); s.Reason != ReasonMaintenance {
		t.Fatalf("status %q, want maintenance-hold", s)
	}
	want(t, "hold gone", d.Step(silentAt(14*time.Second, false, rec)), AcquireFailoverLock, 0)
}

// A hold on another voter does not stop the failover of a dead one.
func TestAHoldOnAnotherVoterDoesNotStopAFailover(t *testing.T) {
	d := NewDecider(cfg(RoleStandby))
	for at := time.Duration(0); at <= 11*time.Second; at += time.Second {
		o := silentAt(at, false, nil)
		o.Holds = []MaintenanceHold{{Voter: 3, Name: "m3"}}
		if a := d.Step(o); a.Kind != None {
			want(t, "m2 dead, m3 held", a, AcquireFailoverLock, 0)
			return
		}
	}
	t.Fatalf("not replaced: %q", d.Status())
}

func TestMaintenanceHoldRoundTrip(t *testing.T) {
	h := MaintenanceHold{Voter: 2, Name: "m2", Reason: "reboot", By: "ops", Until: t0.Add(time.Hour).UTC()}
	got, err := ParseMaintenanceHold([]byte(h.Marshal()))
	if err != nil || got != h {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if _, err := ParseMaintenanceHold([]byte("{")); err == nil || !strings.Contains(err.Error(), "maintenance hold") {
		t.Fatalf("ParseMaintenanceHold({) = %v, want an error naming the hold", err)
	}
	if r := ReadMaintenanceHold([]byte("k"), []byte("junk"), 7); r.Voter != 0 || r.ModRevision != 7 || r.Key != "k" || !strings.Contains(r.Reason, "unreadable") {
		t.Fatalf("an unreadable hold: %+v, want a hold of every voter that says why", r)
	}
	if !(MaintenanceHold{}).Covers(7) || h.Covers(3) || !h.Covers(2) {
		t.Fatal("Covers")
	}
}

// etcd gives every lease its whole TTL again at each new leader, so a
// hold's key may outlive its Until: past Until (and the clocks' slack)
// the hold no longer stands.
func TestAHoldPastItsEndNoLongerStands(t *testing.T) {
	d := NewDecider(cfg(RoleStandby))
	until := t0.Add(20 * time.Second)
	var a Action
	for at := time.Duration(0); at <= time.Minute; at += time.Second {
		o := silentAt(at, false, nil)
		o.Holds = []MaintenanceHold{{Voter: 2, Name: "m2", Until: until}}
		if a = d.Step(o); a.Kind != None {
			break
		}
	}
	if a.Kind != AcquireFailoverLock || d.Status().State != StateActing {
		t.Fatalf("a hold past its end: %v (%s), want the failover to go on", a.Kind, a.Reason)
	}
	if !(MaintenanceHold{Until: until}).Stands(until.Add(holdSkew-time.Second)) || (MaintenanceHold{Until: until}).Stands(until.Add(holdSkew)) {
		t.Fatal("Stands")
	}
}

// A hold written by a clock an hour behind the standby's ends by the
// standby's clock: For after the standby first saw it, not at its Until.
func TestAHoldFromASlowClockStillLastsItsLength(t *testing.T) {
	seen := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	h := MaintenanceHold{Voter: 2, Until: seen.Add(-50 * time.Minute), For: 10 * time.Minute, Seen: seen}
	for _, tc := range []struct {
		at    time.Duration
		holds bool
	}{{0, true}, {9 * time.Minute, true}, {10*time.Minute + holdSkew - time.Second, true}, {10*time.Minute + holdSkew, false}} {
		if got := h.Stands(seen.Add(tc.at)); got != tc.holds {
			t.Errorf("%v after it was seen: stands %v, want %v", tc.at, got, tc.holds)
		}
	}
	// A clock ahead: Until, the later end, decides.
	h = MaintenanceHold{Voter: 2, Until: seen.Add(70 * time.Minute), For: 10 * time.Minute, Seen: seen}
	if !h.Stands(seen.Add(69 * time.Minute)) {
		t.Error("a hold before its Until does not stand")
	}
	// One written without For (by hand, or before it existed) ends at Until.
	if (MaintenanceHold{Until: seen, Seen: seen}).Stands(seen.Add(holdSkew)) {
		t.Error("a hold without For stands past its Until")
	}
}
