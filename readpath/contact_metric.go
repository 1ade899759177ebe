package readpath

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.etcd.io/etcd/client/pkg/v3/types"

	"github.com/understudy-kv/understudy/readindex"
)

// peerReceivedBytes is etcd's count of raft bytes a member has received,
// labelled by the sending member (rafthttp: every message of the stream and
// pipeline transports, heartbeats included).
const peerReceivedBytes = "etcd_network_peer_received_bytes_total"

// metricContact is the ContactSource of a replica: the raft bytes its
// member's transport received from a member, read from etcd's own metric by
// name in g (prometheus.DefaultGatherer, where rafthttp registers it in its
// init).
//
// Why a metric looked up by name: etcd v3.7.3 exposes traffic from a peer
// nowhere else that a replica can reach (checked in
// go.etcd.io/etcd/server/v3@v3.7.3 and go.etcd.io/raft/v3):
//   - rafthttp.Transport.ActiveSince(id) is on the member's transport,
//     EtcdServer.r.transport, an unexported field of an unexported type;
//     EtcdServer exports RaftHandler (the transport's incoming handler),
//     not the transport. ActiveSince is also when the connection came up,
//     not when a message last came: a link that goes silent stays active
//     until rafthttp's read timeout (--raft-read-timeout, 5 s by default).
//   - raft: EtcdServer exports Lead, Term, CommittedIndex and AppliedIndex;
//     a learner never campaigns, so Lead keeps naming a leader it no longer
//     hears, and an idle cluster's heartbeats move no index. raft.Status
//     (also the expvar "raft.status", a global looked up by name too) has
//     no time of the last message on a follower: electionElapsed is
//     unexported.
//   - EtcdServer's v2 stats count received appends (RecvAppendReq) but not
//     heartbeats, in an unexported field.
//   - embed: StartEtcd builds the transport and serves the peer listeners
//     itself (servePeers, etcdhttp.NewPeerHandler(e.Server)); embed.Config
//     has no hook for either.
//
// If etcd exports the transport's activity, this file is what changes.
type metricContact struct{ g prometheus.Gatherer }

var _ readindex.ContactSource = metricContact{}

// ReceivedFrom is the raft bytes received from member id; 0 if the metric
// or its series is missing.
func (c metricContact) ReceivedFrom(id uint64) float64 {
	from := types.ID(id).String()
	mfs, err := c.g.Gather()
	if err != nil && len(mfs) == 0 {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() != peerReceivedBytes {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelIs(m, "From", from) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func labelIs(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}
