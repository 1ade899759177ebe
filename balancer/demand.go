package balancer

import (
	"sync"
	"sync/atomic"
	"time"
)

const (
	// budgetMemory is how long a staleness budget a client used keeps the
	// replicas' probes at that bound (see budgets).
	budgetMemory = 30 * time.Second
	// maxBudgets is the most budgets remembered at once: a client whose
	// budget varies from call to call fills it, and only a tighter budget
	// then takes the loosest one's place.
	maxBudgets = 64
	// tightRetry is, in probe intervals, how long a replica that failed a
	// probe with the tightest budget is probed without it.
	tightRetry = 10
)

// budgets remembers the staleness budgets the balanced client's reads used
// lately, so that probes ask the replicas for the tightest of them. A
// replica runs its rounds at the full rate only while bounded reads come
// whose bound its idle rounds could not serve: a balancer whose clients
// use no tight budget probes with MaxStaleness and leaves its replicas
// idle (one round a second, not twenty), and one whose clients do keeps
// them fast, so that the bounds they report let it route those reads to
// them.
type budgets struct {
	mu   sync.RWMutex
	seen map[time.Duration]*atomic.Int64 // budget bucket → when last used, in Unix ns
}

// bucket is the budget d is remembered as: d rounded down to 10ms (to 1ms
// under 10ms), so that budgets computed per call fall in a few buckets,
// and a probe with the bucket is never looser than d.
func bucket(d time.Duration) time.Duration {
	if b := d.Truncate(10 * time.Millisecond); b > 0 {
		return b
	}
	if b := d.Truncate(time.Millisecond); b > 0 {
		return b
	}
	return d
}

// used records a read with budget d at now, and tells whether it is
// tighter than every budget remembered (then the replicas are probed at
// once). A read lock and an atomic store on the path of every budgeted
// read, but for a budget not remembered.
func (bs *budgets) used(d time.Duration, now time.Time) (tighter bool) {
	d = bucket(d)
	bs.mu.RLock()
	at, ok := bs.seen[d]
	bs.mu.RUnlock()
	if ok {
		at.Store(now.UnixNano())
		return false
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.seen == nil {
		bs.seen = map[time.Duration]*atomic.Int64{}
	}
	if at, ok = bs.seen[d]; ok {
		at.Store(now.UnixNano())
		return false
	}
	tighter = true
	var loosest time.Duration
	for b := range bs.seen {
		if b < d {
			tighter = false
		}
		loosest = max(loosest, b)
	}
	if len(bs.seen) >= maxBudgets {
		if d >= loosest {
			return false
		}
		delete(bs.seen, loosest)
	}
	at = &atomic.Int64{}
	at.Store(now.UnixNano())
	bs.seen[d] = at
	return tighter
}

// tightest is the smallest budget used within budgetMemory of now, and
// false if none was; budgets older than that are forgotten.
func (bs *budgets) tightest(now time.Time) (time.Duration, bool) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	var least time.Duration
	found := false
	for d, at := range bs.seen {
		if now.Sub(time.Unix(0, at.Load())) > budgetMemory {
			delete(bs.seen, d)
			continue
		}
		if !found || d < least {
			least, found = d, true
		}
	}
	return least, found
}
