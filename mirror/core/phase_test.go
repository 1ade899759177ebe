package core

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// TestPhases walks a mirror's life through its checkpoints: no checkpoint
// → a full sync from scratch → streaming → compaction → a counted resync
// → streaming; a sync interrupted after its start resumes.
func TestPhases(t *testing.T) {
	fresh := Checkpoint{SourceClusterID: "src", SourcePrefix: "/s/", DestPrefix: "/d/", Policy: "keep"}
	if s := NextStep(nil, false); s != StepSync || !SyncFromScratch(nil) {
		t.Fatalf("no checkpoint: %v, want a sync from scratch", s)
	}
	if NextStep(nil, true) != StepAdopt {
		t.Fatal("a failback still to adopt does not adopt first")
	}
	// A first sync into an image with no key of the mirror: nothing to
	// compare or sweep, unless Prune.
	cp := StartSync(fresh, nil, true, 100)
	if cp.Phase != PhaseSync || cp.Revision != 100 || !cp.Fresh || cp.Resyncs != 0 || cp.SourceClusterID != "src" {
		t.Fatalf("first sync: %+v", cp)
	}
	if CompareFirst(cp) || NeedsSweep(cp, Keep) || NeedsSweep(cp, Overwrite) || !NeedsSweep(cp, Prune) {
		t.Fatal("a fresh first sync compares or sweeps (Prune aside)")
	}
	if NextStep(&cp, false) != StepSync || SyncFromScratch(&cp) {
		t.Fatal("an interrupted sync does not resume")
	}
	if cp := StartSync(fresh, nil, false, 100); cp.Fresh || !CompareFirst(cp) || !NeedsSweep(cp, Keep) {
		t.Fatalf("a first sync into an image holding keys of the mirror: %+v, want it compared and swept", cp)
	}
	cp.SyncedThrough = "/s/m"
	cp = SyncDone(cp)
	if cp.Phase != PhaseStream || cp.Revision != 100 || cp.SyncedThrough != "" || cp.From != 0 || cp.Fresh {
		t.Fatalf("sync done: %+v", cp)
	}
	if NextStep(&cp, false) != StepStream {
		t.Fatal("after the sync: not streaming")
	}
	cp.Revision, cp.From = 250, 201
	re := Resync(cp)
	if re.Phase != PhaseSync || re.Revision != 0 || re.From != 0 || re.SyncedThrough != "" || re.Resyncs != 1 {
		t.Fatalf("resync: %+v", re)
	}
	if !SyncFromScratch(&re) || NextStep(&re, false) != StepSync {
		t.Fatal("a resync does not sync from scratch")
	}
	next := StartSync(fresh, &re, true, 300)
	if next.Resyncs != 1 || next.Fresh || next.Revision != 300 {
		t.Fatalf("the resync's start: %+v, want the count kept and not fresh", next)
	}
	if st := (Checkpoint{Phase: PhaseStream}); !SyncFromScratch(&st) {
		t.Fatal("a streaming checkpoint resumes a sync")
	}
}

func TestProgressCheckpoint(t *testing.T) {
	cp := Checkpoint{Phase: PhaseStream, From: 5, Revision: 9}
	every := time.Second
	if _, ok := ProgressCheckpoint(cp, 9, t0, time.Time{}, every); ok {
		t.Fatal("moved to the checkpoint's own revision")
	}
	if _, ok := ProgressCheckpoint(cp, 20, t0, t0.Add(-999*time.Millisecond), every); ok {
		t.Fatal("moved before the interval passed")
	}
	next, ok := ProgressCheckpoint(cp, 20, t0, t0.Add(-every), every)
	if !ok || next.From != 10 || next.Revision != 20 || next.Phase != PhaseStream {
		t.Fatalf("progress: %+v %v, want from 10 to 20", next, ok)
	}
}

func TestReact(t *testing.T) {
	for o, want := range map[Outcome]Reaction{Done: Again, Compacted: SyncAgain, Landed: Retry, Fatal: Stop, Failed: BackOff} {
		if got := React(o); got != want {
			t.Errorf("React(%v) = %v, want %v", o, got, want)
		}
	}
}

func TestBackoff(t *testing.T) {
	var asked []time.Duration
	b := NewBackoff(func(n time.Duration) time.Duration { asked = append(asked, n); return n })
	var got []string
	for range 8 {
		got = append(got, b.Next().String())
	}
	if s := strings.Join(got, " "); s != "100ms 200ms 400ms 800ms 1.6s 3.2s 5s 5s" {
		t.Fatalf("backoff at the top of its jitter: %s", s)
	}
	if asked[0] != 50*time.Millisecond {
		t.Fatalf("jitter asked over %v, want half the delay", asked[0])
	}
	b.Reset()
	b.Jitter = func(time.Duration) time.Duration { return 0 }
	if d := b.Next(); d != 50*time.Millisecond {
		t.Fatalf("after reset, no jitter: %v, want 50ms", d)
	}
}

func TestCycleCheckDue(t *testing.T) {
	every := time.Minute
	if !CycleCheckDue(true, t0, t0, every) {
		t.Error("due right after the first checkpoint: not checked")
	}
	if CycleCheckDue(false, t0.Add(59*time.Second), t0, every) {
		t.Error("checked again within the interval")
	}
	if !CycleCheckDue(false, t0.Add(every), t0, every) {
		t.Error("not checked after the interval")
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
		if got := SourceBehind(tc.cp, tc.rev); got != tc.want {
			t.Errorf("SourceBehind(%+v, %d) = %v, want %v", tc.cp, tc.rev, got, tc.want)
		}
	}
}
