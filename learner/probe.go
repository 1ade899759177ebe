package learner

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrPeerURLUnreachable means a learner's advertised peer URL does not lead
// to it. A learner dials the leader itself, so it catches up and looks
// healthy regardless; but the leader sends snapshots to the advertised URL,
// so such a learner breaks at the first snapshot. Better to fail at join.
var ErrPeerURLUnreachable = errors.New("learner: advertised peer URL does not reach this member")

// ProbePeerURL checks that url serves the peer API of a member of cluster
// (an etcd member answers GET /members with its cluster ID in a header). It
// retries until ctx ends, since the listener may still be starting.
// tlsCfg, for https peer URLs, is the member's peer TLS as a client.
func ProbePeerURL(ctx context.Context, url, cluster string, tlsCfg *tls.Config) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	var last error
	for {
		last = probeOnce(ctx, client, url, cluster)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s: %v", ErrPeerURLUnreachable, url, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func probeOnce(ctx context.Context, client *http.Client, url, cluster string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/members", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Etcd-Cluster-ID"); got != cluster {
		return fmt.Errorf("answered by cluster %q, not this cluster %q (another process on that address?)", got, cluster)
	}
	return nil
}

// Cluster is the cluster the --join URLs reach: its ID and members.
type Cluster struct {
	ID      uint64
	Members []*etcdserverpb.Member
}

// ProbeJoin asks join for the member list, from any member and without a
// leader (a serializable list), within the time ctx allows, and returns the
// cluster that answered. Where no etcd answers (a web server, nothing, a
// process that accepts and never answers) it fails when ctx ends, naming
// --join, rather than a join that waits out --join-timeout.
func ProbeJoin(ctx context.Context, m Membership, join []string) (Cluster, error) {
	resp, err := m.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return Cluster{}, fmt.Errorf("%w: no etcd member answered MemberList on --join %s: %v; give the client URLs of the cluster's members (etcd's --advertise-client-urls)",
			ErrJoinNotEtcd, joinList(join), err)
	}
	if resp.Header == nil || resp.Header.ClusterId == 0 {
		return Cluster{}, fmt.Errorf("%w: --join %s answered MemberList without a cluster ID", ErrJoinNotEtcd, joinList(join))
	}
	return Cluster{ID: resp.Header.ClusterId, Members: resp.Members}, nil
}
