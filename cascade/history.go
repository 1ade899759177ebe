package cascade

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"
)

// A cascaded replica knows which history it holds: the source cluster's ID,
// and what its store holds at its revision. Every answer it takes from an
// upstream is checked against them:
//   - every answer's cluster ID (a watch response, a proof, a probe): another
//     cluster ID is another history (the source restored with a new cluster
//     token, or another cluster at the same URL);
//   - a proof (a linearizable revision) below the store's revision as it was
//     when the proof was asked: every revision the store holds was committed
//     at the source before, so a linearizable read of the same history
//     answers at or past it; one below is another history (the source
//     restored from a backup behind the store, its cluster ID kept, as etcd's
//     disaster-recovery example and a cold copy of the data dirs keep it);
//   - before a watch is followed from the store's revision n (verify): an
//     upstream at or past n holds n's changes as the store does (the
//     fingerprint: the keys revision n wrote, read there at n); one behind n
//     proves, with a linearizable read, that it reaches n, or holds another
//     history.
// Another history is never served: the store is fenced at once (reads and
// watches refused, saying why) and bootstrapped again.

// ErrOtherHistory means an upstream holds another history than the store.
var ErrOtherHistory = errors.New("cascade: the upstream holds another history than this replica's store")

// historyError names both histories.
type historyError struct {
	upstream  string
	how       string // what told it
	upCluster uint64
	upRev     int64
	cluster   uint64
	rev       int64
	detail    string
}

func (e *historyError) Error() string {
	s := fmt.Sprintf("cascade: --upstream %s holds another history than this replica's store (%s: cluster %x at revision %d there, cluster %x at revision %d here",
		e.upstream, e.how, e.upCluster, e.upRev, e.cluster, e.rev)
	if e.detail != "" {
		s += "; " + e.detail
	}
	return s + "): the source cluster was restored from a backup, or is another cluster; the store is not served and is bootstrapped again"
}

func (e *historyError) Unwrap() error { return ErrOtherHistory }

// maxFingerprint bounds the keys checked at an upstream.
const maxFingerprint = 8

// fingerprint is what the store holds at revision rev: the keys it put
// last (newest first, at most maxFingerprint, each as it is at rev). Puts,
// not deletes: a key absent at rev is what another history most likely
// holds too (a key created after its backup). An upstream of the same
// history holds each exactly (value, create and mod revision, version,
// lease) at rev.
type fingerprint struct {
	rev int64
	kvs []*mvccpb.KeyValue
}

// next is the fingerprint after a revision's events: its puts first, the
// keys it deleted out.
func (fp fingerprint) next(rev int64, evs []*mvccpb.Event) fingerprint {
	out := fingerprint{rev: rev}
	seen := map[string]bool{}
	for i := len(evs) - 1; i >= 0 && len(out.kvs) < maxFingerprint; i-- {
		k := string(evs[i].Kv.Key)
		if seen[k] {
			continue
		}
		seen[k] = true
		if evs[i].Type == mvccpb.PUT {
			out.kvs = append(out.kvs, evs[i].Kv)
		}
	}
	for _, kv := range fp.kvs {
		if len(out.kvs) == maxFingerprint {
			break
		}
		if !seen[string(kv.Key)] {
			seen[string(kv.Key)] = true
			out.kvs = append(out.kvs, kv)
		}
	}
	return out
}

// localFingerprint reads, in the local store at its revision, the keys put
// last (a restored store: the Applier has seen none of its revisions): the
// keys and their mod revisions from the index (no value read), then the
// newest maxFingerprint of them whole.
func localFingerprint(kv mvcc.KV) (fingerprint, error) {
	rev := kv.Rev()
	fp := fingerprint{rev: rev}
	const page = 10000
	// From the first key to the end: mvcc's "from key" range end is empty
	// (etcd's gRPC "\x00" becomes it), not "\x00".
	key, end := []byte{0}, []byte{}
	var newest []*mvccpb.KeyValue // the newest by mod revision, at most maxFingerprint
	for {
		r, err := kv.Range(context.Background(), key, end, mvcc.RangeOptions{Rev: rev, Limit: page, FastKeysOnly: true})
		if err != nil {
			return fp, fmt.Errorf("cascade: reading the store's keys at its revision %d: %w", rev, err)
		}
		for _, k := range r.KVs {
			newest = append(newest, k)
			slices.SortFunc(newest, func(a, b *mvccpb.KeyValue) int { return cmp.Compare(b.ModRevision, a.ModRevision) })
			newest = newest[:min(len(newest), maxFingerprint)]
		}
		if len(r.KVs) < page {
			break
		}
		key = append(append([]byte{}, r.KVs[len(r.KVs)-1].Key...), 0)
	}
	for _, k := range newest {
		r, err := kv.Range(context.Background(), k.Key, nil, mvcc.RangeOptions{Rev: rev})
		if err != nil || len(r.KVs) != 1 {
			return fp, fmt.Errorf("cascade: reading %q at the store's revision %d: %d keys, %v", k.Key, rev, len(r.KVs), err)
		}
		fp.kvs = append(fp.kvs, r.KVs[0])
	}
	return fp, nil
}

// checkHeader checks an upstream's answer: the source cluster's, and (if
// proof) not below the revision the store held when it was asked (atAsk).
// Anything else is another history: the store is fenced.
func (s *Store) checkHeader(u string, how string, h *pb.ResponseHeader, atAsk int64, proof bool) error {
	var detail string
	switch {
	case h == nil:
		return nil
	case h.ClusterId != 0 && h.ClusterId != s.cluster:
		detail = "another cluster ID"
	case proof && h.Revision < atAsk:
		detail = "a linearizable revision below the store's: the store's every revision was committed before the read was asked, so one history answers at or past it"
	default:
		return nil
	}
	return s.fence(&historyError{upstream: u, how: how, upCluster: h.ClusterId, upRev: h.Revision, cluster: s.cluster, rev: atAsk, detail: detail})
}

// CheckWrite checks the answer of a write the front forwarded when the
// store was at revision atForward: the source's cluster, and a revision at
// or past atForward (the write's own, or the source's current one if it
// changed nothing), which one history always answers with; else the store
// is fenced, and the caller is told (the write was applied, elsewhere).
func (s *Store) CheckWrite(atForward int64, h *pb.ResponseHeader) error {
	return s.checkHeader(strings.Join(s.cfg.Upstreams, ","), "a forwarded write's answer", h, atForward, true)
}

// verify checks that u holds the store's revision n as the store does,
// before its watch is followed from n+1: errLost if it does not answer in
// time, errCompactedHere if it compacted past n, another history (fenced)
// if it does not hold n as the store does.
func (s *Store) verify(ctx context.Context, u *upstream, fp fingerprint) error {
	n := fp.rev
	ctx, cancel := context.WithTimeout(background(ctx), s.cfg.UpstreamTimeout)
	defer cancel()
	resp, err := u.cli.Get(ctx, probeKey, clientv3.WithSerializable(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("%w: %s: no answer within %v: %v", errLost, u.url, s.cfg.UpstreamTimeout, err)
	}
	if err := s.checkHeader(u.url, "its revision", resp.Header, n, false); err != nil {
		return err
	}
	if resp.Header.Revision < n {
		// Behind the store: a lagging upstream reaches n, another history
		// has not committed it.
		lin, err := u.cli.Get(ctx, probeKey, clientv3.WithCountOnly())
		if err != nil {
			return fmt.Errorf("%w: %s is at revision %d, behind the store's %d, and gave no linearizable revision within %v: %v",
				errLost, u.url, resp.Header.Revision, n, s.cfg.UpstreamTimeout, err)
		}
		if err := s.checkHeader(u.url, "a linearizable read before following it", lin.Header, n, true); err != nil {
			return err
		}
	}
	if len(fp.kvs) == 0 {
		// Nothing to compare (an empty store): whether it still reads at
		// n, at least.
		_, err := u.cli.Get(ctx, probeKey, clientv3.WithRev(n), clientv3.WithSerializable(), clientv3.WithCountOnly())
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			return fmt.Errorf("%w: %s compacted past the store's revision %d", errCompactedHere, u.url, n)
		case err != nil:
			return fmt.Errorf("%w: %s: reading at revision %d: %v", errLost, u.url, n, err)
		}
	}
	for _, here := range fp.kvs {
		r, err := u.cli.Get(ctx, string(here.Key), clientv3.WithRev(n), clientv3.WithSerializable())
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			return fmt.Errorf("%w: %s compacted past the store's revision %d", errCompactedHere, u.url, n)
		case errors.Is(err, rpctypes.ErrFutureRev):
			return fmt.Errorf("%w: %s has not applied revision %d yet", errLost, u.url, n)
		case err != nil:
			return fmt.Errorf("%w: %s: reading %q at revision %d: %v", errLost, u.url, here.Key, n, err)
		}
		if err := s.checkHeader(u.url, "a read at the store's revision", r.Header, n, false); err != nil {
			return err
		}
		var there []*mvccpb.KeyValue
		if len(r.Kvs) > 0 {
			there = []*mvccpb.KeyValue{(*mvccpb.KeyValue)(r.Kvs[0])}
		}
		if len(there) != 1 || !sameKV(there[0], here) {
			return s.fence(&historyError{upstream: u.url, how: "a read at the store's revision", upCluster: r.Header.ClusterId, upRev: r.Header.Revision,
				cluster: s.cluster, rev: n, detail: fmt.Sprintf("%q at revision %d is %s there, %s here", here.Key, n, describe(there), describe([]*mvccpb.KeyValue{here}))})
		}
	}
	return nil
}

// fence stops the store from being served, for good: every read and watch
// is refused with err (Fenced, Fence), strong reads waiting are woken, and
// Run returns err so that the store is built again. The first fence wins;
// it returns the store's fence.
func (s *Store) fence(err error) error {
	s.fenceOnce.Do(func() {
		s.fenceCancel(err)
		var h *historyError
		switch {
		case errors.As(err, &h):
			s.m.historyChanges.Inc()
			s.lg.Warn("an upstream holds another history than the store; stopped serving it, bootstrapping again",
				zap.String("upstream", h.upstream), zap.String("seen-in", h.how),
				zap.String("upstream-cluster", fmt.Sprintf("%x", h.upCluster)), zap.Int64("upstream-revision", h.upRev),
				zap.String("store-cluster", fmt.Sprintf("%x", h.cluster)), zap.Int64("store-revision", h.rev), zap.String("detail", h.detail))
		case errors.Is(err, errClosed):
		default:
			s.lg.Warn("stopped serving the store; bootstrapping again", zap.Error(err))
		}
	})
	return s.Fenced()
}

// errClosed fences a store that was closed.
var errClosed = errors.New("cascade: the store is closed")

// Fenced is nil while the store may be served, else why it may not (it
// will not again: the replica bootstraps a new one).
func (s *Store) Fenced() error {
	if s.fenceCtx.Err() == nil {
		return nil
	}
	return context.Cause(s.fenceCtx)
}

// Fence is a context cancelled, with the reason as its cause, once the
// store must not be served (Fenced).
func (s *Store) Fence() context.Context { return s.fenceCtx }
