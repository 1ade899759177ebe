package compare

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/wire"
)

// Clients reach the three clusters. Primary reaches the voters, Replica the
// replica, Cascaded a cascaded replica (nil: none, and no cascaded paths),
// Mirror the mirror's destination.
type Clients struct {
	Primary, Replica, Cascaded, Mirror *clientv3.Client
}

// paths are the read paths cl can read.
func (cl Clients) paths() []Path {
	var out []Path
	for _, p := range Paths {
		if !p.Cascaded() || cl.Cascaded != nil {
			out = append(out, p)
		}
	}
	return out
}

// probeInterval paces each path's read-your-writes probes.
const probeInterval = 100 * time.Millisecond

// workload drives one run: the writer, the readers, the probes and the
// watchers. Each goroutine keeps what it observed in its own slice; run
// merges them once all have stopped, so nothing is shared while they run.
type workload struct {
	cfg config.Compare
	cl  Clients
	// clock times the run: time 0, every call and return, the writer's
	// ticks, the readers' arrivals, the probes and the drain.
	clock clockwork.Clock
	// base is time 0 of the run.
	base time.Time
	// lastAcked is the sequence number of the writer's latest acknowledged
	// put; the drain waits for the watches to deliver it.
	lastAcked atomic.Int64
}

// now is the time since time 0 of the run, on the run's clock: every call,
// return and event is stamped with it.
func (w *workload) now() time.Duration { return w.clock.Since(w.base) }

// key is the key sequence number seq is written to: the writer cycles
// through cfg.Keys keys, the prefill writing each of them once.
func (w *workload) key(seq int64) string {
	return w.cfg.Prefix + "k/" + fmt.Sprintf("%04d", (seq-1)%int64(w.cfg.Keys))
}

// rangePrefix is the prefix of the writer's keys, which the reads and the
// watches range over.
func (w *workload) rangePrefix() string { return w.cfg.Prefix + "k/" }

// prefill writes every key once (sequence numbers 1 to Keys), so that every
// read returns every key. Its writes happen before time 0.
func (w *workload) prefill(ctx context.Context) ([]Write, error) {
	start := w.clock.Now()
	var out []Write
	for seq := int64(1); seq <= int64(w.cfg.Keys); seq++ {
		call := w.clock.Since(start)
		rctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
		resp, err := w.cl.Primary.Put(rctx, w.key(seq), strconv.FormatInt(seq, 10))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("compare: prefill put %s: %w", w.key(seq), err)
		}
		out = append(out, Write{Seq: seq, Key: w.key(seq), Call: call, Return: w.clock.Since(start), Rev: resp.Header.Revision, Acked: true})
	}
	// Shift to the run's clock, which starts now.
	w.base = w.clock.Now()
	shift := w.base.Sub(start)
	for i := range out {
		out[i].Call -= shift
		out[i].Return -= shift
	}
	w.lastAcked.Store(int64(w.cfg.Keys))
	return out, nil
}

// write puts sequence numbers from first on, at cfg.Rate, until ctx ends.
func (w *workload) write(ctx context.Context, first int64) []Write {
	var out []Write
	tick := w.clock.NewTicker(time.Second / time.Duration(w.cfg.Rate))
	defer tick.Stop()
	for seq := first; ; seq++ {
		select {
		case <-ctx.Done():
			return out
		case <-tick.Chan():
		}
		wr := Write{Seq: seq, Key: w.key(seq), Call: w.now()}
		// Not ctx: a put in flight when the run ends must get its answer,
		// or it would count as ambiguous.
		rctx, cancel := context.WithTimeout(context.Background(), w.cfg.RequestTimeout)
		resp, err := w.cl.Primary.Put(rctx, wr.Key, strconv.FormatInt(seq, 10))
		cancel()
		wr.Return = w.now()
		if err == nil {
			wr.Rev, wr.Acked = resp.Header.Revision, true
			w.lastAcked.Store(seq)
		}
		out = append(out, wr)
	}
}

// reader returns how path p reads: the client and the request options.
func (w *workload) reader(p Path) (*clientv3.Client, []clientv3.OpOption, func(context.Context) context.Context) {
	plain := func(ctx context.Context) context.Context { return ctx }
	switch p {
	case PathLeader:
		return w.cl.Primary, nil, plain
	case PathReplicaStrong:
		return w.cl.Replica, nil, plain
	case PathReplicaWeak:
		return w.cl.Replica, []clientv3.OpOption{clientv3.WithSerializable()}, plain
	case PathCascadedStrong:
		return w.cl.Cascaded, nil, plain
	case PathCascadedWeak:
		return w.cl.Cascaded, []clientv3.OpOption{clientv3.WithSerializable()}, plain
	case PathReplicaBounded:
		bound := w.cfg.Bound.String()
		return w.cl.Replica, []clientv3.OpOption{clientv3.WithSerializable()}, func(ctx context.Context) context.Context {
			return metadata.AppendToOutgoingContext(ctx, wire.MaxStalenessKey, bound)
		}
	default: // PathMirror: the destination's own default read
		return w.cl.Mirror, nil, plain
	}
}

// writer returns the client a read-your-writes probe of path p writes
// through: the replica (or the cascaded replica) for its paths (it forwards
// writes), the primary otherwise (a mirror's copy is not for writing).
func (w *workload) writer(p Path) *clientv3.Client {
	switch {
	case p.Cascaded():
		return w.cl.Cascaded
	case p.Replica():
		return w.cl.Replica
	default:
		return w.cl.Primary
	}
}

// read reads the key range through p at cfg.ReadRate until ctx ends.
func (w *workload) read(ctx context.Context, p Path, id int) []Read {
	cli, opts, md := w.reader(p)
	opts = append(opts, clientv3.WithPrefix())
	var out []Read
	// Poisson arrivals: a read at fixed intervals would be in step with
	// the writer's ticks and always see the same moment of its cycle.
	mean := float64(time.Second) / float64(w.cfg.ReadRate)
	next := w.clock.Now()
	timer := w.clock.NewTimer(0)
	defer timer.Stop()
	for {
		next = next.Add(time.Duration(rand.ExpFloat64() * mean))
		if w.clock.Since(next) > time.Second {
			next = w.clock.Now() // after a stall, no burst to catch up
		}
		timer.Reset(max(next.Sub(w.clock.Now()), 0))
		select {
		case <-ctx.Done():
			return out
		case <-timer.Chan():
		}
		rd := Read{Path: p, Reader: id, Call: w.now()}
		var hdr metadata.MD
		rctx, cancel := context.WithTimeout(withHeader(md(context.Background()), &hdr), w.cfg.RequestTimeout)
		resp, err := cli.Get(rctx, w.rangePrefix(), opts...)
		cancel()
		rd.Return = w.now()
		if err == nil {
			rd.Vals, err = w.values(resp)
			rd.Pos = slices.Max(rd.Vals)
			rd.Bound, rd.Reported = reportedBound(hdr)
		}
		if err != nil {
			rd.Err = err.Error()
		}
		out = append(out, rd)
	}
}

// values returns the sequence number each key of the range holds, by key
// index.
func (w *workload) values(resp *clientv3.GetResponse) ([]int64, error) {
	vals := make([]int64, w.cfg.Keys)
	for _, kv := range resp.Kvs {
		i, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), w.rangePrefix()))
		v, verr := strconv.ParseInt(string(kv.Value), 10, 64)
		if err != nil || verr != nil || i < 0 || i >= len(vals) {
			return nil, fmt.Errorf("compare: key %q holds %q, not one of the writer's: is the prefix shared?", kv.Key, kv.Value)
		}
		vals[i] = v
	}
	return vals, nil
}

// probe puts a counter through p's writer and reads it back through p at
// once, every probeInterval, until ctx ends.
func (w *workload) probe(ctx context.Context, p Path) []Probe {
	cli, opts, md := w.reader(p)
	key := w.cfg.Prefix + "ryw/" + string(p)
	var out []Probe
	tick := w.clock.NewTicker(probeInterval)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return out
		case <-tick.Chan():
		}
		val := strconv.Itoa(n)
		pr := Probe{Path: p, Call: w.now()}
		rctx, cancel := context.WithTimeout(md(context.Background()), w.cfg.RequestTimeout)
		_, err := w.writer(p).Put(rctx, key, val)
		var resp *clientv3.GetResponse
		if err == nil {
			resp, err = cli.Get(rctx, key, opts...)
		}
		cancel()
		pr.Return = w.now()
		if err != nil {
			pr.Err = err.Error()
		} else {
			pr.Saw = len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == val
		}
		out = append(out, pr)
	}
}

// run runs the workload for cfg.Duration, then waits up to cfg.Drain for
// both watches to deliver the last acknowledged write. It sends time 0 on
// started (buffered) once the watches are established.
func (w *workload) run(ctx context.Context, started chan<- time.Time) (*History, error) {
	h := &History{Watches: map[string][]Event{}, WatchErrs: map[string]string{}}
	pre, err := w.prefill(ctx)
	if err != nil {
		return nil, err
	}
	h.Prefill = int64(len(pre))
	wctx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	watchers, err := w.startWatches(wctx)
	if err != nil {
		return nil, err
	}

	w.base = w.clock.Now()
	started <- w.base
	runCtx, cancel := clockwork.WithDeadline(ctx, w.clock, w.base.Add(w.cfg.Duration))
	defer cancel()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		writes []Write
	)
	wg.Go(func() {
		ws := w.write(runCtx, h.Prefill+1)
		mu.Lock()
		writes = ws
		mu.Unlock()
	})
	h.Paths = w.cl.paths()
	for _, p := range h.Paths {
		for id := range w.cfg.Readers {
			wg.Go(func() {
				rs := w.read(runCtx, p, id)
				mu.Lock()
				h.Reads = append(h.Reads, rs...)
				mu.Unlock()
			})
		}
		wg.Go(func() {
			ps := w.probe(runCtx, p)
			mu.Lock()
			h.Probes = append(h.Probes, ps...)
			mu.Unlock()
		})
	}
	wg.Wait()
	h.Elapsed = w.now()
	h.Writes = append(pre, writes...)

	if err := w.drain(ctx, watchers); err != nil {
		return nil, err
	}
	stopWatches()
	collectWatches(h, watchers)
	return h, nil
}
