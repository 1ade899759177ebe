package autocompact

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFromFlags(t *testing.T) {
	for _, c := range []struct {
		mode, retention string
		want            Policy
		bad             bool
	}{
		{"periodic", "0", Policy{}, false},
		{"periodic", "1", Policy{Mode: ModePeriodic, Retention: time.Hour}, false},
		{"periodic", "5m", Policy{Mode: ModePeriodic, Retention: 5 * time.Minute}, false},
		{"periodic", "0s", Policy{}, false},
		{"revision", "1000", Policy{Mode: ModeRevision, Revisions: 1000}, false},
		{"revision", "0", Policy{}, false},
		{"revision", "5m", Policy{}, true},
		{"periodic", "-1", Policy{}, true},
		{"periodic", "soon", Policy{}, true},
		{"hourly", "1", Policy{}, true},
	} {
		got, err := FromFlags(c.mode, c.retention)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("FromFlags(%q, %q) = %+v, %v; want %+v (error %v)", c.mode, c.retention, got, err, c.want, c.bad)
		}
		if err != nil && !strings.Contains(err.Error(), "--auto-compaction-") {
			t.Errorf("FromFlags(%q, %q): %v names no flag", c.mode, c.retention, err)
		}
	}
}

// cluster is a simulated leader: its store's revision grows at rate
// writes a second (rate may change over time), and its compactor
// compacts as etcd's v3compactor does; a member applies each compaction
// applyDelay later.
type cluster struct {
	now        time.Time
	head       float64
	rate       func(at time.Duration) float64
	compacted  int64
	applied    []pending
	compact    func(c *cluster) // called every simStep
	applyDelay time.Duration
}

type pending struct {
	at  time.Time
	rev int64
}

const simStep = 10 * time.Millisecond

func (c *cluster) propose(rev int64) {
	c.applied = append(c.applied, pending{c.now.Add(c.applyDelay), rev})
}

// run advances the cluster by d, sampling the member every sample.
func (c *cluster) run(l *Learner, d, sample time.Duration) {
	end := c.now.Add(d)
	next := c.now
	for c.now.Before(end) {
		c.now = c.now.Add(simStep)
		c.head += c.rate(c.now.Sub(t0)) * simStep.Seconds()
		c.compact(c)
		for len(c.applied) > 0 && !c.applied[0].at.After(c.now) {
			c.compacted = max(c.compacted, c.applied[0].rev)
			c.applied = c.applied[1:]
		}
		if !c.now.Before(next) {
			l.Observe(Sample{At: c.now, Compacted: c.compacted, Head: int64(c.head)})
			next = next.Add(sample)
		}
	}
}

// periodic is etcd's periodic compactor (v3compactor.Periodic.Run), tick
// by tick.
func periodic(r time.Duration) func(*cluster) {
	tick := min(r, time.Hour) / 10
	retentions := int(r/tick) + 1
	var revs []int64
	var lastRev int64
	var lastSuccess, nextTick time.Time
	base := r
	return func(c *cluster) {
		if lastSuccess.IsZero() {
			lastSuccess, nextTick = c.now, c.now
			revs = append(revs, int64(c.head))
			nextTick = nextTick.Add(tick)
		}
		if c.now.Before(nextTick) {
			return
		}
		nextTick = c.now.Add(tick)
		defer func() {
			revs = append(revs, int64(c.head))
			if len(revs) > retentions {
				revs = revs[1:]
			}
		}()
		rev := revs[0]
		if c.now.Sub(lastSuccess) < base || rev == lastRev {
			return
		}
		if base == r {
			base = min(r, time.Hour)
		}
		c.propose(rev)
		lastRev, lastSuccess = rev, c.now
	}
}

// revision is etcd's revision compactor (v3compactor.Revision.Run).
func revision(n int64) func(*cluster) {
	var prev int64
	var next time.Time
	return func(c *cluster) {
		if next.IsZero() {
			next = c.now.Add(5 * time.Minute)
		}
		if c.now.Before(next) {
			return
		}
		next = c.now.Add(5 * time.Minute)
		rev := int64(c.head) - n
		if rev <= 0 || rev == prev {
			return
		}
		c.propose(rev)
		prev = rev
	}
}

func steady(w float64) func(time.Duration) float64 { return func(time.Duration) float64 { return w } }

// bursty writes w a second, ten times that for one minute in every seven.
func bursty(w float64) func(time.Duration) float64 {
	return func(at time.Duration) float64 {
		if at%(7*time.Minute) < time.Minute {
			return 10 * w
		}
		return w
	}
}

func TestLearnerLearnsEtcdsCompactors(t *testing.T) {
	for _, c := range []struct {
		name    string
		compact func(*cluster)
		rate    func(time.Duration) float64
		run     time.Duration
		sample  time.Duration
		want    Policy
		atLeast bool
	}{
		{"periodic 5s", periodic(5 * time.Second), steady(20), time.Minute, 100 * time.Millisecond, Policy{Mode: ModePeriodic, Retention: 5 * time.Second}, false},
		{"periodic 5s, bursts", periodic(5 * time.Second), bursty(5), 2 * time.Minute, 100 * time.Millisecond, Policy{Mode: ModePeriodic, Retention: 5 * time.Second}, false},
		{"periodic 90s, slow writes", periodic(90 * time.Second), steady(0.5), 10 * time.Minute, 100 * time.Millisecond, Policy{Mode: ModePeriodic, Retention: 90 * time.Second}, false},
		{"periodic 5m", periodic(5 * time.Minute), bursty(10), 40 * time.Minute, time.Second, Policy{Mode: ModePeriodic, Retention: 5 * time.Minute}, false},
		{"periodic 1h", periodic(time.Hour), steady(10), 5 * time.Hour, time.Second, Policy{Mode: ModePeriodic, Retention: time.Hour}, false},
		{"periodic 3h", periodic(3 * time.Hour), steady(10), 7 * time.Hour, time.Second, Policy{Mode: ModePeriodic, Retention: 3 * time.Hour}, false},
		// Compacted revisions older than the replica remembers (the last
		// compaction seen 2h12m after it started; the voters' are 3h6m
		// old): a lower bound, 2h12m less etcd's 6 minute tick.
		{"periodic 3h, young replica", periodic(3 * time.Hour), steady(10), 0, time.Second, Policy{Mode: ModePeriodic, Retention: 2*time.Hour + 6*time.Minute}, true},
		{"revision 1000, bursts", revision(1000), bursty(10), 40 * time.Minute, 100 * time.Millisecond, Policy{Mode: ModeRevision, Revisions: 1000}, false},
		{"revision 50000, bursts", revision(50000), bursty(100), 40 * time.Minute, 100 * time.Millisecond, Policy{Mode: ModeRevision, Revisions: 50000}, false},
		{"revision 3000, steady", revision(3000), steady(10), 40 * time.Minute, 100 * time.Millisecond, Policy{Mode: ModeRevision, Revisions: 3000}, false},
		// A steady rate at which 3300 revisions are 5.5 minutes, as old
		// as a periodic 5m compactor's: both fit; periodic is learned.
		{"revision 3300 at 10/s: as periodic 5m", revision(3300), steady(10), 40 * time.Minute, 100 * time.Millisecond, Policy{Mode: ModePeriodic, Retention: 5 * time.Minute}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := &cluster{now: t0, rate: c.rate, compact: c.compact, applyDelay: 3 * time.Millisecond}
			l := &Learner{}
			if c.name == "periodic 3h, young replica" {
				// The voters ran for 5h before the replica started.
				cl.run(&Learner{}, 5*time.Hour, time.Minute)
				cl.run(l, 3*time.Hour, c.sample)
			} else {
				cl.run(l, c.run, c.sample)
			}
			got := l.Learned()
			if !got.OK || got.Policy != c.want || got.AtLeast != c.atLeast {
				t.Fatalf("learned %+v; want %v (at least: %v)", got, c.want, c.atLeast)
			}
			t.Logf("%s: %s", got.Policy, got.Why)
		})
	}
}

// One compaction out of step (an operator's etcdctl compact) among the
// periodic compactor's does not change what is learned; two compactions
// teach nothing yet.
func TestLearnerIsNotSwayedByOneCompaction(t *testing.T) {
	cl := &cluster{now: t0, rate: steady(10), compact: periodic(10 * time.Second), applyDelay: 3 * time.Millisecond}
	l := &Learner{}
	cl.run(l, 32*time.Second, 100*time.Millisecond)
	if got := l.Learned(); got.OK || got.Seen != 2 {
		t.Fatalf("after 2 compactions: %+v; want nothing learned yet", got)
	}
	cl.run(l, 4*time.Second, 100*time.Millisecond)
	cl.compacted = int64(cl.head) - 1 // an operator compacts nearly everything
	cl.run(l, 60*time.Second, 100*time.Millisecond)
	want := Policy{Mode: ModePeriodic, Retention: 10 * time.Second}
	if got := l.Learned(); !got.OK || got.Policy != want {
		t.Fatalf("learned %+v; want %v", got, want)
	}
}

// A store replaced by a snapshot (its compacted revision and head go
// back) is a new base, not a compaction.
func TestLearnerTakesAReplacedStoreAsABase(t *testing.T) {
	l := &Learner{}
	for i, s := range []Sample{{t0, 100, 500}, {t0.Add(time.Second), 50, 300}, {t0.Add(2 * time.Second), 50, 310}} {
		if l.Observe(s) {
			t.Fatalf("sample %d %+v taken for a compaction", i, s)
		}
	}
	if !l.Observe(Sample{t0.Add(3 * time.Second), 60, 320}) {
		t.Fatal("a compaction after the new base not seen")
	}
}

func TestChoose(t *testing.T) {
	p5s := Policy{Mode: ModePeriodic, Retention: 5 * time.Second}
	p1h := Policy{Mode: ModePeriodic, Retention: time.Hour}
	learned := Learned{OK: true, Policy: p5s, Seen: 4, Why: "4 compactions seen: every 5s"}
	learning := Learned{Seen: 1, Why: "1 compactions seen; 3 needed to learn"}
	for _, c := range []struct {
		name           string
		flags          Policy
		l              Learned
		r              Remembered
		running        Policy
		want           Policy
		source, detail string
	}{
		{"flags alone", p1h, Learned{}, Remembered{}, Policy{}, p1h, SourceFlags, ""},
		{"flags as learned", p5s, learned, Remembered{}, Policy{}, p5s, SourceFlags, ""},
		{"flags unlike what was learned", p1h, learned, Remembered{}, Policy{}, p1h, SourceFlags, "unlike the compactions this member applied, which fit periodic 5s"},
		{"learned", Policy{}, learned, Remembered{Policy: p1h}, Policy{}, p5s, SourceLearned, "every 5s"},
		{"learned, running kept when near", Policy{}, learned, Remembered{}, Policy{Mode: ModePeriodic, Retention: 5200 * time.Millisecond}, Policy{Mode: ModePeriodic, Retention: 5200 * time.Millisecond}, SourceLearned, ""},
		{"learned, running replaced when far", Policy{}, learned, Remembered{}, p1h, p5s, SourceLearned, ""},
		{"remembered while learning", Policy{}, learning, Remembered{Policy: p1h, At: t0, Why: "hourly"}, Policy{}, p1h, SourceRemembered, "learning again: 1 compactions seen"},
		{"none yet", Policy{}, Learned{}, Remembered{}, Policy{}, Policy{}, SourceNone, "no compaction seen yet"},
	} {
		got := Choose(c.flags, c.l, c.r, c.running)
		if got.Run != c.want || got.Source != c.source || !strings.Contains(got.Detail, c.detail) || c.detail == "" && c.source == SourceFlags && got.Detail != "" {
			t.Errorf("%s: %+v; want %v from %s, detail with %q", c.name, got, c.want, c.source, c.detail)
		}
	}
}

func TestRounding(t *testing.T) {
	for d, want := range map[time.Duration]time.Duration{
		5100 * time.Millisecond: 5 * time.Second,
		5300 * time.Millisecond: 5300 * time.Millisecond,
		303 * time.Second:       5 * time.Minute,
		61 * time.Minute:        time.Hour,
		90 * time.Second:        90 * time.Second,
		20 * time.Millisecond:   100 * time.Millisecond,
	} {
		if got := roundDuration(d); got != want {
			t.Errorf("roundDuration(%v) = %v, want %v", d, got, want)
		}
	}
	for _, c := range []struct{ lo, hi, want int64 }{{990, 1013, 1000}, {1030, 1040, 1030}, {49800, 50400, 50000}, {7, 7, 7}, {1001, 1003, 1010}} {
		if got := roundestIn(c.lo, c.hi); got != c.want {
			t.Errorf("roundestIn(%d, %d) = %d, want %d", c.lo, c.hi, got, c.want)
		}
	}
}
