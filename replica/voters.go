package replica

import (
	"context"
	"sync"

	etcdmembership "go.etcd.io/etcd/server/v3/etcdserver/api/membership"

	"github.com/understudy-kv/understudy/membership"
	"github.com/understudy-kv/understudy/promotion"
)

// observeVoters fills o.Voters, what this round learned of each other
// voter: the leader's view of it (observeLeader; its error is returned),
// whether one of its peer URLs answers as this cluster's (probed for a
// voter the leader's view does not vouch for), and, for a voter this
// replica alone finds silent, what the other voters' raft transports see
// of it (witness).
//
// While a failover may come (failoverLikely), the three are read at once,
// the probes and witnesses chosen by the last round, and only what this
// round's view adds is probed after: each step of a failover then waits
// for the slowest of their timeouts rather than their sum. At 150 ms RTT
// with the new leader's client URL cut, one after the other cost up to
// 2.5 s an observation, and a failover's six steps took up to 21 s.
func (r *roles) observeVoters(ctx context.Context, o *promotion.Observation) error {
	members := r.otherVoters()
	var (
		view    membership.RaftStatus
		viewErr error
		probed  = make([]bool, len(members))
		found   []bool
		views   map[uint64]*membership.PeerView
	)
	if r.failoverLikely {
		for i, m := range members {
			last, ok := r.lastVoters[uint64(m.ID)]
			probed[i] = !ok || r.needsProbe(last)
		}
		var wg sync.WaitGroup
		wg.Go(func() { view, viewErr = r.observeLeader(ctx, o) })
		wg.Go(func() { found = r.probePeers(ctx, members, probed) })
		if skip, ok := r.lastLonely(); ok {
			wg.Go(func() { views = r.readPeerViews(ctx, members, skip) })
		}
		wg.Wait()
	} else {
		view, viewErr = r.observeLeader(ctx, o)
		found = make([]bool, len(members))
	}
	o.Voters = votersOf(members, view, viewErr)
	late := make([]bool, len(members))
	for i, v := range o.Voters {
		late[i] = !probed[i] && r.needsProbe(v)
	}
	for i, ok := range r.probePeers(ctx, members, late) {
		found[i] = found[i] || ok
	}
	r.seen(o.Voters, found)
	if views == nil {
		r.witness(ctx, members, o.Voters)
	} else {
		for i, v := range o.Voters {
			if v.NeedsWitness() {
				o.Voters[i].Witness = membership.WitnessOf(v.ID, views)
			}
		}
	}
	r.remember(o.Voters)
	return viewErr
}

// needsProbe: the leader's view does not vouch for v, or v's peer URL has
// never answered here.
func (r *roles) needsProbe(v promotion.Voter) bool {
	return v.Leader != promotion.LeaderViewActive || !r.peerSeen[v.ID]
}

// remember keeps this round's voters for the next round's choice.
func (r *roles) remember(voters []promotion.Voter) {
	r.lastVoters = map[uint64]promotion.Voter{}
	for _, v := range voters {
		r.lastVoters[v.ID] = v
	}
}

// lastLonely tells whether a voter of the last round needed a witness, and
// which one if only one did (else 0: with several, no view is skipped, as
// in witness).
func (r *roles) lastLonely() (skip uint64, any bool) {
	n := 0
	for id, v := range r.lastVoters {
		if v.NeedsWitness() {
			skip, n = id, n+1
		}
	}
	if n != 1 {
		skip = 0
	}
	return skip, n > 0
}

// otherVoters are the voters in the member list but this member.
func (r *roles) otherVoters() []*etcdmembership.Member {
	var members []*etcdmembership.Member
	for _, m := range r.srv.Cluster().Members() {
		if m.ID != r.srv.MemberID() && !m.IsLearner {
			members = append(members, m)
		}
	}
	return members
}

// votersOf are members as the core sees them, with the leader's view of
// each where it was read.
func votersOf(members []*etcdmembership.Member, view membership.RaftStatus, viewErr error) []promotion.Voter {
	voters := make([]promotion.Voter, len(members))
	for i, m := range members {
		voters[i] = promotion.Voter{ID: uint64(m.ID), Name: m.Name}
		if viewErr == nil {
			voters[i].Leader = leaderViewOf(view, voters[i].ID)
		}
	}
	return voters
}

// probePeers probes the peer URLs of each member need selects, all at
// once, and tells which answered as this cluster's.
func (r *roles) probePeers(ctx context.Context, members []*etcdmembership.Member, need []bool) []bool {
	cluster := r.srv.Cluster().ID().String()
	// Sized before any probe starts: each probe writes its own element.
	answered := make([]bool, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if !need[i] {
			continue
		}
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, evidenceTimeout(peerProbeTimeout, r.roundTrip()))
			defer cancel()
			for _, u := range m.PeerURLs {
				start := r.clock.Now()
				if membership.PeerAnswers(pctx, r.peerHTTP, u, cluster) == nil {
					r.rtt.Observe(r.clock.Since(start))
					answered[i] = true
					return
				}
			}
		})
	}
	wg.Wait()
	return answered
}

// seen records which voters' peer URLs answered this round, and whether
// each one's ever has.
func (r *roles) seen(voters []promotion.Voter, answered []bool) {
	for i, v := range voters {
		voters[i].PeerAnswered = answered[i]
		if answered[i] {
			r.peerSeen[v.ID] = true
		}
		voters[i].PeerSeen = r.peerSeen[v.ID]
	}
}

// witness asks the other voters, for each voter this replica alone finds
// silent (its peer URLs answered before and do not now, and the leader's
// view does not say), what their own raft transports see of it: each
// voter's etcd_network_active_peers, from its client URL's /metrics. Each
// voter is asked at most once a round, and only when one is needed.
func (r *roles) witness(ctx context.Context, members []*etcdmembership.Member, voters []promotion.Voter) {
	var lonely []int
	for i, v := range voters {
		if v.NeedsWitness() {
			lonely = append(lonely, i)
		}
	}
	if len(lonely) == 0 {
		return
	}
	// A voter witnesses for the others only: with one suspect, its own
	// view (which would wait out the timeout on a dead voter) is not read.
	var skip uint64
	if len(lonely) == 1 {
		skip = voters[lonely[0]].ID
	}
	views := r.readPeerViews(ctx, members, skip)
	for _, i := range lonely {
		voters[i].Witness = membership.WitnessOf(voters[i].ID, views)
	}
}

// readPeerViews reads each voter's own peer view from its client URLs'
// /metrics, but skip's; a set read less than promotion.ViewReuse ago
// stands in (each read costs a voter a gathering of its whole registry,
// and a silence is timed in seconds).
func (r *roles) readPeerViews(ctx context.Context, members []*etcdmembership.Member, skip uint64) map[uint64]*membership.PeerView {
	if now := r.clock.Now(); !r.peerViewsAt.IsZero() && now.Sub(r.peerViewsAt) < promotion.ViewReuse && now.Sub(r.peerViewsAt) >= 0 {
		return r.peerViews
	}
	views := make([]*membership.PeerView, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if uint64(m.ID) == skip {
			continue
		}
		wg.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, evidenceTimeout(peerProbeTimeout, r.roundTrip()))
			defer cancel()
			for _, u := range m.ClientURLs {
				if v, err := membership.ReadPeerView(wctx, r.leaderHTTP, u, uint64(m.ID)); err == nil {
					views[i] = &v
					return
				}
			}
		})
	}
	wg.Wait()
	r.peerViews, r.peerViewsAt = map[uint64]*membership.PeerView{}, r.clock.Now()
	for i, m := range members {
		r.peerViews[uint64(m.ID)] = views[i]
	}
	return r.peerViews
}
