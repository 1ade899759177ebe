package mirror

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// leaseWorkers bounds the lease requests a mirror has in flight at once.
const leaseWorkers = 64

// leases gives each source lease a destination lease and keeps it alive
// while the source lease lives:
//   - a key on a source lease is written on a destination lease granted
//     for the source lease's TTL; the mapping is kept in the destination,
//     on the lease it names, so a restarted mirror keeps the same leases;
//   - every destination lease is kept alive by clientv3's lessor, which
//     multiplexes all keep-alives on one stream: thousands of leases cost
//     one stream, not a round trip each;
//   - once a second, one LeaseLeases request lists the source's live
//     leases; a destination lease whose source lease is gone is revoked
//     (its keys' deletes also come by the watch);
//   - a destination lease that ends while its source lease lives (the
//     mirror was away longer than its TTL, or the destination was cut
//     off) is reported lost, and the mirror's loop writes its keys again
//     on a new lease (mirror.restore).
//
// Its goroutines are owned by close.
type leases struct {
	src, dst *clientv3.Client
	prefix   string
	timeout  time.Duration
	// clock ticks the list of the source's live leases.
	clock  clockwork.Clock
	lg     *zap.Logger
	m      *metrics
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// lostc is signalled when lost gains a lease.
	lostc chan struct{}

	mu struct {
		sync.Mutex
		byS  map[int64]*destLease // source lease → its destination lease
		lost map[int64]bool       // source leases whose destination lease ended
		gen  uint64               // counts mappings made
		// none: source leases that had no key under the prefix when
		// checked; never checked again.
		none map[int64]bool
	}
}

type destLease struct {
	id     clientv3.LeaseID
	gen    uint64
	cancel context.CancelFunc
}

func newLeases(src, dst *clientv3.Client, prefix string, timeout time.Duration, clock clockwork.Clock, lg *zap.Logger, m *metrics) *leases {
	l := &leases{src: src, dst: dst, prefix: prefix, timeout: timeout, clock: clock, lg: lg, m: m, lostc: make(chan struct{}, 1)}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.mu.byS, l.mu.lost, l.mu.none = map[int64]*destLease{}, map[int64]bool{}, map[int64]bool{}
	return l
}

// close stops every keep-alive and waits for their goroutines.
func (l *leases) close() {
	l.cancel()
	l.wg.Wait()
}

// load reads the mapping a previous run left, and keeps its leases alive.
func (l *leases) load(ctx context.Context) error {
	resp, err := l.dst.Get(ctx, l.prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("mirror: reading lease mappings: %w", err)
	}
	for _, kv := range resp.Kvs {
		src, err1 := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), l.prefix), 16, 64)
		dst, err2 := strconv.ParseInt(string(kv.Value), 16, 64)
		if err1 == nil && err2 == nil {
			l.adopt(src, clientv3.LeaseID(dst))
		}
	}
	return nil
}

// dest is the destination lease of a source lease; 0 if it has none.
func (l *leases) dest(src int64) clientv3.LeaseID {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := l.mu.byS[src]; d != nil {
		return d.id
	}
	return 0
}

// ensure gives each of srcs that has none a destination lease, many at
// once; a source lease already gone gets none.
func (l *leases) ensure(ctx context.Context, srcs []int64) error {
	todo := map[int64]bool{}
	l.mu.Lock()
	for _, s := range srcs {
		if l.mu.byS[s] == nil {
			todo[s] = true
		}
	}
	l.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(leaseWorkers)
	for s := range todo {
		g.Go(func() error { return l.grant(gctx, s) })
	}
	return g.Wait()
}

// grant gives a source lease a destination lease of the same granted TTL.
func (l *leases) grant(ctx context.Context, src int64) error {
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	ttl, err := l.src.TimeToLive(rctx, clientv3.LeaseID(src))
	if err != nil {
		return fmt.Errorf("mirror: source lease %x: %w", src, err)
	}
	if ttl.TTL <= 0 {
		return nil
	}
	g, err := l.dst.Grant(rctx, max(ttl.GrantedTTL, ttl.TTL))
	if err != nil {
		return fmt.Errorf("mirror: destination lease for %x: %w", src, err)
	}
	// The mapping lives on the lease it names, so it goes when that does.
	if _, err := l.dst.Put(rctx, l.prefix+strconv.FormatInt(src, 16), strconv.FormatInt(int64(g.ID), 16), clientv3.WithLease(g.ID)); err != nil {
		return fmt.Errorf("mirror: recording destination lease for %x: %w", src, err)
	}
	l.adopt(src, g.ID)
	return nil
}

// adopt records a mapping and keeps its destination lease alive until
// it is dropped, or reports it lost when it ends.
func (l *leases) adopt(src int64, id clientv3.LeaseID) {
	kctx, cancel := context.WithCancel(l.ctx)
	l.mu.Lock()
	if old := l.mu.byS[src]; old != nil {
		old.cancel()
	}
	l.mu.gen++
	l.mu.byS[src] = &destLease{id: id, gen: l.mu.gen, cancel: cancel}
	delete(l.mu.none, src)
	// A lost lease stays lost when a change of one of its keys gets it a
	// new destination lease: its other keys are still missing, and only
	// restore writes them again.
	l.mu.Unlock()
	ch, err := l.dst.KeepAlive(kctx, id)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if err == nil {
			for range ch {
			}
		}
		if kctx.Err() == nil {
			l.markLost(src, id)
		}
		cancel()
	}()
}

// markLost drops the mapping of a destination lease that ended by itself.
func (l *leases) markLost(src int64, id clientv3.LeaseID) {
	l.mu.Lock()
	d := l.mu.byS[src]
	if d == nil || d.id != id {
		l.mu.Unlock()
		return
	}
	delete(l.mu.byS, src)
	l.mu.lost[src] = true
	l.mu.Unlock()
	l.m.leaseLost.Inc()
	l.lg.Warn("destination lease ended while the mirror kept it alive; writing its keys again on a new lease", zap.String("source-lease", strconv.FormatInt(src, 16)), zap.String("dest-lease", strconv.FormatInt(int64(id), 16)))
	select {
	case l.lostc <- struct{}{}:
	default:
	}
}

// takeLost returns and forgets the source leases whose destination lease
// ended.
func (l *leases) takeLost() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int64, 0, len(l.mu.lost))
	for s := range l.mu.lost {
		out = append(out, s)
	}
	clear(l.mu.lost)
	return out
}

// loseAgain reports srcs lost again: their restore did not complete.
func (l *leases) loseAgain(srcs []int64) {
	if len(srcs) == 0 {
		return
	}
	l.mu.Lock()
	for _, s := range srcs {
		l.mu.lost[s] = true
	}
	l.mu.Unlock()
	select {
	case l.lostc <- struct{}{}:
	default:
	}
}

// watchSource lists the source's live leases once a second (of the
// mirror's clock) and revokes the destination leases of those that ended,
// until ctx ends.
func (l *leases) watchSource(ctx context.Context) {
	t := l.clock.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		alive, gen, err := l.sourceLeases(ctx)
		if err != nil {
			l.lg.Debug("listing source leases", zap.Error(err))
			continue
		}
		var ended []*destLease
		l.mu.Lock()
		for s, d := range l.mu.byS {
			// Only mappings made before the list was asked for: a lease
			// granted since may be missing from it.
			if d.gen <= gen && !alive[s] {
				ended = append(ended, d)
				delete(l.mu.byS, s)
			}
		}
		l.mu.Unlock()
		for _, d := range ended {
			d.cancel()
			rctx, cancel := context.WithTimeout(ctx, l.timeout)
			if _, err := l.dst.Revoke(rctx, d.id); err != nil && ctx.Err() == nil {
				l.lg.Debug("revoking destination lease", zap.Error(err))
			}
			cancel()
		}
	}
}

// sourceLeases is the set of the source's live leases, and the mapping
// generation before it was asked for.
func (l *leases) sourceLeases(ctx context.Context) (map[int64]bool, uint64, error) {
	l.mu.Lock()
	gen := l.mu.gen
	l.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	resp, err := l.src.Leases(rctx)
	if err != nil {
		return nil, 0, fmt.Errorf("mirror: listing source leases: %w", err)
	}
	alive := make(map[int64]bool, len(resp.Leases))
	for _, ls := range resp.Leases {
		alive[int64(ls.ID)] = true
	}
	return alive, gen, nil
}

// unmapped lists live source leases with no destination lease that have
// not been found keyless before.
func (l *leases) unmapped(ctx context.Context) ([]int64, error) {
	alive, _, err := l.sourceLeases(ctx)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int64
	for s := range alive {
		if l.mu.byS[s] == nil && !l.mu.none[s] {
			out = append(out, s)
		}
	}
	return out, nil
}

// keyless records source leases with no key under the prefix.
func (l *leases) keyless(srcs []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range srcs {
		l.mu.none[s] = true
	}
}
