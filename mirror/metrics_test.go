package mirror

import (
	"errors"
	"testing"
	"time"
)

// TestStall: the mirror is stalled once it has had work to do (behind
// the source, or failing) for StallAfter without a commit; having nothing
// to do is never a stall.
func TestStall(t *testing.T) {
	m := newMetrics(nil)
	t0 := time.Unix(1000, 0)
	after := 10 * time.Second
	check := func(at time.Duration, want, wantChanged bool) {
		t.Helper()
		got, changed, _, _ := m.stall(t0.Add(at), after)
		if got != want || changed != wantChanged {
			t.Fatalf("at +%v: stalled %v (changed %v), want %v (changed %v)", at, got, changed, want, wantChanged)
		}
	}
	check(0, false, false)
	check(time.Hour, false, false) // idle for an hour: caught up, no error
	m.sourceAt(5)                  // behind from +1h
	check(time.Hour+9*time.Second, false, false)
	check(time.Hour+10*time.Second, true, true)
	check(time.Hour+11*time.Second, true, false)
	m.committed(t0.Add(time.Hour + 12*time.Second))
	m.appliedAt(5)
	check(time.Hour+12*time.Second, false, true)
	m.failing(errors.New("destination unreachable")) // failing while caught up
	check(2*time.Hour, true, true)
}
