package core

import (
	"testing"
	"time"
)

// TestStart: what preflight read decides how the mirror begins, and the
// checkpoint it goes on from (written later: the first write claims it).
func TestStart(t *testing.T) {
	stream := &Checkpoint{SourceClusterID: "src", Phase: PhaseStream, Revision: 50, From: 41, Resyncs: 2, Policy: "keep"}
	for _, c := range []struct {
		name string
		in   Start
		want Begin
		cp   *Checkpoint // nil: none
		step Step
	}{
		{"nothing", Start{NoneOwned: true}, BeginSync, nil, StepSync},
		{"a checkpoint", Start{Checkpoint: stream, ModRev: 7}, BeginResume, stream, StepStream},
		{"a checkpoint and --rev", Start{Checkpoint: stream, ModRev: 7, Rev: 5}, BeginResume, stream, StepStream},
		{"--resync", Start{Checkpoint: stream, ModRev: 7, Resync: true}, BeginResync,
			&Checkpoint{SourceClusterID: "src", Phase: PhaseSync, Resyncs: 3, Policy: "keep"}, StepSync},
		{"--resync with no checkpoint", Start{Resync: true}, BeginSync, nil, StepSync},
		{"--rev", Start{Rev: 30}, BeginAtRev,
			&Checkpoint{SourceClusterID: "src", SourcePrefix: "/s/", DestPrefix: "/d/", Policy: "keep", Phase: PhaseStream, Revision: 29}, StepStream},
		{"a failback's first run", Start{Failback: Failback{From: "ab", Adopt: true, CutRev: 9}}, BeginFailback,
			&Checkpoint{SourceClusterID: "src", SourcePrefix: "/s/", DestPrefix: "/d/", Policy: "keep", Phase: PhaseSync, FailbackFrom: "ab"}, StepAdopt},
		{"a failback whose mirror retired after the adoption", Start{Failback: Failback{From: "ab"}}, BeginFailback,
			&Checkpoint{SourceClusterID: "src", SourcePrefix: "/s/", DestPrefix: "/d/", Policy: "keep", Phase: PhaseSync, FailbackFrom: "ab", Adopted: true}, StepSync},
	} {
		s := NewState("tok", time.Minute)
		c.in.Identity = identity
		if got := s.Start(c.in); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		got := s.Checkpoint()
		if (got == nil) != (c.cp == nil) || got != nil && *got != *c.cp {
			t.Errorf("%s: checkpoint %+v, want %+v", c.name, got, c.cp)
		}
		if s.Next() != c.step || s.ModRev() != c.in.ModRev || s.Token() != "tok" {
			t.Errorf("%s: step %v at %d, want %v at %d", c.name, s.Next(), s.ModRev(), c.step, c.in.ModRev)
		}
	}
}

// TestClaimThenWrite: a mirror that starts from a checkpoint it has not
// written (--rev) claims the image before its first write of changes; the
// claim is fenced on no checkpoint, stamped, and calls for a cycle check
// at once; later writes are fenced on the one before.
func TestClaimThenWrite(t *testing.T) {
	s := started(t, Start{Rev: 30})
	if _, ok := s.Claim(false); ok {
		t.Fatal("a write without changes (itself the claim) claims first")
	}
	claim, ok := s.Claim(true)
	if !ok || claim != *s.Checkpoint() {
		t.Fatalf("claim %+v %v, want the checkpoint it goes on from", claim, ok)
	}
	w := s.Write(claim, t0)
	if w.IfModRev != 0 || w.Checkpoint.Token != "tok" || !w.Checkpoint.Updated.Equal(t0) || w.Checkpoint.Revision != 29 {
		t.Fatalf("the claim's write %+v: want it fenced on no checkpoint, stamped", w)
	}
	if s.CycleCheckDue(t0) {
		t.Fatal("a cycle check due before the claim")
	}
	if !s.Committed(w, 100) || s.ModRev() != 100 || s.ClaimRev() != 100 {
		t.Fatalf("the claim landed: claim at %d, checkpoint at %d", s.ClaimRev(), s.ModRev())
	}
	if !s.CycleCheckDue(t0) {
		t.Fatal("no cycle check right after the claim")
	}
	if v := s.CycleChecked(t0, NoCycle); v != GoOn || s.CycleCheckDue(t0) {
		t.Fatalf("after the claim's check: %v, due %v", v, s.CycleCheckDue(t0))
	}
	if _, ok := s.Claim(true); ok {
		t.Fatal("claimed twice")
	}
	next := claim
	next.From, next.Revision = 30, 31
	w = s.Write(next, t0.Add(time.Second))
	if w.IfModRev != 100 {
		t.Fatalf("fenced on %d, want the claim's 100", w.IfModRev)
	}
	if s.Committed(w, 101) || s.Revision() != 31 || s.ModRev() != 101 || s.ClaimRev() != 100 {
		t.Fatalf("a later write: checkpoint %+v at %d, claim %d", s.Checkpoint(), s.ModRev(), s.ClaimRev())
	}
	if s.Checkpoint().Token != "tok" {
		t.Fatal("the checkpoint kept is not the one written")
	}
}

// TestReloaded: the checkpoint read back after a write whose outcome is
// unknown says whether to resume (unchanged, landed, restored) or stop.
func TestReloaded(t *testing.T) {
	mine := func(rev int64) *Checkpoint {
		return &Checkpoint{Phase: PhaseStream, Revision: rev, Token: "tok"}
	}
	other := &Checkpoint{Phase: PhaseStream, Revision: 60, Token: "other"}
	for _, c := range []struct {
		name      string
		modRev    int64       // the state's; 0: nothing written
		read      *Checkpoint // as read back
		readRev   int64
		want      Reload
		revision  int64 // the checkpoint's source revision after
		modRevAft int64
		cycleDue  bool
	}{
		{"unchanged", 10, mine(50), 10, ReloadSame, 50, 10, false},
		{"none, still none", 0, nil, 0, ReloadSame, 0, 0, false},
		{"our write landed", 10, mine(55), 12, ReloadLanded, 55, 12, false},
		{"our claim landed", 0, mine(50), 12, ReloadLanded, 50, 12, true},
		{"another process's", 10, other, 12, ReloadFenced, 50, 10, false},
		{"another process's claim", 0, other, 12, ReloadFenced, 0, 0, false},
		{"deleted", 10, nil, 0, ReloadFenced, 50, 10, false},
		{"restored behind our write", 10, mine(40), 6, ReloadRestored, 40, 6, false},
		{"restored, written by another", 10, other, 6, ReloadRestored, 60, 6, false},
	} {
		in := Start{}
		if c.modRev != 0 {
			in = Start{Checkpoint: mine(50), ModRev: c.modRev}
		}
		s := started(t, in)
		if got := s.Reloaded(c.read, c.readRev); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		if s.Revision() != c.revision || s.ModRev() != c.modRevAft || s.CycleCheckDue(t0) != c.cycleDue {
			t.Errorf("%s: checkpoint at %d (dest %d), cycle check due %v; want %d (dest %d), %v",
				c.name, s.Revision(), s.ModRev(), s.CycleCheckDue(t0), c.revision, c.modRevAft, c.cycleDue)
		}
		if c.want == ReloadLanded && c.modRev == 0 && s.ClaimRev() != c.readRev {
			t.Errorf("%s: claim at %d, want %d", c.name, s.ClaimRev(), c.readRev)
		}
	}
}

// TestCycleChecks: when a check runs before a write, and what its outcome
// makes the loop do.
func TestCycleChecks(t *testing.T) {
	every := time.Minute
	// Interval: checked at t0 by preflight.
	s := started(t, Start{Checkpoint: &Checkpoint{Phase: PhaseStream, Revision: 5}, ModRev: 3})
	if s.CycleCheckDue(t0.Add(every - time.Second)) {
		t.Error("checked again within the interval")
	}
	if !s.CycleCheckDue(t0.Add(every)) {
		t.Error("not checked after the interval")
	}
	s.NewFeeder()
	if !s.CycleCheckDue(t0) {
		t.Error("a new feeder does not call for a check")
	}

	type state struct{ claimed, due bool }
	for _, c := range []struct {
		name    string
		st      state
		check   CycleCheck
		want    CycleVerdict
		dueThen bool // due right after
	}{
		{"no cycle", state{false, true}, NoCycle, GoOn, false},
		{"no cycle, none due", state{false, false}, NoCycle, GoOn, false},
		{"unknown, none due", state{false, false}, CycleUnknown, WarnAndGoOn, false},
		{"unknown, due", state{false, true}, CycleUnknown, StopWriting, true},
		{"unknown right after the claim", state{true, true}, CycleUnknown, StopWriting, true},
		{"a cycle", state{false, false}, CycleFound, StopWriting, false},
		{"a cycle, due", state{false, true}, CycleFound, StopWriting, true},
		{"a cycle while only the claim exists", state{true, true}, CycleFound, Unclaim, true},
	} {
		s := started(t, Start{Rev: 10})
		if c.st.claimed {
			commit(s, *s.Checkpoint(), t0, 20)
		} else {
			commit(s, *s.Checkpoint(), t0, 20)
			s.CycleChecked(t0, NoCycle)
			commit(s, *s.Checkpoint(), t0, 21) // a key copied: no longer the claim
			if c.st.due {
				s.NewFeeder()
			}
		}
		at := t0.Add(time.Second)
		if got := s.CycleChecked(at, c.check); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		if got := s.CycleCheckDue(at); got != c.dueThen {
			t.Errorf("%s: due after %v, want %v", c.name, got, c.dueThen)
		}
		if c.want == Unclaim && s.ClaimRev() != 20 {
			t.Errorf("%s: claim at %d, want 20", c.name, s.ClaimRev())
		}
	}
	// A check that warned is not made again before the interval.
	s = started(t, Start{Checkpoint: &Checkpoint{Phase: PhaseStream, Revision: 5}, ModRev: 3})
	s.CycleChecked(t0.Add(every), CycleUnknown)
	if s.CycleCheckDue(t0.Add(every + time.Second)) {
		t.Error("a check that could not be made is made again within the interval")
	}
}

// TestAdoption: a failback adopts first, recording its progress; once the
// checkpoint that ends the adoption is written (or read back), it syncs.
func TestAdoption(t *testing.T) {
	s := started(t, Start{Failback: Failback{From: "ab", Adopt: true, CutRev: 9}})
	if s.Next() != StepAdopt {
		t.Fatal("a failback does not adopt first")
	}
	claim, ok := s.Claim(true)
	if !ok || claim.FailbackFrom != "ab" || claim.Adopted {
		t.Fatalf("the adoption's claim %+v %v", claim, ok)
	}
	commit(s, claim, t0, 10)
	page := s.AdoptedThrough("/p/3")
	if page.AdoptedThrough != "/p/3" || page.Adopted {
		t.Fatalf("a page adopted: %+v", page)
	}
	commit(s, page, t0, 11)
	if s.Next() != StepAdopt {
		t.Fatal("adoption ended after a page")
	}
	done := s.AdoptionDone()
	if !done.Adopted || done.AdoptedThrough != "" || done.FailbackFrom != "ab" {
		t.Fatalf("adoption done: %+v", done)
	}
	if s.Next() != StepAdopt {
		t.Fatal("adoption ended before its checkpoint was written")
	}
	commit(s, done, t0, 12)
	if s.Next() != StepSync {
		t.Fatalf("after the adoption: %v, want a sync", s.Next())
	}
	if next := s.StartSync(40); next.FailbackFrom != "ab" || !next.Adopted {
		t.Fatalf("the sync after the adoption: %+v, want the failback recorded as adopted", next)
	}

	// The answer to the last write lost: read back, it ends the adoption too.
	s = started(t, Start{Failback: Failback{From: "ab", Adopt: true}})
	commit(s, *s.Checkpoint(), t0, 10)
	landed := s.AdoptionDone()
	landed.Token = "tok"
	if s.Reloaded(&landed, 11) != ReloadLanded || s.Next() != StepSync {
		t.Fatal("an adoption whose end landed adopts again")
	}
}
