package compare

import (
	"cmp"
	"slices"
	"sort"
	"time"
)

// acked is the writer's acknowledged history, the yardstick every read is
// measured against: which writes had been acknowledged before a read was
// sent, and when.
type acked struct {
	writes []Write // acknowledged only, in sequence (and so return) order
	// revs maps every sequence number whose revision is known to it: from
	// the writer's acknowledgements, and for an ambiguous put that took
	// effect, from the replica's watch (the replica shares the primary's
	// revisions).
	revs map[int64]int64
	// ok holds the acknowledged sequence numbers.
	ok   map[int64]bool
	keys int64
}

func newAcked(h *History) *acked {
	a := &acked{revs: map[int64]int64{}, ok: map[int64]bool{}, keys: h.Prefill}
	for _, w := range h.Writes {
		if w.Acked {
			a.writes = append(a.writes, w)
			a.revs[w.Seq] = w.Rev
			a.ok[w.Seq] = true
		}
	}
	for _, ev := range h.Watches["replica"] {
		if _, ok := a.revs[ev.Seq]; !ok {
			a.revs[ev.Seq] = ev.Rev
		}
	}
	return a
}

// before returns how many acknowledged writes had returned before t.
func (a *acked) before(t time.Duration) int {
	return sort.Search(len(a.writes), func(i int) bool { return a.writes[i].Return >= t })
}

// rev is the revision of seq, or if it is unknown (an ambiguous put no
// watch saw), that of the latest acknowledged write before it: a lower
// bound of the position, so staleness is never understated.
func (a *acked) rev(seq int64) int64 {
	if r, ok := a.revs[seq]; ok {
		return r
	}
	i := sort.Search(len(a.writes), func(i int) bool { return a.writes[i].Seq > seq })
	if i == 0 {
		return 0
	}
	return a.writes[i-1].Rev
}

// staleness measures a read that was sent at call and saw position pos:
// in milliseconds, how long before call the oldest acknowledged write it
// does not show had been acknowledged; in revisions, how far its position
// is behind the latest write acknowledged before call. Both are 0 for a read
// that shows every write acknowledged before it was sent.
func (a *acked) staleness(call time.Duration, pos int64) (ms float64, revs int64) {
	n := a.before(call)
	if n == 0 || a.writes[n-1].Seq <= pos {
		return 0, 0
	}
	// The oldest acknowledged write the read misses.
	j := sort.Search(n, func(i int) bool { return a.writes[i].Seq > pos })
	ms = float64(call-a.writes[j].Return) / float64(time.Millisecond)
	return ms, max(a.writes[n-1].Rev-a.rev(pos), 0)
}

// torn says whether a read at position pos returned, for some key, a value
// older than an acknowledged put to that key at or before pos: keys from
// different revisions, not one snapshot. Key i holds sequence numbers
// i+1, i+1+keys, … (the prefill writes each key once, in order).
func (a *acked) torn(pos int64, vals []int64) bool {
	if a.keys == 0 || int64(len(vals)) != a.keys {
		return false // a history without a prefill has no key layout
	}
	for i, v := range vals {
		// The latest put to key i at or before pos, then back one
		// round at a time to the latest acknowledged one.
		for s := pos - (pos-1-int64(i))%a.keys; s > v && s > 0; s -= a.keys {
			if s <= pos && a.ok[s] {
				return true
			}
		}
	}
	return false
}

// Quantiles summarise a distribution.
type Quantiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// quantiles uses the nearest rank; it sorts vs.
func quantiles(vs []float64) Quantiles {
	if len(vs) == 0 {
		return Quantiles{}
	}
	slices.Sort(vs)
	rank := func(q float64) float64 {
		i := int(q*float64(len(vs))+0.999999) - 1
		return vs[min(max(i, 0), len(vs)-1)]
	}
	return Quantiles{P50: rank(0.50), P99: rank(0.99), Max: vs[len(vs)-1]}
}

// interval is a span of the run's clock.
type interval struct{ from, to time.Duration }

// overlap is how much of iv lies within [from, to).
func (iv interval) overlap(from, to time.Duration) time.Duration {
	return max(min(iv.to, to)-max(iv.from, from), 0)
}

// outages are the spans in which a path answered no read: from the call of
// a failed read until the return of the next read sent after it (in call
// order) that succeeded, or the end of the run. A read that succeeded only
// once the path came back ends the outage when it returns, not when it was
// sent. reads must be of one path.
func outages(reads []Read, end time.Duration) []interval {
	rs := slices.Clone(reads)
	slices.SortFunc(rs, func(a, b Read) int { return cmp.Compare(a.Call, b.Call) })
	var out []interval
	down := time.Duration(-1)
	for _, r := range rs {
		switch {
		case !r.OK() && down < 0:
			down = r.Call
		case r.OK() && down >= 0:
			out = append(out, interval{down, r.Return})
			down = -1
		}
	}
	if down >= 0 {
		out = append(out, interval{down, max(end, down)})
	}
	return merge(out)
}

// merge joins overlapping intervals of a list sorted by start.
func merge(ivs []interval) []interval {
	var out []interval
	for _, iv := range ivs {
		if n := len(out); n > 0 && iv.from <= out[n-1].to {
			out[n-1].to = max(out[n-1].to, iv.to)
			continue
		}
		out = append(out, iv)
	}
	return out
}
