package cascade

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/naming/endpoints"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/backoff"
)

// A cascaded replica is no member: a client that discovers replicas from
// the member list (the balancer, a naming resolver) does not find it. So
// while a store is served, the replica announces itself in the source
// cluster, as grpc-proxy does (--resolver-prefix): a key under a prefix, in
// the format of etcd's naming package (endpoints.Manager: target/name ->
// {"Addr": client URL, "Metadata": …}), on a lease of TTL seconds kept
// alive through its upstream; gone when the replica stops (revoked), when
// its store is fenced (revoked: it serves none), or when it dies (the
// lease expires).

// Announcement says where and as what a replica announces itself.
type Announcement struct {
	// Target is the key prefix, without the trailing "/" (the naming
	// package's target: etcd:///Target for gRPC's etcd resolver).
	Target string
	// Name is the replica's --name: its key is Target/Name.
	Name string
	// URL is the client URL clients dial; Zone its --zone.
	URL, Zone string
	// TTL is the lease's: a dead replica's announcement is gone within it.
	TTL time.Duration
}

// AnnouncementMeta is an announcement's Metadata.
type AnnouncementMeta struct {
	Name string `json:"name"`
	Zone string `json:"zone,omitempty"`
	Kind string `json:"kind"`
}

// Announce keeps a announced until ctx ends or the store is fenced, and
// then revokes it. It is tried again, with a growing wait, while the
// source refuses it (the replica's --user may not write there) or no
// upstream answers; it returns nil when it ends.
func (s *Store) Announce(ctx context.Context, a Announcement) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.fenceCtx, cancel)
	defer stop()
	em, err := endpoints.NewManager(s.all, a.Target)
	if err != nil {
		return fmt.Errorf("cascade: announcing under %q: %w", a.Target, err)
	}
	retry := backoff.Exponential{Initial: time.Second, Max: 30 * time.Second}
	var warned time.Time
	for ctx.Err() == nil {
		err := s.announceOnce(ctx, em, a)
		if ctx.Err() != nil {
			return nil
		}
		if now := s.clock.Now(); now.Sub(warned) >= stallLogEvery {
			warned = now
			s.lg.Warn("announcing this replica failed; trying again", zap.String("key", a.Target+"/"+a.Name), zap.Error(err))
		}
		if backoff.Wait(ctx, s.clock, retry.Next()) != nil {
			return nil
		}
	}
	return nil
}

// announceOnce announces a on a new lease and keeps it alive until ctx
// ends (then revokes it: nil) or the lease is lost (an error).
func (s *Store) announceOnce(ctx context.Context, em endpoints.Manager, a Announcement) error {
	gctx, gcancel := context.WithTimeout(ctx, s.cfg.UpstreamTimeout)
	lease, err := s.all.Grant(gctx, max(int64(a.TTL/time.Second), 1))
	if err == nil {
		err = em.AddEndpoint(gctx, a.Target+"/"+a.Name, endpoints.Endpoint{Addr: a.URL,
			Metadata: AnnouncementMeta{Name: a.Name, Zone: a.Zone, Kind: "cascaded"}}, clientv3.WithLease(lease.ID))
	}
	gcancel()
	if err != nil {
		return err
	}
	defer func() {
		// Gone at once, not at the lease's end: no client is sent here.
		rctx, rcancel := context.WithTimeout(context.Background(), s.cfg.UpstreamTimeout)
		_, _ = s.all.Revoke(rctx, lease.ID)
		rcancel()
	}()
	alive, err := s.all.KeepAlive(ctx, lease.ID)
	if err != nil {
		return err
	}
	s.lg.Info("announced this replica", zap.String("key", a.Target+"/"+a.Name), zap.String("url", a.URL), zap.Duration("ttl", a.TTL))
	for range alive {
	}
	if ctx.Err() != nil {
		return nil
	}
	return errors.New("the announcement's lease was lost")
}
