package learner

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/membership"
)

// ErrPeerURLUnreachable means a learner's advertised peer URL does not lead
// to it. A learner dials the leader itself, so it catches up and looks
// healthy regardless; but the leader sends snapshots to the advertised URL,
// so such a learner breaks at the first snapshot. Better to fail at join.
var ErrPeerURLUnreachable = errors.New("learner: advertised peer URL does not reach this member")

// ProbePeerURL checks that url serves the peer API of a member of cluster
// (an etcd member answers GET /members with its cluster ID in a header;
// membership.PeerAnswers asks, as a standby asks a voter's). It retries
// until ctx ends, since the listener may still be starting.
// tlsCfg, for https peer URLs, is the member's peer TLS as a client.
func ProbePeerURL(ctx context.Context, clock clockwork.Clock, url, cluster string, tlsCfg *tls.Config) error {
	return probePeerURL(ctx, clock, url, cluster, tlsCfg)
}

// probePeerURL is ProbePeerURL with its waits on clock.
func probePeerURL(ctx context.Context, clock clockwork.Clock, url, cluster string, tlsCfg *tls.Config) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	defer client.CloseIdleConnections() // the transport is ours: keep no connection to the peer open
	var last error
	for {
		last = membership.PeerAnswers(ctx, client, url, cluster)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s: %v", ErrPeerURLUnreachable, url, last)
		case <-clock.After(peerProbeRetry):
		}
	}
}

// peerProbeRetry is the wait between ProbePeerURL's tries.
const peerProbeRetry = 200 * time.Millisecond

// Cluster is the cluster the --join URLs reach: its ID and members.
type Cluster struct {
	ID      uint64
	Members []*etcdserverpb.Member
}

// ProbeJoin asks join for the member list, from any member and without a
// leader (a serializable list), within the time ctx allows, and returns the
// cluster that answered. The caller has probed join first (conn's
// Flags.Probe, which names each URL and why it does not answer as etcd);
// a list that fails after that is ErrJoinNotEtcd, with the error.
func ProbeJoin(ctx context.Context, m membership.Cluster, join []string) (Cluster, error) {
	resp, err := m.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return Cluster{}, fmt.Errorf("%w: --join %s answered etcd's Status, but not MemberList: %v", ErrJoinNotEtcd, joinList(join), err)
	}
	if resp.Header == nil || resp.Header.ClusterId == 0 {
		return Cluster{}, fmt.Errorf("%w: --join %s answered MemberList without a cluster ID", ErrJoinNotEtcd, joinList(join))
	}
	return Cluster{ID: resp.Header.ClusterId, Members: resp.Members}, nil
}
