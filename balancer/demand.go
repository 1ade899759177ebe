package balancer

import (
	"sync"
	"sync/atomic"
	"time"
)

// budgetMemory is how long a staleness budget a client used keeps the
// replicas' probes at that bound (see budgets).
const budgetMemory = 30 * time.Second

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
	seen map[time.Duration]*atomic.Int64 // budget → when last used, in Unix ns
}

// used records a read with budget d at now, and tells whether d was not
// remembered (then the replicas are probed at once). A read lock and an
// atomic store, on the path of every budgeted read, but for a budget not
// remembered.
func (bs *budgets) used(d time.Duration, now time.Time) (new bool) {
	bs.mu.RLock()
	at, ok := bs.seen[d]
	bs.mu.RUnlock()
	if !ok {
		bs.mu.Lock()
		if bs.seen == nil {
			bs.seen = map[time.Duration]*atomic.Int64{}
		}
		if at, ok = bs.seen[d]; !ok {
			at = &atomic.Int64{}
			bs.seen[d] = at
		}
		bs.mu.Unlock()
	}
	at.Store(now.UnixNano())
	return !ok
}

// tightest is the smallest budget used within budgetMemory of now, and
// false if none was; budgets older than that are forgotten.
func (bs *budgets) tightest(now time.Time) (time.Duration, bool) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	var min time.Duration
	found := false
	for d, at := range bs.seen {
		if now.Sub(time.Unix(0, at.Load())) > budgetMemory {
			delete(bs.seen, d)
			continue
		}
		if !found || d < min {
			min, found = d, true
		}
	}
	return min, found
}
