package cascade

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/understudy-kv/understudy/logging"
)

// localStartTimeout bounds the local member's start.
const localStartTimeout = time.Minute

// Local members' limits: a source revision is one local transaction, of as
// many bytes as it changed (a DeleteRange of a whole prefix is one
// revision), and the store holds what the source holds.
const (
	localMaxRequestBytes = 1 << 30
	localQuotaBytes      = 1 << 34
)

// startLocal starts the restored single-member etcd in dir: no client
// listener (the front serves it, in-process), no fsync (the copy is rebuilt
// from an upstream, never recovered), and alarms the source had raised
// cleared (the local store is not the one over its quota).
func startLocal(ctx context.Context, clock clockwork.Clock, dir, token string, cfg Config) (*embed.Etcd, error) {
	name := cfg.Name
	ec := embed.NewConfig()
	ec.Name, ec.Dir = name, dir
	u, _ := url.Parse(localPeerURL)
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*u}, []url.URL{*u}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = nil, nil
	ec.ListenMetricsUrls = nil
	ec.InitialCluster = name + "=" + localPeerURL
	ec.InitialClusterToken = token
	ec.ClusterState = embed.ClusterStateFlagNew
	ec.UnsafeNoFsync = true
	// The front's handlers check clients against MaxTxnOps and
	// MaxConcurrentStreams; the Applier calls the server, which checks
	// neither, and raft's request size, localMaxRequestBytes.
	if cfg.MaxTxnOps > 0 {
		ec.MaxTxnOps = cfg.MaxTxnOps
	}
	if cfg.MaxConcurrentStreams > 0 {
		ec.MaxConcurrentStreams = cfg.MaxConcurrentStreams
	}
	ec.MaxRequestBytes = localMaxRequestBytes
	ec.QuotaBackendBytes = localQuotaBytes
	ec.EnableGRPCGateway = false
	ec.LogLevel = "warn"
	ec.LogOutputs = []string{"stderr"}
	if len(cfg.LogOutputs) > 0 {
		ec.LogOutputs = cfg.LogOutputs
	}
	logging.Member(ec, logging.Store)
	// The front serves watches from this member's watch server: its
	// progress notifications are the replica's.
	if cfg.WatchProgressNotifyInterval > 0 {
		ec.WatchProgressNotifyInterval = cfg.WatchProgressNotifyInterval
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("cascade: starting the local store: %w", err)
	}
	t := clock.NewTimer(localStartTimeout)
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("cascade: the local store: %w", err)
	case <-t.Chan():
		e.Close()
		return nil, fmt.Errorf("cascade: the local store did not start within %v", localStartTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	if err := clearAlarms(ctx, e); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// clearAlarms deactivates the alarms the snapshot brought (the source's
// members'): a NOSPACE alarm would refuse the Applier's writes here.
func clearAlarms(ctx context.Context, e *embed.Etcd) error {
	for _, a := range e.Server.Alarms() {
		_, err := e.Server.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, MemberID: a.MemberID, Alarm: a.Alarm})
		if err != nil {
			return fmt.Errorf("cascade: clearing the source's %v alarm in the local store: %w", a.Alarm, err)
		}
	}
	return nil
}
