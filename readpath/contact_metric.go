package readpath

import (
	"errors"

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
// The counter is read from its own collector: registering a twin of it on
// the registry that holds it hands back etcd's (prometheus's
// AlreadyRegisteredError), so that a sample reads one vector, not the
// whole registry (leader contact is sampled every quarter of an election
// timeout). A registry without it, or one whose help text differs (another
// etcd version), is gathered instead.
//
// If etcd exports the transport's activity, this file is what changes.
type metricContact struct {
	// vec is etcd's counter, found on g; nil: gather g.
	vec prometheus.Collector
	g   prometheus.Gatherer
}

var _ readindex.ContactSource = metricContact{}

// newMetricContact finds etcd's counter on g.
func newMetricContact(g prometheus.Gatherer) metricContact {
	c := metricContact{g: g}
	reg, ok := g.(prometheus.Registerer)
	if !ok {
		return c
	}
	twin := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "etcd", Subsystem: "network", Name: "peer_received_bytes_total",
		Help: "The total number of bytes received from peers.", // rafthttp's, v3.7.3
	}, []string{"From"})
	err := reg.Register(twin)
	var are prometheus.AlreadyRegisteredError
	switch {
	case err == nil:
		reg.Unregister(twin) // etcd registered none here
	case errors.As(err, &are):
		c.vec = are.ExistingCollector
	}
	return c
}

// ReceivedFrom is the raft bytes received from member id; 0 if the metric
// or its series is missing.
func (c metricContact) ReceivedFrom(id uint64) float64 {
	from := types.ID(id).String()
	if c.vec != nil {
		return collected(c.vec, from)
	}
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

// collected is the value of vec's series whose From is from; 0 if none.
func collected(vec prometheus.Collector, from string) float64 {
	ch := make(chan prometheus.Metric, 16)
	go func() { vec.Collect(ch); close(ch) }()
	var v float64
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil && labelIs(&d, "From", from) {
			v = d.GetCounter().GetValue()
		}
	}
	return v
}

func labelIs(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}
