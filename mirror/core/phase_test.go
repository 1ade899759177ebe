package core

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

var identity = Checkpoint{SourceClusterID: "src", SourcePrefix: "/s/", DestPrefix: "/d/", Policy: "keep"}

// started is a state after preflight found in in.
func started(t *testing.T, in Start) *State {
	t.Helper()
	s := NewState("tok", time.Minute)
	in.Identity = identity
	s.Start(in)
	s.CycleChecked(t0, NoCycle)
	return s
}

// commit writes next at now, landing at destination revision modRev, and
// returns whether it was the claim.
func commit(s *State, next Checkpoint, now time.Time, modRev int64) bool {
	return s.Committed(s.Write(next, now), modRev)
}

// TestPhases walks a mirror's life through its state: no checkpoint → a
// full sync from scratch → streaming → compaction → a counted resync →
// streaming; a sync interrupted after its start resumes.
func TestPhases(t *testing.T) {
	s := started(t, Start{NoneOwned: true})
	if s.Next() != StepSync || !s.SyncFromScratch() || s.Checkpoint() != nil || s.Revision() != 0 {
		t.Fatalf("no checkpoint: %v, want a sync from scratch", s.Next())
	}
	// A first sync into an image with no key of the mirror: nothing to
	// compare or sweep, unless Prune.
	cp := s.StartSync(100)
	if cp.Phase != PhaseSync || cp.Revision != 100 || !cp.Fresh || cp.Resyncs != 0 || cp.SourceClusterID != "src" || cp.FailbackFrom != "" {
		t.Fatalf("first sync: %+v", cp)
	}
	if !commit(s, cp, t0, 10) {
		t.Fatal("the first checkpoint written is not the claim")
	}
	for p, want := range map[Policy][2]bool{Keep: {false, false}, Overwrite: {false, false}, Prune: {false, true}} {
		if compare, sweep := s.SyncPlan(p); compare != want[0] || sweep != want[1] {
			t.Errorf("a fresh first sync under %v: compare %v, sweep %v; want %v", p, compare, sweep, want)
		}
	}
	if s.Next() != StepSync || s.SyncFromScratch() {
		t.Fatal("an interrupted sync does not resume")
	}
	cp.SyncedThrough = "/s/m"
	commit(s, cp, t0, 11)
	done := s.SyncDone()
	if done.Phase != PhaseStream || done.Revision != 100 || done.SyncedThrough != "" || done.From != 0 || done.Fresh {
		t.Fatalf("sync done: %+v", done)
	}
	commit(s, done, t0, 12)
	if s.Next() != StepStream || s.Revision() != 100 {
		t.Fatal("after the sync: not streaming from it")
	}
	if compare, sweep := s.SyncPlan(Keep); !compare || !sweep {
		t.Fatal("a sync into an image the mirror wrote neither compares nor sweeps")
	}
	done.Revision, done.From = 250, 201
	commit(s, done, t0, 13)
	if r := s.Stepped(Compacted); r != SyncAgain {
		t.Fatalf("compacted: %v, want SyncAgain", r)
	}
	re := s.Checkpoint()
	if re.Phase != PhaseSync || re.Revision != 0 || re.From != 0 || re.SyncedThrough != "" || re.Resyncs != 1 {
		t.Fatalf("resync: %+v", re)
	}
	if !s.SyncFromScratch() || s.Next() != StepSync || s.ModRev() != 13 {
		t.Fatal("a resync does not sync from scratch, fenced on the last write")
	}
	next := s.StartSync(300)
	if next.Resyncs != 1 || next.Fresh || next.Revision != 300 {
		t.Fatalf("the resync's start: %+v, want the count kept and not fresh", next)
	}
	commit(s, next, t0, 14)
	if s.SyncFromScratch() {
		t.Fatal("a sync under way starts from scratch")
	}
	if compare, sweep := s.SyncPlan(Keep); !compare || !sweep {
		t.Fatal("a resync neither compares nor sweeps")
	}
}

// A first sync into an image that holds keys of the mirror (a checkpoint
// deleted by hand) compares and sweeps.
func TestFirstSyncIntoAnImageTheMirrorWrote(t *testing.T) {
	s := started(t, Start{NoneOwned: false})
	cp := s.StartSync(100)
	commit(s, cp, t0, 10)
	if compare, sweep := s.SyncPlan(Keep); cp.Fresh || !compare || !sweep {
		t.Fatalf("%+v: compare %v, sweep %v; want both", cp, compare, sweep)
	}
}

func TestStepped(t *testing.T) {
	for o, want := range map[Outcome]Reaction{Done: Again, Compacted: SyncAgain, Landed: Retry, Fatal: Stop, Failed: BackOff} {
		s := started(t, Start{Checkpoint: &Checkpoint{Phase: PhaseStream, Revision: 9, From: 5}, ModRev: 3})
		if got := s.Stepped(o); got != want {
			t.Errorf("Stepped(%v) = %v, want %v", o, got, want)
		}
		if o != Compacted && s.Revision() != 9 {
			t.Errorf("Stepped(%v) moved the checkpoint to %+v", o, s.Checkpoint())
		}
	}
	// Compaction before any checkpoint: a sync from scratch all the same.
	s := started(t, Start{})
	if s.Stepped(Compacted) != SyncAgain || s.Checkpoint() != nil || !s.SyncFromScratch() {
		t.Fatal("compaction with no checkpoint")
	}
}

func TestIdle(t *testing.T) {
	s := started(t, Start{Checkpoint: &Checkpoint{Phase: PhaseStream, From: 5, Revision: 9}, ModRev: 3})
	every := time.Second
	if _, ok := s.Idle(9, t0, time.Time{}, every); ok {
		t.Fatal("moved to the checkpoint's own revision")
	}
	if _, ok := s.Idle(20, t0, t0.Add(-999*time.Millisecond), every); ok {
		t.Fatal("moved before the interval passed")
	}
	next, ok := s.Idle(20, t0, t0.Add(-every), every)
	if !ok || next.From != 10 || next.Revision != 20 || next.Phase != PhaseStream {
		t.Fatalf("progress: %+v %v, want from 10 to 20", next, ok)
	}
	if s.Revision() != 9 {
		t.Fatal("Idle moved the checkpoint before it was written")
	}
	if _, ok := started(t, Start{}).Idle(20, t0, time.Time{}, every); ok {
		t.Fatal("moved a checkpoint that does not exist")
	}
}

func TestRestoreAt(t *testing.T) {
	for _, c := range []struct {
		cp   *Checkpoint
		want int64
	}{
		{nil, 0},
		{&Checkpoint{Phase: PhaseSync, Revision: 7}, 0},
		{&Checkpoint{Phase: PhaseStream, Revision: 7}, 0}, // right after a full sync
		{&Checkpoint{Phase: PhaseStream, Revision: 9, From: 8}, 9},
	} {
		s := started(t, Start{Checkpoint: c.cp, ModRev: 3})
		if got := s.RestoreAt(); got != c.want {
			t.Errorf("RestoreAt with %+v = %d, want %d", c.cp, got, c.want)
		}
	}
}

func TestEncode(t *testing.T) {
	cp := Checkpoint{SourceClusterID: "c", Phase: PhaseStream, Revision: 7, From: 5, Updated: t0}
	want := `{"source_cluster_id":"c","source_prefix":"","dest_prefix":"","phase":"stream","revision":7,"from":5,"updated":"2026-11-25T12:00:00Z"}`
	if got := cp.Encode(); got != want {
		t.Fatalf("Encode = %s\nwant     %s", got, want)
	}
}

func TestSourceBehind(t *testing.T) {
	cp := &Checkpoint{Phase: PhaseStream, Revision: 8}
	for _, tc := range []struct {
		cp   *Checkpoint
		rev  int64
		want bool
	}{
		{nil, 1, false}, // no checkpoint: nothing copied yet
		{cp, 8, false},  // the source where the mirror is
		{cp, 9, false},  // ahead, as a source moves on
		{cp, 7, true},   // behind: another history
		{&Checkpoint{Phase: PhaseSync}, 1, false}, // a resync from scratch
	} {
		s := started(t, Start{Checkpoint: tc.cp, ModRev: 3})
		if got := s.SourceBehind(tc.rev); got != tc.want {
			t.Errorf("SourceBehind(%d) with %+v = %v, want %v", tc.rev, tc.cp, got, tc.want)
		}
	}
}
