package balancer

import (
	"context"
	"errors"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/understudy-kv/understudy/wire"
)

// probeKey is what health probes count: any key would do, since a probe
// is about freshness, not data; this one sorts first and is never written.
const probeKey = "\x00understudy/probe"

// probe reads from every replica with the staleness bound: a replica that
// answers is healthy (and tells its zone); one that is down, cannot prove
// itself fresh within the bound, or refuses is ejected until it answers.
// While reads use budgets tighter than the bound, each replica is first
// asked for the tightest of them (probeReplica).
func (b *Balancer) probe(ctx context.Context) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	healthy := 0
	// 0 if none: boundedRead records only budgets under MaxStaleness, and
	// none under VotersOnly.
	tight, _ := b.budgets.tightest(b.clock.Now())
	for _, m := range b.view.learners() {
		conn, err := b.conn(m.ep.url)
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			hdr, err := b.probeReplica(ctx, conn, m.ep, tight)
			if err == nil {
				m.ep.learn(hdr.md, hdr.start)
			}
			if err != nil && !answered(err) {
				if ctx.Err() == nil {
					b.eject(m.ep, "probe", err)
				}
				return
			}
			if m.ep.ejected.CompareAndSwap(true, false) {
				b.lg.Info("balancer: replica back in the read rotation", zap.String("endpoint", m.ep.url))
			}
			if z := hdr.md.Get(wire.ZoneKey); len(z) > 0 {
				b.view.setZone(m.ep.addr, z[0])
			}
			mu.Lock()
			healthy++
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.m.replicas.Set(float64(healthy))
}

// probeAnswer is a probe's answer header and when the probe was sent.
type probeAnswer struct {
	md    metadata.MD
	start time.Time
}

// probeReplica probes one replica within ProbeTimeout: first, if tight is
// more than 0, with that bound (the tightest budget reads used lately), in
// half that time. A replica asked for it keeps its rounds at the full rate
// (a looser bound its idle rounds serve), so that the bound it reports
// lets the picker route those reads to it. Failing the tight bound says
// nothing of health (a replica far from the voters may never prove it):
// the answer then comes from a probe with MaxStaleness, as when no read
// used a budget, and the replica is not asked for a tight bound again for
// tightRetry probe intervals (each try would cost the probe round half its
// time, and hold that replica at the full rate for reads it never gets).
func (b *Balancer) probeReplica(ctx context.Context, conn *grpc.ClientConn, ep *endpoint, tight time.Duration) (probeAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ProbeTimeout)
	defer cancel()
	once := func(bound, timeout time.Duration) (probeAnswer, error) {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		pctx = metadata.AppendToOutgoingContext(pctx, wire.MaxStalenessKey, bound.String(), wire.ProbeKey, "1")
		a := probeAnswer{start: b.clock.Now()}
		_, err := pb.NewKVClient(conn).Range(pctx, &pb.RangeRequest{Key: []byte(probeKey), Serializable: true, CountOnly: true}, grpc.Header(&a.md))
		return a, err
	}
	now := b.clock.Now()
	if tight > 0 && now.Sub(time.Unix(0, ep.tightFailed.Load())) >= tightRetry*b.cfg.ProbeInterval {
		a, err := once(tight, b.cfg.ProbeTimeout/2)
		if err == nil {
			return a, nil
		}
		ep.tightFailed.Store(now.UnixNano())
	}
	return once(b.cfg.MaxStaleness, b.cfg.ProbeTimeout)
}

// answered reports an error that only a live, fresh replica gives: the
// probe passed the freshness check and was refused on other grounds.
func answered(err error) bool {
	switch status.Code(err) {
	case codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return errors.Is(err, rpctypes.ErrGRPCPermissionDenied)
}

// eject takes a replica out of the read rotation, for reason (a failed
// probe, or a read the replica refused as a learner), counting and logging
// only the first ejection: a probe it answers brings it back.
func (b *Balancer) eject(ep *endpoint, reason string, err error) {
	if ep.ejected.CompareAndSwap(false, true) {
		b.m.ejections.WithLabelValues(ep.url, reason).Inc()
		b.lg.Warn("balancer: replica out of the read rotation", zap.String("endpoint", ep.url), zap.String("reason", reason), zap.Error(err))
	}
}
