// Package membership reads and changes a cluster's membership the way an
// operator of understudy replicas, or a standby, needs: the one Changer
// through which every member add, promotion and removal goes (Classify and
// Settle read etcd's answers), every member's status with understudy's
// promotion verdict, a promotion that refuses a learner that is not live
// and caught up, a leave that refuses voters, and the two pieces of raft
// evidence a standby judges a voter by (the leader's raft progress and the
// voter's peer URLs).
package membership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

var (
	// ErrNotLeader means the member asked for its raft progress is not the
	// leader: only the leader's progress says who it replicates to.
	ErrNotLeader = errors.New("membership: the member asked is not the leader")
	// ErrNoMember means no member has the name or ID given.
	ErrNoMember = errors.New("membership: no such member")
	// ErrRefused means understudy's own check refused the change; the error
	// says why and what to do.
	ErrRefused = errors.New("membership: refusing")
)

// Progress is the leader's raft view of one member (raft's tracker.Progress
// as etcd's /debug/vars "raft.status" shows it).
type Progress struct {
	Match uint64 `json:"match"`
	Next  uint64 `json:"next"`
	// State is StateProbe, StateReplicate or StateSnapshot.
	State string `json:"state"`
}

// RaftStatus is the leader's raft status.
type RaftStatus struct {
	ID       uint64
	Leader   uint64
	Commit   uint64
	Progress map[uint64]Progress
}

// LeaderRaftStatus reads etcd's "raft.status" expvar from a member's
// /debug/vars (served on its client URLs) and returns it if that member is
// the leader.
func LeaderRaftStatus(ctx context.Context, hc *http.Client, clientURL string) (RaftStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/debug/vars", nil)
	if err != nil {
		return RaftStatus{}, fmt.Errorf("membership: %s/debug/vars: %w", clientURL, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return RaftStatus{}, fmt.Errorf("membership: %s/debug/vars: %w", clientURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return RaftStatus{}, fmt.Errorf("membership: %s/debug/vars: %s", clientURL, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return RaftStatus{}, fmt.Errorf("membership: %s/debug/vars: %w", clientURL, err)
	}
	return ParseRaftStatus(b, clientURL+"/debug/vars")
}

// ParseRaftStatus reads etcd's /debug/vars document, or the "raft.status"
// expvar alone, and returns the raft status if it is a leader's. from names
// the source in errors.
func ParseRaftStatus(b []byte, from string) (RaftStatus, error) {
	type raftJSON struct {
		ID        string              `json:"id"`
		Lead      string              `json:"lead"`
		Commit    uint64              `json:"commit"`
		RaftState string              `json:"raftState"`
		Progress  map[string]Progress `json:"progress"`
	}
	var vars struct {
		Raft *raftJSON `json:"raft.status"`
	}
	if err := json.Unmarshal(b, &vars); err != nil {
		return RaftStatus{}, fmt.Errorf("membership: %s: %w", from, err)
	}
	if vars.Raft == nil {
		var alone raftJSON
		if json.Unmarshal(b, &alone) != nil || alone.RaftState == "" {
			return RaftStatus{}, fmt.Errorf("membership: %s has no raft.status (not an etcd member?)", from)
		}
		vars.Raft = &alone
	}
	if vars.Raft.RaftState != "StateLeader" {
		return RaftStatus{}, fmt.Errorf("%w: %s is %s", ErrNotLeader, from, vars.Raft.RaftState)
	}
	st := RaftStatus{Commit: vars.Raft.Commit, Progress: map[uint64]Progress{}}
	var err error
	if st.ID, err = strconv.ParseUint(vars.Raft.ID, 16, 64); err != nil {
		return RaftStatus{}, fmt.Errorf("membership: %s: raft id %q: %w", from, vars.Raft.ID, err)
	}
	st.Leader = st.ID
	for k, p := range vars.Raft.Progress {
		id, err := strconv.ParseUint(k, 16, 64)
		if err != nil {
			return RaftStatus{}, fmt.Errorf("membership: %s: progress of %q: %w", from, k, err)
		}
		st.Progress[id] = p
	}
	return st, nil
}

// PeerAnswers asks one peer URL of a member for the cluster's member list,
// the way a member checks a peer, and reports whether it answered as a
// member of cluster (hex ID): a process of another cluster on that address
// is not the member.
func PeerAnswers(ctx context.Context, hc *http.Client, peerURL, cluster string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, peerURL+"/members", nil)
	if err != nil {
		return fmt.Errorf("membership: peer %s: %w", peerURL, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("membership: peer %s: %w", peerURL, err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Etcd-Cluster-ID"); got != cluster {
		return fmt.Errorf("membership: peer %s answered for cluster %q, not %q (another process on that address?)", peerURL, got, cluster)
	}
	return nil
}
