package readindex

import (
	"testing"
	"time"
)

// FuzzBatchPolicy checks batchPolicy.next's promises on any state: nothing
// to do without a waiting read or a due round; never a start sooner than
// minGap after the last; a wake-up always in the future; and a waiting read
// is never held past its maxWait beyond what minGap imposes.
func FuzzBatchPolicy(f *testing.F) {
	f.Add(int64(2e6), int64(5e6), int64(10e6), int64(3e6), false, false, 3, 8)
	f.Add(int64(0), int64(0), int64(0), int64(0), true, false, 0, 0)
	f.Add(int64(1e6), int64(0), int64(-1), int64(0), false, true, 1, 1)
	f.Fuzz(func(t *testing.T, gap, wait, sinceLast, sinceOldest int64, due, shared bool, pending, peak int) {
		minGap, maxWait := clampDur(gap), clampDur(wait)
		pending, peak = max(pending%1000, 0), max(peak%1000, 0)
		peak = max(peak, pending) // the peak counts the waiting reads
		now := time.Unix(1_000_000, 0)
		var lastStart, oldest time.Time
		if sinceLast >= 0 { // negative: no round has started yet
			lastStart = now.Add(-clampDur(sinceLast))
		}
		if pending > 0 {
			oldest = now.Add(-clampDur(sinceOldest))
		}
		p := batchPolicy{minGap: minGap, maxWait: maxWait}
		s := batchState{now: now, lastStart: lastStart, due: due, shared: shared, pending: pending, oldest: oldest, peak: peak}
		d := p.next(s)

		if pending == 0 && !due {
			if d != (batchDecision{}) {
				t.Fatalf("%+v: nothing waits and no round is due, but %+v", s, d)
			}
			return
		}
		if d.start && !lastStart.IsZero() && now.Before(lastStart.Add(minGap)) {
			t.Fatalf("%+v: a round starts %v after the last, under minGap %v", s, now.Sub(lastStart), minGap)
		}
		if !d.start {
			if d.at.IsZero() || !d.at.After(now) {
				t.Fatalf("%+v: neither a start nor a wake-up in the future: %+v", s, d)
			}
			latest := now
			if !lastStart.IsZero() {
				latest = later(latest, lastStart.Add(minGap))
			}
			if pending > 0 && maxWait > 0 {
				latest = later(latest, oldest.Add(maxWait))
			}
			if d.at.After(latest) {
				t.Fatalf("%+v: wakes at %v, past the gap and the oldest read's wait (%v)", s, d.at, latest)
			}
		}
	})
}

// clampDur turns any int64 into a duration between 0 and a minute.
func clampDur(n int64) time.Duration {
	if n < 0 {
		n = -(n + 1)
	}
	return time.Duration(n % int64(time.Minute))
}
