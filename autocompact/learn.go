package autocompact

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Learning's constants.
const (
	// MinSeen is how many compactions must be seen before a policy is
	// learned: two intervals, so that one compaction out of step (an
	// operator's) does not decide.
	MinSeen = 3
	// keep is how many of the last compactions the policy is learned from.
	keep = 8
	// revisionInterval is how often etcd's revision compactor compacts
	// (v3compactor's revInterval); intervalSlack how far from a multiple
	// of it an interval may be (apply latency, sampling).
	revisionInterval = 5 * time.Minute
	intervalSlack    = 15 * time.Second
	// hourly: etcd's periodic compactor compacts at most hourly; an
	// interval above hourlyFrom is taken as that, and the retention is
	// then the compacted revisions' age.
	hourly     = time.Hour
	hourlyFrom = 55 * time.Minute
	// The store's revision is remembered once per fineStep for fineSpan,
	// and once per coarseStep for coarseSpan: how a compacted revision's
	// age is told.
	fineStep, fineSpan     = time.Second, 2 * time.Hour
	coarseStep, coarseSpan = time.Minute, 72 * time.Hour
)

// Sample is one look at the member's store.
type Sample struct {
	At time.Time
	// Compacted is the store's compacted revision (mvcc's FirstRev);
	// Head its current revision.
	Compacted, Head int64
}

// Compaction is one compaction seen applied.
type Compaction struct {
	// At is when it was first seen; Rev the revision compacted to; Head
	// the store's revision then, and PrevHead at the sample before (the
	// leader proposed it in between, give or take its apply latency).
	At                  time.Time
	Rev, Head, PrevHead int64
	// The compacted revision's age (how long before At it was the
	// store's revision) is between MinAge and MaxAge; MaxAge is
	// unbounded (Unbounded) when the revision is older than what the
	// store's history remembers.
	MinAge, MaxAge time.Duration
	Unbounded      bool
}

// Learned is what the compactions seen tell.
type Learned struct {
	// OK once MinSeen compactions were seen: Policy is then the one they
	// fit (none before).
	OK     bool
	Policy Policy
	// AtLeast: the retention is a lower bound (the compacted revisions
	// are older than this replica's memory of the store's revisions).
	AtLeast bool
	// Seen counts the compactions seen since the learner started; Last
	// is when the last one was.
	Seen int
	Last time.Time
	// Why says it for people: "4 compactions seen: every 5s, each to the
	// revision of 5s before".
	Why string
}

// Learner learns a cluster's auto-compaction from samples of a member's
// store: a compaction is its compacted revision moving. Not safe for
// concurrent use: one goroutine feeds it.
type Learner struct {
	started      bool
	last         Sample
	seen         []Compaction
	count        int
	fine, coarse history
	learned      Learned
}

// Observe feeds one sample (samples come in time order), and reports
// whether it shows a compaction.
func (l *Learner) Observe(s Sample) bool {
	l.fine.add(s.At, s.Head, fineStep, fineSpan)
	l.coarse.add(s.At, s.Head, coarseStep, coarseSpan)
	if !l.started || s.Compacted < l.last.Compacted {
		// The first sample, or a store replaced (a snapshot): a base.
		l.started, l.last = true, s
		return false
	}
	compacted := s.Compacted > l.last.Compacted
	prev := l.last
	l.last = s
	if !compacted {
		return false
	}
	c := Compaction{At: s.At, Rev: s.Compacted, Head: s.Head, PrevHead: prev.Head}
	c.MinAge, c.MaxAge, c.Unbounded = l.age(s.Compacted, s.At)
	l.seen = append(l.seen, c)
	if len(l.seen) > keep {
		l.seen = l.seen[len(l.seen)-keep:]
	}
	l.count++
	l.learned = Infer(l.seen)
	l.learned.Seen, l.learned.Last = l.count, s.At
	return true
}

// Learned is what the compactions seen so far tell.
func (l *Learner) Learned() Learned { return l.learned }

// age dates revision rev at now from the store's history: the finer one
// when it goes back far enough.
func (l *Learner) age(rev int64, now time.Time) (lo, hi time.Duration, unbounded bool) {
	lo, hi, unbounded = l.fine.age(rev, now)
	if unbounded {
		if clo, chi, cu := l.coarse.age(rev, now); cu || chi >= lo {
			return max(lo, clo), chi, cu
		}
	}
	return lo, hi, unbounded
}

// point is the store's revision at a time.
type point struct {
	at   time.Time
	head int64
}

// history is the store's revision over time, one point per step at most,
// for span.
type history struct{ pts []point }

func (h *history) add(at time.Time, head int64, step, span time.Duration) {
	if n := len(h.pts); n > 0 && (at.Sub(h.pts[n-1].at) < step || head < h.pts[n-1].head) {
		if head < h.pts[n-1].head {
			h.pts = nil // a store replaced: its history is another's
		} else {
			return
		}
	}
	h.pts = append(h.pts, point{at, head})
	i := 0
	for i < len(h.pts)-1 && at.Sub(h.pts[i].at) > span {
		i++
	}
	h.pts = h.pts[i:]
}

// age says how long before now the store's revision was rev: the store
// reached rev after the last point below it, and passed it by the first
// point above it. Unbounded if no point is below rev (it is older than
// the history): then lo is the age of the first point above it.
func (h *history) age(rev int64, now time.Time) (lo, hi time.Duration, unbounded bool) {
	above := slices.IndexFunc(h.pts, func(p point) bool { return p.head > rev })
	if above >= 0 {
		lo = now.Sub(h.pts[above].at)
	}
	below := -1
	for i, p := range h.pts {
		if p.head < rev {
			below = i
		}
	}
	if below < 0 {
		return lo, 0, true
	}
	return lo, now.Sub(h.pts[below].at), false
}

// Infer is the policy compactions (oldest first) fit, once there are
// MinSeen of them. etcd's periodic compactor with retention R compacts
// every min(R, 1h) to the revision it recorded one tick (min(R, 1h)/10)
// more than R before: revisions R + R/10 old under an hour, R + 6m above.
//   - revision N when compactions come 5 minutes apart (the median; each
//     a multiple of etcd's 5 minutes) and each left the same number N of
//     revisions behind the store's, unless the compacted revisions' ages
//     fit a periodic compactor as well (each 1.1 intervals old: under a
//     steady write rate both fit; then periodic, which keeps at least as
//     much history when the rate grows);
//   - else periodic R: R the median interval, or, when compactions come
//     hourly (etcd's longest interval), the compacted revisions' age less
//     6 minutes.
//
// The retention is rounded to a whole hour, minute or second when within
// 3% of one, a revision count to the roundest number that fits.
func Infer(cs []Compaction) Learned {
	n := len(cs)
	if n < MinSeen {
		return Learned{Why: fmt.Sprintf("%d compactions seen; %d needed to learn", n, MinSeen)}
	}
	var intervals []time.Duration
	for i := 1; i < n; i++ {
		intervals = append(intervals, cs[i].At.Sub(cs[i-1].At))
	}
	every := median(intervals)
	lo, hi, bounded, agesFit := ageFit(cs)
	// Under an hour the compacted revisions are 1.1 intervals old;
	// hourly, all of an age.
	periodic := agesFit && (every >= hourlyFrom || within(every+every/10, lo, hi))
	// etcd's revision compactor compacts every 5 minutes while the store
	// moves: mostly 5 minutes apart, always a multiple.
	steps := (every-revisionInterval).Abs() <= intervalSlack && revisionSteps(intervals)
	if glo, ghi, ok := gapFit(cs); ok && steps && !periodic {
		g := roundestIn(glo, ghi)
		return Learned{OK: true, Policy: Policy{Mode: ModeRevision, Revisions: g},
			Why: fmt.Sprintf("%d compactions seen: every %v (or a multiple), each leaving %d revisions", n, revisionInterval, g)}
	}
	if every < hourlyFrom {
		r := roundDuration(every)
		why := fmt.Sprintf("%d compactions seen: every %v", n, r)
		if periodic {
			why += fmt.Sprintf(", each to the revision of %v before", roundDuration((lo+hi)/2))
		}
		return Learned{OK: true, Policy: Policy{Mode: ModePeriodic, Retention: r}, Why: why}
	}
	const tick = hourly / 10
	switch {
	case agesFit:
		r := roundDuration(max(hourly, (lo+hi)/2-tick))
		return Learned{OK: true, Policy: Policy{Mode: ModePeriodic, Retention: r},
			Why: fmt.Sprintf("%d compactions seen: hourly, each to the revision of %v before", n, roundDuration((lo+hi)/2))}
	case !bounded:
		// Older than the history: at least as old as its start.
		r := roundDuration(max(hourly, lo-tick))
		return Learned{OK: true, AtLeast: true, Policy: Policy{Mode: ModePeriodic, Retention: r},
			Why: fmt.Sprintf("%d compactions seen: hourly, each to a revision more than %v old (older than this replica remembers): the voters' retention may be longer", n, roundDuration(lo))}
	}
	r := roundDuration(max(hourly, (lo+hi)/2-tick))
	return Learned{OK: true, Policy: Policy{Mode: ModePeriodic, Retention: r},
		Why: fmt.Sprintf("%d compactions seen: hourly, to revisions of different ages (about %v)", n, r)}
}

// within reports whether d is in [lo, hi], give or take tolerance.
func within(d, lo, hi time.Duration) bool {
	return d >= lo-tolerance(lo) && d <= hi+tolerance(hi)
}

// gapFit intersects how many revisions each compaction left behind the
// store's: between the store's revision at the sample before it and at
// the one that saw it.
func gapFit(cs []Compaction) (lo, hi int64, ok bool) {
	hi = math.MaxInt64
	for _, c := range cs {
		lo, hi = max(lo, c.PrevHead-c.Rev), min(hi, c.Head-c.Rev)
	}
	lo = max(lo, 1)
	return lo, hi, lo <= hi+max(2, hi/50)
}

// ageFit says how old the compacted revisions were: the ages all
// compactions but one at most agree on ([lo, hi], fit), the one out of step
// being an operator's compaction or the compactor's first (which etcd
// makes one tick early). Unbounded when more than one revision is older
// than the store's history: lo is then the largest lower bound.
func ageFit(cs []Compaction) (lo, hi time.Duration, bounded, fit bool) {
	var mids []time.Duration
	for _, c := range cs {
		if !c.Unbounded {
			mids = append(mids, (c.MinAge+c.MaxAge)/2)
		}
	}
	if len(mids) < len(cs)-1 {
		for _, c := range cs {
			lo = max(lo, c.MinAge)
		}
		return lo, 0, false, false
	}
	a := median(mids)
	hi, in := time.Duration(math.MaxInt64), 0
	for _, c := range cs {
		if c.Unbounded && a >= c.MinAge-tolerance(c.MinAge) {
			in++
		} else if !c.Unbounded && within(a, c.MinAge, c.MaxAge) {
			lo, hi, in = max(lo, c.MinAge), min(hi, c.MaxAge), in+1
		}
	}
	if in < len(cs)-1 || lo > hi+tolerance(hi) {
		return a, a, true, false // no agreement: about the median age
	}
	return lo, hi, true, true
}

// revisionSteps reports whether every interval is a multiple of etcd's
// revision compactor's 5 minutes.
func revisionSteps(intervals []time.Duration) bool {
	for _, d := range intervals {
		k := (d + revisionInterval/2) / revisionInterval
		if k < 1 || (d-k*revisionInterval).Abs() > intervalSlack {
			return false
		}
	}
	return true
}

// tolerance is how far two ages may differ and still be one retention.
func tolerance(d time.Duration) time.Duration { return max(2*time.Second, d/50) }

func median[T int64 | time.Duration](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// roundDuration rounds d to the largest of an hour, a minute or a second
// that is within 3% of it, else to a tenth of a second.
func roundDuration(d time.Duration) time.Duration {
	for _, unit := range []time.Duration{time.Hour, time.Minute, time.Second} {
		if r := d.Round(unit); r > 0 && (d-r).Abs()*100 <= r*3 {
			return r
		}
	}
	return max(d.Round(100*time.Millisecond), 100*time.Millisecond)
}

// roundestIn is the roundest number in [lo, hi] (hi widened by 2%, as
// hi counts writes after the compaction was proposed).
func roundestIn(lo, hi int64) int64 {
	hi += max(2, hi/50)
	for unit := pow10(hi); unit >= 1; unit /= 10 {
		if r := (lo + unit - 1) / unit * unit; r <= hi {
			return r
		}
	}
	return lo
}

func pow10(n int64) int64 {
	p := int64(1)
	for p*10 <= n {
		p *= 10
	}
	return p
}
