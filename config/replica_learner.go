package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/understudy-kv/understudy/promotion"
)

// Learner is a learner replica's own settings: those of the etcd member it
// embeds, which joins the cluster as a learner, and of its place in the
// cluster (its role, its member entry).
type Learner struct {
	// Join lists client URLs of the cluster to join (voters or replicas).
	// It has no default: a replica joins only a cluster it is told. Left
	// out, the data dir must hold this replica's member; replica.Run then
	// takes the client URLs of the members that member last knew.
	Join []string
	// ListenPeerURLs and AdvertisePeerURLs are the embedded member's raft
	// URLs; the voters must reach AdvertisePeerURLs. LoadReplica takes
	// --listen-peer-urls for them when only those are given.
	ListenPeerURLs    []string
	AdvertisePeerURLs []string
	// peerAdvertiseDerived records that the advertised URLs were taken
	// from the listen URLs (LoadReplica): an unspecified address there
	// then needs the advertise flag.
	peerAdvertiseDerived bool

	// SkipPeerURLCheck skips the check, on first start, that
	// AdvertisePeerURLs lead back to this replica (for a host that cannot
	// reach its own advertised address, such as behind NAT without hairpin).
	SkipPeerURLCheck bool

	// HeartbeatMs and ElectionMs must match the voters' (etcd's
	// --heartbeat-interval and --election-timeout).
	HeartbeatMs uint
	ElectionMs  uint
	// AuthToken must match the voters' --auth-token.
	AuthToken string
	// PeerTLS secures the embedded member's raft traffic, as etcd's
	// --peer-* flags; it must be what the voters' peers accept.
	PeerTLS TLS

	// QuotaBackendBytes is the embedded member's backend quota (etcd's
	// --quota-backend-bytes). Any member over its own quota raises a
	// NOSPACE alarm that stops writes cluster-wide, so a replica's quota
	// must never be below a voter's: 0 takes the largest quota any voter
	// reports, and a value below that is refused at start.
	QuotaBackendBytes int64
	// QuotaCheckInterval is how often the voters' quotas are asked again: a
	// learner whose quota every voter's has passed since it started (its
	// database would then stop the cluster's writes first) stops, and
	// started again it takes the voters' quota; a voter only reports it.
	QuotaCheckInterval time.Duration
	// AutoCompactionMode and AutoCompactionRetention are etcd's flags of the
	// same names. etcd compacts only on the leader, so they matter once a
	// replica is promoted and leads. A retention of 0 (the default) has the
	// replica learn the voters' policy from the compactions it applies and
	// run it while it leads (package autocompact), so that the cluster's
	// compaction never stops with a promoted replica; given, etcd runs them.
	AutoCompactionMode, AutoCompactionRetention string
	// MaxLearners is etcd's --max-learners for the embedded member, which
	// checks every member addition it applies: give a replica that may be
	// promoted the voters' value. 0 accepts every learner the voters accept.
	MaxLearners int
	// Promotion is the replica's role and the rule it promotes by.
	Promotion promotion.Config
	// RemoveOnExit removes the replica's member entry (and data dir) when
	// it stops cleanly.
	RemoveOnExit bool
	// ReplaceStaleDataDir, a cluster ID in hex, moves aside a data dir that
	// holds a member of another cluster (the voters were restored from a
	// snapshot) or one the cluster no longer lists, and joins as a new
	// learner, instead of refusing to start — only when --join is that
	// cluster, so that a wrong --join never costs a data dir.
	ReplaceStaleDataDir string
	// ReplaceOwnLearner removes a learner listed under --name at these
	// peer URLs when the data dir holds no member (its data was lost), and
	// joins anew: for a StatefulSet, where one pod only has a name.
	ReplaceOwnLearner bool
}

// DefaultLearner is a learner replica's member on 127.0.0.1:2480 (peers),
// beside a default etcd or primary on 2380, with etcd's defaults.
func DefaultLearner() Learner {
	return Learner{
		ListenPeerURLs:          []string{"http://127.0.0.1:2480"},
		AdvertisePeerURLs:       []string{"http://127.0.0.1:2480"},
		HeartbeatMs:             100,
		ElectionMs:              1000,
		AuthToken:               "simple",
		Promotion:               promotion.DefaultConfig(),
		AutoCompactionMode:      embed.CompactorModePeriodic,
		AutoCompactionRetention: "0",
		QuotaCheckInterval:      30 * time.Second,
	}
}

// StaleDataDirCluster is --replace-stale-data-dir's cluster ID.
func (c Learner) StaleDataDirCluster() (uint64, error) {
	id, err := strconv.ParseUint(c.ReplaceStaleDataDir, 16, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("--replace-stale-data-dir %q: want the cluster ID of --join in hex, as the refusal to start names it (etcdctl member list -w json: header.cluster_id, in hex)", c.ReplaceStaleDataDir)
	}
	return id, nil
}

// Validate reports every problem of the learner's settings at once, each
// naming its flag. No --join is a restart, or refused by replica.Run,
// which reads the data dir.
func (c Learner) Validate() error {
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	if c.ReplaceStaleDataDir != "" {
		if _, err := c.StaleDataDirCluster(); err != nil {
			problems = append(problems, err)
		}
	}
	for _, f := range []struct {
		name string
		urls []string
	}{
		{"join", c.Join},
		{"listen-peer-urls", c.ListenPeerURLs},
		{"initial-advertise-peer-urls", given(c.AdvertisePeerURLs, !c.peerAdvertiseDerived)},
	} {
		problems = append(problems, checkURLs(f.name, f.urls)...)
	}
	problems = append(problems, checkAdvertised("listen-peer-urls", "initial-advertise-peer-urls", c.AdvertisePeerURLs, c.peerAdvertiseDerived)...)
	for _, f := range []struct {
		name string
		urls []string
	}{
		{"listen-peer-urls", c.ListenPeerURLs},
		{"initial-advertise-peer-urls", c.AdvertisePeerURLs},
	} {
		if len(f.urls) == 0 {
			add("--%s: must name at least one URL", f.name)
		}
	}
	if c.QuotaBackendBytes < 0 {
		add("--quota-backend-bytes %d: must be 0 (the voters' largest) or more", c.QuotaBackendBytes)
	}
	if c.QuotaCheckInterval <= 0 {
		add("--quota-check-interval %v: must be more than 0 (default 30s)", c.QuotaCheckInterval)
	}
	if err := checkCompaction(c.AutoCompactionMode, c.AutoCompactionRetention); err != nil {
		problems = append(problems, err)
	}
	if c.MaxLearners < 0 {
		add("--max-learners %d: must be 0 (whatever the voters accept) or more", c.MaxLearners)
	}
	if c.HeartbeatMs == 0 {
		add("--heartbeat-interval 0: must be more than 0 ms")
	} else if c.ElectionMs < 5*c.HeartbeatMs {
		add("--election-timeout %d: must be at least 5 × --heartbeat-interval (%d ms)", c.ElectionMs, 5*c.HeartbeatMs)
	}
	problems = append(problems, checkTLS("peer-", "--listen-peer-urls and --initial-advertise-peer-urls", c.PeerTLS, append(slices.Clone(c.ListenPeerURLs), c.AdvertisePeerURLs...))...)
	if err := c.Promotion.Validate(); err != nil {
		problems = append(problems, err)
	}
	return errors.Join(problems...)
}
