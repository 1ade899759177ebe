package cascade

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Config configures a cascaded replica's store.
type Config struct {
	// Upstreams are client URLs of the source cluster to copy from, in
	// order of preference: learner replicas, other cascaded replicas or
	// members (--upstream). The snapshot is taken from the first that is
	// not the cluster's leader, the leader's only if nothing else answers.
	Upstreams []string
	// Self are this replica's own client URLs: an upstream among them is
	// refused.
	Self []string
	// Dial opens a client of endpoints, with the TLS and credentials the
	// replica uses towards its upstreams.
	Dial func(endpoints []string) (*clientv3.Client, error)
	// DialForward opens a client of endpoints with the replica's TLS but
	// no user, and opts (the interceptors that send each call's caller's
	// token); ClientCert says whether it presents a client certificate
	// (which names a user on the source: see ForwardDialOptions).
	DialForward func(endpoints []string, opts []grpc.DialOption) (*clientv3.Client, error)
	ClientCert  bool
	// Dir holds the local store; every bootstrap replaces it.
	Dir string
	// Name names the local member (its log lines).
	Name string
	// LogOutputs are the local member's log outputs (etcd's); empty:
	// stderr.
	LogOutputs []string
	// Logger is required; Metrics are the replica's (NewMetrics; nil:
	// none registered); Clock times everything (nil: the real clock).
	Logger  *zap.Logger
	Metrics *Metrics
	Clock   clockwork.Clock
	// ProgressInterval is how often the upstream's watch is asked where it
	// is (a progress notification: how the replica knows it still hears
	// its upstream, and how far the source is).
	ProgressInterval time.Duration
	// SilenceTimeout is how long an upstream may stay silent (no event,
	// no progress) before the replica resumes its watch on the next one.
	SilenceTimeout time.Duration
	// UpstreamTimeout bounds every call on an upstream that no client
	// waits for (a Status, a check of its history, opening its watch, a
	// compaction or lease check): a dead upstream costs that much, and the
	// next is tried.
	UpstreamTimeout time.Duration
	// RetryWait is the wait after a turn in which no upstream could be
	// followed, doubling after each such turn in a row up to RetryWaitMax.
	RetryWait, RetryWaitMax time.Duration
	// CompactionInterval is how often the replica asks whether the
	// source compacted, to compact its store as far.
	CompactionInterval time.Duration
	// LeaseGCInterval is how often leases without keys here are checked
	// against the upstream and revoked here once the source has none.
	LeaseGCInterval time.Duration
	// AuthRefreshInterval is how often the replica asks an upstream for
	// the source's auth revision (a read that old at most), to copy its
	// users and roles again when it moved: a permission change takes
	// effect here within about twice that.
	AuthRefreshInterval time.Duration
	// WatchProgressNotifyInterval is how often the store's watches that
	// ask for progress notifications get one (etcd's
	// --watch-progress-notify-interval); 0 keeps etcd's default.
	WatchProgressNotifyInterval time.Duration
	// MaxTxnOps and MaxConcurrentStreams are the limits etcd's handlers
	// the front serves the store with check clients against (etcd's
	// --max-txn-ops and --max-concurrent-streams, a voter's defaults when
	// 0); the store applies a source revision of any size (the applier
	// calls the server, not the handlers). MaxRequestBytes and MaxTxnOps
	// also bound the writes the front forwards (ForwardLimits), as a
	// member checks its own proposals whatever the leader's limits.
	MaxRequestBytes      uint
	MaxTxnOps            uint
	MaxConcurrentStreams uint32
	// Announce, if set, is where the replica announces itself while the
	// store is served (Announcement).
	Announce *Announcement
	// ApplyValue, nil but in tests of the checks, is the value the
	// Applier writes for a put (nil: the source's): a test breaks the
	// apply with it, and the check after the revision must find it.
	ApplyValue func(key, value []byte) []byte
}

// DefaultConfig is a Config with the defaults of its durations.
func DefaultConfig() Config {
	return Config{
		Name:                "cascade",
		ProgressInterval:    250 * time.Millisecond,
		SilenceTimeout:      time.Second,
		UpstreamTimeout:     2 * time.Second,
		RetryWait:           250 * time.Millisecond,
		RetryWaitMax:        time.Second,
		CompactionInterval:  5 * time.Second,
		LeaseGCInterval:     time.Minute,
		AuthRefreshInterval: time.Second,
	}
}

// Validate reports every missing or bad field.
func (c Config) Validate() error {
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	if len(c.Upstreams) == 0 {
		add("--upstream: must name at least one client URL of the source cluster")
	}
	for _, u := range c.Upstreams {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			add("--upstream %q: must be an http:// or https:// client URL", u)
			continue
		}
		for _, s := range c.Self {
			if sameURL(u, s) {
				add("--upstream %s: is this replica's own client URL; name a replica or member of the source cluster", u)
			}
		}
	}
	if c.Dial == nil || c.DialForward == nil {
		add("cascade: Config.Dial and DialForward must be set")
	}
	if c.Dir == "" {
		add("cascade: Config.Dir is empty")
	}
	if c.Logger == nil {
		add("cascade: Config.Logger is nil")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ProgressInterval", c.ProgressInterval}, {"SilenceTimeout", c.SilenceTimeout}, {"CompactionInterval", c.CompactionInterval}, {"LeaseGCInterval", c.LeaseGCInterval}, {"AuthRefreshInterval", c.AuthRefreshInterval},
		{"UpstreamTimeout", c.UpstreamTimeout}, {"RetryWait", c.RetryWait}, {"RetryWaitMax", c.RetryWaitMax}} {
		if d.v <= 0 {
			add("cascade: %s %v: must be more than 0", d.name, d.v)
		}
	}
	if c.WatchProgressNotifyInterval < 0 {
		add("--watch-progress-notify-interval %v: must not be negative", c.WatchProgressNotifyInterval)
	}
	return errors.Join(problems...)
}

// sameURL compares two URLs by scheme, host and port.
func sameURL(a, b string) bool {
	pa, err1 := url.Parse(a)
	pb, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && pa.Scheme == pb.Scheme && pa.Host == pb.Host
}
