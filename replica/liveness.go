package replica

import (
	"context"
	"expvar"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/membership"
	"github.com/understudy-kv/understudy/promotion"
	"github.com/understudy-kv/understudy/readpath"
)

const (
	// leaderViewTimeout bounds one read of the leader's raft status and
	// roundTimeout one ReadIndex round: fixed, since a read or round that
	// times out proves nothing and only slows the loop (a round at 600 ms
	// RTT still fits). peerProbeTimeout bounds one probe of a voter's peer
	// URL near the voters; far away it grows (evidenceTimeout).
	leaderViewTimeout = 500 * time.Millisecond
	peerProbeTimeout  = 500 * time.Millisecond
	roundTimeout      = time.Second
	// maxEvidenceTimeout bounds them however far the voters are.
	maxEvidenceTimeout = 5 * time.Second
)

// roundTrip is the longer of the round trips the role loop's evidence and
// the front's rounds took lately.
func (r *roles) roundTrip() time.Duration {
	d := r.rtt.Get()
	if r.leaderRTT != nil {
		d = max(d, r.leaderRTT())
	}
	return d
}

// evidenceTimeout is how long the role loop waits for a probe of a voter's
// peer URL — the evidence that it lives when the leader's view is not to
// be had — whose timeout near the voters is base, when its round trips to them take
// rtt: base plus 4 round trips (a new connection's handshakes, TLS's, the
// request), at most maxEvidenceTimeout. A fixed timeout shorter than a far
// region's round trips would take every live voter for silent.
func evidenceTimeout(base, rtt time.Duration) time.Duration {
	return min(base+4*max(rtt, 0), max(base, maxEvidenceTimeout))
}

// observe reads what the core needs: the replica's own raft state; the
// leader's commit index, from a ReadIndex round through raft (roundCommit);
// the membership and the failover record from its own member; the leader's
// raft progress where its client URL answers (an optional refinement); for
// each voter the leader is not known to see as active, whether its peer
// URLs answer; and, for one this replica alone finds silent, what the other
// voters' raft transports say of it (witness, from their client URLs). That
// a voter's own client URL does not answer is never evidence: it proves
// nothing about its raft.
//
// With the failover lock held, the local member is brought up to date
// first (a ReadIndex round), so that the membership and the record it
// reads are the cluster's as of now.
func (r *roles) observe(ctx context.Context) (promotion.Observation, error) {
	o, err := r.observeSelf(ctx)
	if err != nil {
		return promotion.Observation{}, err
	}
	if o.Failover, err = r.readRecord(ctx); err != nil {
		return promotion.Observation{}, err
	}
	if o.Holds, o.HoldsRev, err = r.readHolds(ctx); err != nil {
		return promotion.Observation{}, err
	}
	viewErr := r.observeVoters(ctx, &o)
	r.viewAllActive = viewErr == nil
	for _, v := range o.Voters {
		r.viewAllActive = r.viewAllActive && v.Leader == promotion.LeaderViewActive
	}
	r.logSilent(o)
	r.failoverLikely = o.Failover != nil || o.HoldsFailoverLock || len(r.silentNames) > 0
	if o.LeaderCommit != 0 {
		r.m.lag.Set(float64(promotion.Lag(o)))
	}
	return o, nil
}

// observeSelf is the replica's own part of the observation: its raft state
// and, when a promotion or failover may come, the leader's commit index
// from a ReadIndex round.
func (r *roles) observeSelf(ctx context.Context) (promotion.Observation, error) {
	o := promotion.Observation{SelfID: uint64(r.srv.MemberID()), IsLearner: r.srv.IsLearner(), HoldsFailoverLock: r.lock.held()}
	switch {
	case o.HoldsFailoverLock && !o.IsLearner:
		rctx, cancel := context.WithTimeout(ctx, roundTimeout)
		err := r.srv.LinearizableReadNotify(rctx)
		cancel()
		if err != nil {
			return o, fmt.Errorf("read index: %w", err)
		}
	case o.IsLearner && (r.cfg.Role == promotion.RoleVoter || r.failoverLikely):
		// The leader's commit index from raft itself: whichever client
		// URLs answer, a round through the leader does. A standby needs
		// it only once a failover may come (every round costs the leader
		// a heartbeat to every member).
		start := r.clock.Now()
		var err error
		if o.Applied, o.LeaderCommit, err = r.roundCommit(ctx); err == nil {
			r.lastRound = start
		} else if o.HoldsFailoverLock {
			return o, fmt.Errorf("read index: %w", err)
		} else {
			r.lg.Debug("role: no ReadIndex round; the leader's commit index is unknown", zap.Error(err))
		}
	}
	if o.LeaderCommit == 0 {
		o.Applied = readpath.AppliedIndex(r.srv)
	}
	// Read again after the round: a promotion may have been applied
	// meanwhile, and a voter must not be promoted twice.
	o.IsLearner = r.srv.IsLearner()
	o.Now, o.LastRound, o.Leader, o.LastLeaderContact = r.clock.Now(), r.lastRound, uint64(r.srv.Leader()), r.asOf()
	if m := r.srv.Cluster().Member(r.srv.MemberID()); m != nil {
		o.SelfName = m.Name
	}
	r.m.sinceLeader.Set(o.Now.Sub(o.LastLeaderContact).Seconds())
	return o, nil
}

// observeLeader reads the leader's raft view where its client URL answers,
// and takes the leader's commit index from it where no round gave one (a
// voter, or a round that failed).
func (r *roles) observeLeader(ctx context.Context, o *promotion.Observation) (membership.RaftStatus, error) {
	if o.Leader == 0 {
		return membership.RaftStatus{}, fmt.Errorf("no leader")
	}
	view, err := r.view(ctx, *o)
	if err != nil {
		r.lg.Debug("role: no leader's raft view; peer URLs decide", zap.Error(err))
		return view, err
	}
	if o.LeaderCommit == 0 {
		o.LeaderCommit = view.Commit
	}
	return view, nil
}

// leaderViewOf is what the leader's raft progress says of voter id.
func leaderViewOf(view membership.RaftStatus, id uint64) promotion.LeaderView {
	p, ok := view.Progress[id]
	switch {
	case id == view.Leader:
		return promotion.LeaderViewActive
	case !ok:
		return promotion.LeaderViewUnknown
	case p.State == "StateProbe":
		return promotion.LeaderViewInactive
	default: // StateReplicate, StateSnapshot
		return promotion.LeaderViewActive
	}
}

// roundCommit runs a ReadIndex round through the leader (raft's own
// messages: no client URL is involved) and returns the applied index
// before it and an upper bound of the leader's commit index as of the
// round: a completed round means the leader's commit index when it began
// is applied here, so it is at most the applied index after. The lag
// leaderCommit−applied is therefore never less than the real one.
func (r *roles) roundCommit(ctx context.Context) (applied, leaderCommit uint64, err error) {
	applied = readpath.AppliedIndex(r.srv)
	rctx, cancel := context.WithTimeout(ctx, roundTimeout)
	defer cancel()
	start := r.clock.Now()
	if err := r.srv.LinearizableReadNotify(rctx); err != nil {
		return 0, 0, err
	}
	r.rtt.Observe(r.clock.Since(start))
	return applied, max(readpath.AppliedIndex(r.srv), 1), nil
}

// readRecord reads the failover record from the replica's own store.
func (r *roles) readRecord(ctx context.Context) (*promotion.Record, error) {
	res, err := r.srv.KV().Range(ctx, []byte(failoverRecordKey), nil, mvcc.RangeOptions{})
	if err != nil {
		return nil, fmt.Errorf("failover record: %w", err)
	}
	if len(res.KVs) == 0 {
		return nil, nil
	}
	return promotion.ParseRecord(res.KVs[0].Value)
}

// view is the leader's raft status for the observation o: the last one
// read while promotion.ReuseView allows, else a new read.
func (r *roles) view(ctx context.Context, o promotion.Observation) (membership.RaftStatus, error) {
	if promotion.ReuseView(r.cfg, o, r.viewAt, r.lastView.Leader, r.viewAllActive) {
		return r.lastView, nil
	}
	v, err := r.leaderView(ctx, o.Leader)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	r.m.viewReads.WithLabelValues(outcome).Inc()
	if err != nil {
		r.viewAt = time.Time{}
		return v, err
	}
	r.lastView, r.viewAt = v, o.Now
	return v, nil
}

// leaderView reads the leader's raft status: in-process when this replica
// is the leader (a promoted standby can be), else from the leader's
// /debug/vars.
func (r *roles) leaderView(ctx context.Context, leader uint64) (membership.RaftStatus, error) {
	if leader == uint64(r.srv.MemberID()) {
		v := expvar.Get("raft.status")
		if v == nil {
			return membership.RaftStatus{}, fmt.Errorf("no raft.status expvar")
		}
		return membership.ParseRaftStatus([]byte(v.String()), "this member")
	}
	m := r.srv.Cluster().Member(r.srv.Leader())
	if m == nil {
		return membership.RaftStatus{}, fmt.Errorf("leader %x is not in the member list", leader)
	}
	var last error = fmt.Errorf("leader %s has no client URL", m.Name)
	for _, u := range m.ClientURLs {
		lctx, cancel := context.WithTimeout(ctx, leaderViewTimeout)
		start := r.clock.Now()
		st, err := membership.LeaderRaftStatus(lctx, r.leaderHTTP, u)
		cancel()
		if err == nil && st.Leader == leader {
			r.rtt.Observe(r.clock.Since(start))
			return st, nil
		}
		if err == nil {
			err = fmt.Errorf("%s answers as %x, not the leader %x", u, st.Leader, leader)
		}
		last = err
	}
	return membership.RaftStatus{}, last
}

// logSilent logs when the set of silent voters changes.
func (r *roles) logSilent(o promotion.Observation) {
	var names []string
	for _, v := range o.Voters {
		if v.Silent() {
			names = append(names, v.Name+" (leader view "+v.Leader.String()+")")
		}
	}
	r.m.silent.Set(float64(len(names)))
	if slices.Equal(names, r.silentNames) {
		return
	}
	r.silentNames = names
	if len(names) == 0 {
		r.lg.Info("every voter is live")
		return
	}
	r.lg.Warn("voters silent: no peer URL answers and the leader does not replicate to them", zap.String("voters", strings.Join(names, ", ")))
}
