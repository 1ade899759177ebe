package learner

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
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
// cluster that answered. Where no etcd answers (a web server, nothing, a
// process that accepts and never answers) it fails when ctx ends, naming
// --join and what each URL answers to GET /version (hc, with the client
// TLS), rather than a join that waits out --join-timeout.
func ProbeJoin(ctx context.Context, m Membership, hc *http.Client, join []string) (Cluster, error) {
	resp, err := m.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return Cluster{}, fmt.Errorf("%w: no etcd member answered MemberList on --join %s (%v): %s; give the client URLs of the cluster's members (etcd's --advertise-client-urls)",
			ErrJoinNotEtcd, joinList(join), err, diagnose(context.WithoutCancel(ctx), hc, join))
	}
	if resp.Header == nil || resp.Header.ClusterId == 0 {
		return Cluster{}, fmt.Errorf("%w: --join %s answered MemberList without a cluster ID", ErrJoinNotEtcd, joinList(join))
	}
	return Cluster{ID: resp.Header.ClusterId, Members: resp.Members}, nil
}

// diagnose says, for each URL, what answers GET /version there (every etcd
// member serves it on its client URLs), all within a second and a half.
func diagnose(ctx context.Context, hc *http.Client, urls []string) string {
	ctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	out := make([]string, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() { out[i] = u + " " + versionAnswer(ctx, hc, u) })
	}
	wg.Wait()
	return strings.Join(out, "; ")
}

func versionAnswer(ctx context.Context, hc *http.Client, u string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/version", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Sprintf("does not answer GET /version: %v", err)
	}
	defer resp.Body.Close()
	var v struct {
		Server  string `json:"etcdserver"`
		Cluster string `json:"etcdcluster"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&v) != nil || v.Server == "" {
		return fmt.Sprintf("answers GET /version with %s and not etcd's version: not an etcd client URL", resp.Status)
	}
	return fmt.Sprintf("is etcd %s but did not list members in time (no leader? TLS or credentials?)", v.Server)
}
