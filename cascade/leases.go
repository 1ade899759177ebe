package cascade

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// collectLeases revokes here the leases that hold no key here and that
// the source no longer has (its LeaseTimeToLive says TTL -1): a lease the
// source revoked or let expire deleted its keys in a source revision,
// applied here, but the local lease stays until collected. A lease with no
// key makes no revision when revoked; one that did would be a divergence.
// It asks the upstream about keyless leases only (a learner upstream asks
// its leader: one request per such lease per LeaseGCInterval).
func (s *Store) collectLeases(ctx context.Context, a *applier, u *upstream) error {
	srv := s.e.Server
	ls, err := srv.LeaseLeases(ctx, &pb.LeaseLeasesRequest{})
	if err != nil {
		return err
	}
	for _, l := range ls.Leases {
		ttl, err := srv.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: l.ID, Keys: true})
		if err != nil || len(ttl.Keys) > 0 {
			continue
		}
		uctx, cancel := context.WithTimeout(background(ctx), s.cfg.UpstreamTimeout)
		up, err := u.cli.TimeToLive(uctx, clientv3.LeaseID(l.ID))
		cancel()
		if err != nil {
			return fmt.Errorf("cascade: lease %x at the upstream: %w", l.ID, err)
		}
		if up.TTL != -1 {
			continue
		}
		before := a.rev()
		if _, err := srv.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: l.ID}); err != nil {
			return fmt.Errorf("cascade: revoking lease %x here: %w", l.ID, err)
		}
		delete(a.leases, l.ID)
		if after := a.rev(); after != before {
			return fmt.Errorf("%w: revoking lease %x, which held no key here, made revision %d", ErrDiverged, l.ID, after)
		}
		s.lg.Debug("revoked a lease the source no longer has", zap.String("lease", fmt.Sprintf("%x", l.ID)))
	}
	return nil
}
