package membership

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/promotion"
	"github.com/understudy-kv/understudy/wire"
)

// Member is one member as `replica status` reports it, or a cascaded
// replica (no member: --cascaded).
type Member struct {
	// Name is the member's name; a cascaded replica's --name, as it
	// tells it (wire.NameKey).
	Name string `json:"name"`
	// ID is the member ID (hex); a cascaded replica's is its first
	// advertised client URL, the ID it goes by in chains of upstreams
	// (wire.UpstreamChainKey): unique per replica, the same after a
	// restart.
	ID        string `json:"id"`
	ClientURL string `json:"client_url"`
	IsLearner bool   `json:"is_learner"`
	IsLeader  bool   `json:"is_leader"`
	Replica   bool   `json:"understudy_replica"`
	Reachable bool   `json:"reachable"`
	// Error is why the member could not be asked (its client URL).
	Error     string `json:"error,omitempty"`
	Leader    string `json:"leader,omitempty"`
	RaftTerm  uint64 `json:"raft_term"`
	RaftIndex uint64 `json:"raft_index"`
	Applied   uint64 `json:"raft_applied_index"`
	Lag       uint64 `json:"lag_entries"`
	Freshness string `json:"freshness_age,omitempty"`
	// LeaderProgress is the leader's raft progress state for the member
	// (StateReplicate, StateProbe, StateSnapshot), when the leader's
	// /debug/vars could be read: what a standby judges a voter by.
	LeaderProgress string `json:"leader_progress,omitempty"`
	// ProgressError, on the leader's row, is why the leader's raft
	// progress could not be read (LeaderProgress is then empty on every
	// row).
	ProgressError string `json:"leader_progress_error,omitempty"`
	Promotable    *bool  `json:"promotable,omitempty"`
	Why           string `json:"promotion,omitempty"`
	// RoleState is what a standby's or voter-role replica's role loop is
	// doing, and why ("waiting: hold 3.1s of 5s", "blocked: ...").
	RoleState string `json:"role_state,omitempty"`
	// Compaction is the auto-compaction a learner replica would run once
	// promoted and leading, and where it comes from (wire.CompactionKey).
	Compaction string `json:"compaction,omitempty"`
	// Cascaded marks a cascaded replica (no member: --cascaded), with
	// its chain of upstreams (comma-separated IDs, its own first, as it
	// tells it), the source revision it holds and how many it is behind
	// the leader's.
	Cascaded     bool   `json:"cascaded,omitempty"`
	Upstreams    string `json:"upstream_chain,omitempty"`
	Revision     int64  `json:"revision,omitempty"`
	LagRevisions int64  `json:"lag_revisions,omitempty"`
	// Version, StorageVersion and Quota are the member's etcd version,
	// storage version and backend quota, as its Status tells them;
	// SettingsDiffer says which of them a voter has unlike most voters.
	Version        string `json:"version,omitempty"`
	StorageVersion string `json:"storage_version,omitempty"`
	Quota          int64  `json:"quota_backend_bytes,omitempty"`
	SettingsDiffer string `json:"settings_differ,omitempty"`

	id      uint64
	contact time.Time
}

// Cascaded asks each cascaded replica at urls, as a probe, for its Status,
// and says how far behind leader (a row of Status; nil if unknown) it is.
func Cascaded(ctx context.Context, cli *clientv3.Client, urls []string, leader *Member, clock clockwork.Clock) []*Member {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	var out []*Member
	for _, u := range urls {
		s := &Member{ClientURL: u, Cascaded: true, IsLearner: true}
		out = append(out, s)
		if err := memberStatus(ctx, cli, s, clock.Now()); err != nil {
			s.Error = fmt.Sprintf("--cascaded %s: %v", u, err)
			continue
		}
		s.ID = s.Chain()[0]
		if leader != nil && leader.Revision > s.Revision {
			s.LagRevisions = leader.Revision - s.Revision
		}
	}
	return out
}

// Leader is the leader's row among sts, or nil.
func Leader(sts []*Member) *Member {
	for _, s := range sts {
		if s.IsLeader {
			return s
		}
	}
	return nil
}

// MemberID is the member's ID.
func (s *Member) MemberID() uint64 { return s.id }

// Chain is a cascaded replica's chain of upstreams, its own ID first.
func (s *Member) Chain() []string { return strings.Split(s.Upstreams, ",") }

// Status asks every member for its Status through cli; replicas also tell
// their freshness, which is when they last heard from the leader. hc reads
// the leader's raft progress from its /debug/vars; rule is the promotion
// rule the verdicts use; clock tells the time the verdicts are made at
// (nil: the real clock).
func Status(ctx context.Context, cli *clientv3.Client, hc *http.Client, rule promotion.Config, clock clockwork.Clock) ([]*Member, error) {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	ml, err := cli.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("membership: member list: %w", err)
	}
	now := clock.Now()
	var out []*Member
	var leader *Member
	for _, m := range ml.Members {
		s := &Member{Name: m.Name, ID: fmt.Sprintf("%x", m.ID), IsLearner: m.IsLearner, id: m.ID}
		out = append(out, s)
		if len(m.ClientURLs) == 0 {
			s.Error = "not started: no client URL"
			continue
		}
		s.ClientURL = m.ClientURLs[0]
		if err := memberStatus(ctx, cli, s, now); err != nil {
			s.Error = err.Error()
			continue
		}
		if s.IsLeader {
			leader = s
		}
	}
	var progress map[uint64]Progress
	if leader != nil && hc != nil {
		progress, leader.ProgressError = leaderProgress(ctx, hc, leader)
	}
	for _, s := range out {
		if p, ok := progress[s.id]; ok {
			s.LeaderProgress = p.State
		}
		if !s.Reachable {
			continue
		}
		var leaderCommit uint64
		if leader != nil {
			leaderCommit = leader.RaftIndex
		}
		if leaderCommit > s.Applied {
			s.Lag = leaderCommit - s.Applied
		}
		if s.IsLearner {
			var lid uint64
			if leader != nil {
				lid = leader.id
			}
			ok, why := promotion.CaughtUp(rule, promotion.Observation{Now: now, Leader: lid, LastLeaderContact: s.contact, Applied: s.Applied, LeaderCommit: leaderCommit})
			if !s.Replica {
				ok, why = false, "not an understudy replica: when it last heard from the leader is unknown"
			}
			s.Promotable, s.Why = &ok, why
		}
	}
	flagDifferingSettings(out)
	return out, nil
}

// leaderProgress reads the leader's raft progress from its /debug/vars,
// and says why not when it cannot. etcd keeps one raft.status per process
// (the raft node started last there), so where several members share a
// process (`primary --dev`) it may describe another member.
func leaderProgress(ctx context.Context, hc *http.Client, leader *Member) (map[uint64]Progress, string) {
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	const shared = "the leadership moved meanwhile, or several members share one process (etcd keeps one raft.status per process: the raft node started there last)"
	st, err := LeaderRaftStatus(lctx, hc, leader.ClientURL)
	switch {
	case errors.Is(err, ErrNotLeader):
		return nil, fmt.Sprintf("%v, though member %x leads: %s", err, leader.id, shared)
	case err != nil:
		return nil, err.Error()
	case st.ID != leader.id:
		return nil, fmt.Sprintf("%s/debug/vars describes member %x, not the leader %x: %s", leader.ClientURL, st.ID, leader.id, shared)
	}
	return st.Progress, ""
}

// memberStatus asks one member, and only it, for its Status.
func memberStatus(ctx context.Context, cli *clientv3.Client, s *Member, now time.Time) error {
	conn, err := cli.Dial(s.ClientURL)
	if err != nil {
		return err
	}
	defer conn.Close()
	sctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, wire.ProbeKey, "1"), 2*time.Second)
	defer cancel()
	var hdr metadata.MD
	st, err := pb.NewMaintenanceClient(conn).Status(sctx, &pb.StatusRequest{}, grpc.Header(&hdr))
	if err != nil {
		return err
	}
	s.Reachable, s.RaftTerm, s.RaftIndex, s.Applied = true, st.RaftTerm, st.RaftIndex, st.RaftAppliedIndex
	s.Revision = st.Header.Revision
	s.Version, s.StorageVersion, s.Quota = st.Version, st.StorageVersion, st.DbSizeQuota
	if s.Cascaded {
		if v := hdr.Get(wire.UpstreamChainKey); len(v) > 0 {
			s.Upstreams = v[0]
		}
		if v := hdr.Get(wire.NameKey); len(v) > 0 {
			s.Name = v[0]
		}
	}
	if v := hdr.Get(wire.CompactionKey); len(v) > 0 {
		s.Compaction = v[0]
	}
	s.Leader = fmt.Sprintf("%x", st.Leader)
	if v := hdr.Get(wire.FreshnessAgeKey); len(v) > 0 {
		if age, err := time.ParseDuration(v[0]); err == nil {
			s.Replica, s.Freshness = true, age.Round(time.Millisecond).String()
			s.contact = now.Add(-age)
		}
	}
	// The leader contact itself, where the replica tells it: a quiet
	// replica's freshness rounds are far apart, its raft traffic is not.
	if v := hdr.Get(wire.LeaderContactAgeKey); len(v) > 0 {
		if age, err := time.ParseDuration(v[0]); err == nil {
			s.contact = now.Add(-age)
		}
	}
	if v := hdr.Get(wire.RoleStateKey); len(v) > 0 {
		s.RoleState = v[0]
	}
	s.IsLeader = !s.Cascaded && st.Leader == s.id
	return nil
}

// Find picks a member by name or hex ID.
func Find(sts []*Member, target string) (*Member, error) {
	for _, s := range sts {
		if s.Name == target || s.ID == strings.ToLower(target) {
			return s, nil
		}
	}
	return nil, fmt.Errorf("%w named or with ID %q", ErrNoMember, target)
}
