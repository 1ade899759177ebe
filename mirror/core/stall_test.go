package core

import (
	"errors"
	"testing"
	"time"
)

// TestStall: the mirror is stalled once it has had work to do (behind
// the source, or failing) for StallAfter without a commit; having nothing
// to do is never a stall.
func TestStall(t *testing.T) {
	p := NewProgress(t0)
	after := 10 * time.Second
	check := func(at time.Duration, want, wantChanged bool, say Say) {
		t.Helper()
		v := p.Check(t0.Add(at), after)
		if v.Stalled != want || v.Changed != wantChanged || v.Say(time.Second) != say {
			t.Fatalf("at +%v: %+v says %v, want stalled %v (changed %v) saying %v", at, v, v.Say(time.Second), want, wantChanged, say)
		}
	}
	check(0, false, false, SayNothing)
	check(time.Hour, false, false, SayNothing) // idle for an hour: caught up, no error
	p.SourceAt(5, t0.Add(time.Hour))           // behind from +1h
	if s, a, since := p.Lag(); s != 5 || a != 0 || !since.Equal(t0.Add(time.Hour)) {
		t.Fatalf("lag %d %d %v, want behind 5 revisions since +1h", s, a, since)
	}
	p.SourceAt(4, t0.Add(2*time.Hour)) // older: nothing changes
	check(time.Hour+9*time.Second, false, false, SayNothing)
	check(time.Hour+10*time.Second, true, true, SayStalled)
	check(time.Hour+11*time.Second, true, false, SayNothing)
	check(time.Hour+61*time.Second, true, false, SayNothing)
	check(time.Hour+60*time.Second+500*time.Millisecond, true, false, SayStillStalled) // a minute without progress
	p.Committed(t0.Add(time.Hour + 72*time.Second))
	p.AppliedAt(5)
	if _, _, since := p.Lag(); !since.IsZero() {
		t.Fatalf("caught up, behind since %v", since)
	}
	check(time.Hour+72*time.Second, false, true, SayProgressing)
	err := errors.New("destination unreachable")
	p.Failing(err) // failing while caught up
	check(2*time.Hour, true, true, SayStalled)
	if v := p.Check(t0.Add(2*time.Hour), after); v.LastErr != err || v.IdleFor != time.Hour-72*time.Second {
		t.Fatalf("verdict %+v, want the last error and idle since the last commit", v)
	}
}
