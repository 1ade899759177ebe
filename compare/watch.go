package compare

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// watcher is one watch of the key range; events and err are complete once
// done is closed.
type watcher struct {
	events []Event
	err    string
	last   atomic.Int64 // highest sequence number seen
	done   chan struct{}
}

// watch watches the key range on cli from its current revision on, and
// returns once the watch is established.
func (w *workload) watch(ctx context.Context, cli *clientv3.Client, name string) (*watcher, error) {
	wt := &watcher{done: make(chan struct{})}
	// Not WithRequireLeader: a replica cut off from its leader ends such
	// streams, and this watch must stall and resume instead.
	wch := cli.Watch(ctx, w.rangePrefix(), clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	created := make(chan error, 1)
	go func() {
		defer close(wt.done)
		first := true
		for resp := range wch {
			if first {
				first = false
				created <- resp.Err()
			}
			if err := resp.Err(); err != nil {
				if ctx.Err() == nil {
					wt.err = err.Error()
				}
				continue
			}
			at := w.now()
			for _, ev := range resp.Events {
				if ev.Type != clientv3.EventTypePut {
					continue
				}
				seq, err := strconv.ParseInt(string(ev.Kv.Value), 10, 64)
				if err != nil {
					wt.err = fmt.Sprintf("key %q holds %q, not a sequence number", ev.Kv.Key, ev.Kv.Value)
					continue
				}
				wt.events = append(wt.events, Event{Seq: seq, Rev: ev.Kv.ModRevision, At: at})
				if seq > wt.last.Load() {
					wt.last.Store(seq)
				}
			}
		}
		if first {
			created <- errors.New("watch closed before it was created")
		}
	}()
	select {
	case err := <-created:
		if err != nil {
			return nil, fmt.Errorf("compare: watch %s: %w", name, err)
		}
	case <-w.clock.After(w.cfg.RequestTimeout):
		return nil, fmt.Errorf("compare: watch %s: not created within %v", name, w.cfg.RequestTimeout)
	}
	return wt, nil
}

// startWatches establishes a watch of the key range on every cluster that
// replicates it (the replica, the mirror, and the cascaded replica if there
// is one), all ending with ctx. It fails on the first watch that cannot be
// established: a run whose watches are missing could not judge delivery.
func (w *workload) startWatches(ctx context.Context) (map[string]*watcher, error) {
	watchers := map[string]*watcher{}
	watched := map[string]*clientv3.Client{"replica": w.cl.Replica, "mirror": w.cl.Mirror}
	if w.cl.Cascaded != nil {
		watched["cascaded"] = w.cl.Cascaded
	}
	for name, cli := range watched {
		wt, err := w.watch(ctx, cli, name)
		if err != nil {
			return nil, err
		}
		watchers[name] = wt
	}
	return watchers, nil
}

// drain waits until every watch has delivered the last acknowledged write,
// or the drain deadline passes (what is missing then counts as lost).
func (w *workload) drain(ctx context.Context, watchers map[string]*watcher) error {
	last := w.lastAcked.Load()
	deadline := w.clock.NewTimer(w.cfg.Drain)
	defer deadline.Stop()
	poll := w.clock.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		drained := true
		for _, wt := range watchers {
			drained = drained && wt.last.Load() >= last
		}
		if drained {
			return nil
		}
		select {
		case <-deadline.Chan():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-poll.Chan():
		}
	}
}

// collectWatches waits for every watcher to stop (its watch's context must
// have ended) and records in h what each delivered and, if it failed, why:
// only then are a watcher's events complete.
func collectWatches(h *History, watchers map[string]*watcher) {
	for name, wt := range watchers {
		<-wt.done
		h.Watches[name] = wt.events
		if wt.err != "" {
			h.WatchErrs[name] = wt.err
		}
	}
}
