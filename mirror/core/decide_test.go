package core

import (
	"testing"
	"time"
)

func TestDecidePolicy(t *testing.T) {
	for _, c := range []struct {
		stored  string
		current Policy
		reset   bool
		want    PolicyChange
	}{
		{"keep", Keep, false, PolicySame},
		{"prune", Prune, false, PolicySame},
		{"prune", Prune, true, PolicySame},
		{"", Prune, false, PolicyAdopt},
		{"", Keep, true, PolicyAdopt},
		{"prune", Keep, false, PolicyRefused},
		{"keep", Prune, false, PolicyRefused},
		{"overwrite", Prune, false, PolicyRefused},
		{"prune", Keep, true, PolicyReset},
	} {
		if got := DecidePolicy(c.stored, c.current, c.reset); got != c.want {
			t.Errorf("stored %q, current %s, reset %v: %v, want %v", c.stored, c.current, c.reset, got, c.want)
		}
	}
}

// TestTakePolicy: the checkpoint carries the mirror's policy from now on,
// written at once only when it changed in a checkpoint the destination
// holds; a refusal leaves it alone.
func TestTakePolicy(t *testing.T) {
	for _, c := range []struct {
		name   string
		in     Start
		reset  bool
		want   PolicyChange
		write  bool
		stored string // the checkpoint's policy after
	}{
		{"no checkpoint", Start{}, false, PolicySame, false, ""},
		{"the same", Start{Checkpoint: &Checkpoint{Policy: "prune"}, ModRev: 4}, false, PolicySame, false, "prune"},
		{"none stored", Start{Checkpoint: &Checkpoint{}, ModRev: 4}, false, PolicyAdopt, true, "prune"},
		{"reset", Start{Checkpoint: &Checkpoint{Policy: "keep"}, ModRev: 4}, true, PolicyReset, true, "prune"},
		{"refused", Start{Checkpoint: &Checkpoint{Policy: "keep"}, ModRev: 4}, false, PolicyRefused, false, "keep"},
		{"reset, not written yet", Start{Checkpoint: &Checkpoint{Policy: "keep"}, Resync: true}, true, PolicyReset, false, "prune"},
	} {
		s := started(t, c.in)
		change, write := s.TakePolicy(Prune, c.reset)
		if change != c.want || write != c.write {
			t.Errorf("%s: %v, write %v; want %v, %v", c.name, change, write, c.want, c.write)
		}
		if cp := s.Checkpoint(); cp != nil && cp.Policy != c.stored {
			t.Errorf("%s: the checkpoint's policy is %q, want %q", c.name, cp.Policy, c.stored)
		}
	}
}

// TestDecideFailback covers the --failback decision: a reverse without the
// flag is left to the cycle check unless drained or recorded; with it,
// refused unless the one reverse is drained, exact and the one recorded.
func TestDecideFailback(t *testing.T) {
	drained := Reverse{Name: "ab", Drained: true, CutRev: 42, Exact: true}
	undrained := Reverse{Name: "ab"}
	narrow := Reverse{Name: "n", Drained: true, CutRev: 9}
	for _, c := range []struct {
		name     string
		failback bool
		cp       *Checkpoint
		found    []Reverse
		want     Failback
		refusal  FailbackRefusal
	}{
		{"no reverse, no flag: a plain mirror", false, nil, nil, Failback{}, FailbackAccepted},
		{"no reverse, flag", true, nil, nil, Failback{}, NothingToFailBack},
		{"reverse retired after the failback", true, &Checkpoint{FailbackFrom: "ab", Adopted: true}, nil, Failback{From: "ab"}, FailbackAccepted},
		{"reverse retired, no flag", false, &Checkpoint{FailbackFrom: "ab", Adopted: true}, nil, Failback{}, FailbackAccepted},
		{"drained reverse, no flag", false, nil, []Reverse{drained}, Failback{}, NotAFailback},
		{"undrained reverse, no flag: the cycle check refuses it", false, nil, []Reverse{undrained}, Failback{}, FailbackAccepted},
		{"undrained reverse, recorded failback, no flag", false, &Checkpoint{FailbackFrom: "ab"}, []Reverse{undrained}, Failback{}, NotAFailback},
		{"restart without the flag", false, &Checkpoint{FailbackFrom: "ab", Adopted: true}, []Reverse{drained}, Failback{}, NotAFailback},
		{"undrained reverse, flag", true, nil, []Reverse{undrained}, Failback{}, ReverseNotDrained},
		{"not the exact reverse", true, nil, []Reverse{narrow}, Failback{}, ReverseNotExact},
		{"two reverses", true, nil, []Reverse{drained, narrow}, Failback{}, SeveralReverses},
		{"two reverses, no flag", false, nil, []Reverse{undrained, narrow}, Failback{}, SeveralReverses},
		{"another reverse than recorded", true, &Checkpoint{FailbackFrom: "old"}, []Reverse{drained}, Failback{}, AnotherThanRecorded},
		{"first failback", true, nil, []Reverse{drained}, Failback{From: "ab", Adopt: true, CutRev: 42}, FailbackAccepted},
		{"restart mid-adoption", true, &Checkpoint{FailbackFrom: "ab", AdoptedThrough: "/p/3"}, []Reverse{drained}, Failback{From: "ab", Adopt: true, CutRev: 42}, FailbackAccepted},
		{"restart after adoption", true, &Checkpoint{FailbackFrom: "ab", Adopted: true}, []Reverse{drained}, Failback{From: "ab", CutRev: 42}, FailbackAccepted},
	} {
		got, refusal := DecideFailback(c.failback, c.cp, c.found)
		if got != c.want || refusal != c.refusal {
			t.Errorf("%s: %+v, %v; want %+v, %v", c.name, got, refusal, c.want, c.refusal)
		}
	}
}

// TestDrain walks a drain: the checkpoint behind the source, then caught
// up; a change restarts the quiet; quiet for Quiet calls the cutover,
// looking for changes since the revision the quiet began at; a drain that
// gives up says why.
func TestDrain(t *testing.T) {
	quiet := time.Second
	d := NewDrain(quiet)
	d.SourceAt(80)
	if d.CheckpointAt(Checkpoint{Phase: PhaseStream, Revision: 70}) {
		t.Fatal("a checkpoint behind the source is caught up")
	}
	if d.CheckpointAt(Checkpoint{Phase: PhaseSync, Revision: 90}) {
		t.Fatal("a checkpoint still syncing is caught up")
	}
	if r := d.GaveUp(t0, time.Minute); r.KeptChanging || r.CheckpointRev != 90 || r.Head != 80 {
		t.Fatalf("gave up while behind: %+v", r)
	}
	if !d.CheckpointAt(Checkpoint{Phase: PhaseStream, Revision: 80}) || d.Since(80) != 80 {
		t.Fatal("a checkpoint at the source's revision is not caught up, or not looked after")
	}
	if d.Checked(80, 81, t0) != DrainChanged || d.Since(85) != 85 {
		t.Fatal("a change: not looked at again from the new checkpoint")
	}
	if d.Checked(85, 0, t0.Add(100*time.Millisecond)) != DrainWait {
		t.Fatal("cut before the quiet began")
	}
	if d.Since(87) != 85 {
		t.Fatal("the quiet restarts when the checkpoint moves on")
	}
	if d.Checked(87, 0, t0.Add(quiet)) != DrainWait {
		t.Fatal("cut before Quiet passed")
	}
	if d.Checked(87, 0, t0.Add(100*time.Millisecond+quiet)) != DrainCut {
		t.Fatal("not cut after Quiet")
	}
	r := d.GaveUp(t0.Add(2*time.Second), 3*time.Second)
	if !r.KeptChanging || r.Changes != 1 || r.LastChange != 81 || r.LastAgo != 2*time.Second {
		t.Fatalf("gave up after a recent change: %+v", r)
	}
	if d.GaveUp(t0.Add(4*time.Second), 3*time.Second).KeptChanging {
		t.Fatal("a change older than the timeout counts as still changing")
	}
}
