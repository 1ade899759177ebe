package config

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/understudy-kv/understudy/promotion"
	"github.com/understudy-kv/understudy/wire"
)

// NewReplicaFlags registers the replica's flags, bound to cfg. Flag names are
// etcd's wherever etcd has the same setting.
func NewReplicaFlags(cfg *Replica) *flag.FlagSet {
	// Both kinds' settings take flags; LoadReplica keeps the one the flags
	// make.
	if cfg.Learner == nil {
		l := DefaultLearner()
		cfg.Learner = &l
	}
	if cfg.Cascaded == nil {
		c := DefaultCascaded()
		cfg.Cascaded = &c
	}
	f, l, c := &cfg.Front, cfg.Learner, cfg.Cascaded
	fs := flag.NewFlagSet("replica", flag.ContinueOnError)
	fs.StringVar(&f.Name, "name", f.Name, "Member name of this replica; unique in the cluster.")
	fs.StringVar(&f.DataDir, "data-dir", f.DataDir, "Path to the data directory. One that holds a replica restarts as it (--join may then be left out).")
	fs.Func("join", "Comma-separated client URLs of the cluster to join as a learner (its voters). Required, unless --upstream or a --data-dir that holds this replica.", (*list)(&l.Join).Set)
	fs.Var((*list)(&c.Upstream), "upstream", "Instead of --join: a cascaded replica, fed by the watch of these client URLs (replicas of the cluster); no member. See docs/cascaded.md.")
	fs.BoolVar(&c.Announce, "announce", c.Announce, "With --upstream: announce this replica in the source cluster while it serves (a key under --resolver-prefix, on a lease), so that balancers find it; it is in no member list.")
	fs.StringVar(&c.ResolverPrefix, "resolver-prefix", c.ResolverPrefix, "With --upstream: the key prefix to announce under, in etcd's naming format (as grpc-proxy's); empty: understudy's own, where its balancer looks.")
	fs.IntVar(&c.ResolverTTL, "resolver-ttl", c.ResolverTTL, "With --upstream: the announcement's lease TTL in seconds: a replica that dies is gone from it within that.")
	fs.Var((*list)(&l.ListenPeerURLs), "listen-peer-urls", "URLs to listen on for raft traffic from the voters.")
	fs.Var((*list)(&l.AdvertisePeerURLs), "initial-advertise-peer-urls", "This replica's peer URLs as the voters reach them; required when --listen-peer-urls is an unspecified address (0.0.0.0, [::]).")
	fs.Var((*list)(&f.ListenClientURLs), "listen-client-urls", "URLs to serve etcd's gRPC API on (the replica's front).")
	fs.Var((*list)(&f.AdvertiseClientURLs), "advertise-client-urls", "Client URLs to publish in the member list; required when --listen-client-urls is an unspecified address (0.0.0.0, [::]).")
	fs.Var((*list)(&f.ListenMetricsURLs), "listen-metrics-urls", "URLs to serve /metrics and /health on (plain HTTP).")
	fs.DurationVar(&f.JoinTimeout, "join-timeout", f.JoinTimeout, "On first start: time to catch up before the replica gives up, removes the learner entry it added and exits.")
	fs.DurationVar(&f.MaxStaleness, "max-staleness", f.MaxStaleness, "Staleness bound for serializable reads that carry none (0: serve them locally as they are). A request can set its own with the gRPC metadata key \"understudy-max-staleness\" (a Go duration).")
	fs.DurationVar(&f.ReadIndex.Interval, "freshness-interval", f.ReadIndex.Interval, "How often the replica confirms freshness with a ReadIndex round; each round costs the leader one heartbeat round.")
	fs.DurationVar(&f.ReadIndex.QuietInterval, "freshness-quiet-interval", f.ReadIndex.QuietInterval, "Period of the freshness rounds once no client request has come for as long: an unused replica costs the leader what a stock learner does (0: never quiet). docs/scaling.md.")
	fs.DurationVar(&f.ReadIndex.IdleInterval, "freshness-idle-interval", f.ReadIndex.IdleInterval, "Period of the freshness rounds while no bounded read with a bound under twice this has come for 5s (0: always --freshness-interval). docs/read-modes.md.")
	fs.DurationVar(&f.ReadIndex.BatchInterval, "read-batch-interval", f.ReadIndex.BatchInterval, "Least time between two ReadIndex rounds; strong and bounded reads arriving meanwhile share the next (0: back to back). docs/read-modes.md.")
	fs.DurationVar(&f.ReadIndex.BatchMaxWait, "read-batch-max-wait", f.ReadIndex.BatchMaxWait, "Most a strong or bounded read waits for its round while the round is held for readers coming back (0: no hold). docs/read-modes.md.")
	fs.Var((*list)(&f.ReadIndex.ViaURLs), "read-index-via", "Client URLs of other replicas of this cluster to obtain strong reads' read indexes from, sharing their rounds (docs/trust-model.md).")
	fs.IntVar(&f.ReadIndex.ViaInFlight, "read-index-via-in-flight", f.ReadIndex.ViaInFlight, "Most --read-index-via requests in flight at once (docs/read-modes.md).")
	fs.DurationVar(&f.ReadIndex.ViaTimeout, "read-index-via-timeout", f.ReadIndex.ViaTimeout, "Time to wait for a --read-index-via hub's answer, and then until its index is applied here; past it, an own round (docs/trust-model.md).")
	fs.BoolVar(&l.SkipPeerURLCheck, "skip-peer-url-check", l.SkipPeerURLCheck, "Do not check, on first start, that --initial-advertise-peer-urls lead back to this replica (only for hosts that cannot reach their own advertised address).")
	fs.UintVar(&l.HeartbeatMs, "heartbeat-interval", l.HeartbeatMs, "Raft heartbeat interval in ms; use the voters' value.")
	fs.UintVar(&l.ElectionMs, "election-timeout", l.ElectionMs, "Raft election timeout in ms; use the voters' value.")
	fs.StringVar(&l.AuthToken, "auth-token", l.AuthToken, "Auth token type, as the voters' --auth-token (simple or jwt,…).")
	fs.StringVar(&f.ClientTLS.CertFile, "cert-file", "", "TLS certificate of the front, for https --listen-client-urls; also the replica's client certificate towards the --join URLs.")
	fs.StringVar(&f.ClientTLS.KeyFile, "key-file", "", "TLS key for --cert-file.")
	fs.StringVar(&f.ClientTLS.TrustedCAFile, "trusted-ca-file", "", "CA bundle that client certificates (with --client-cert-auth) and the --join URLs' certificates are verified against.")
	fs.BoolVar(&f.ClientTLS.ClientCertAuth, "client-cert-auth", false, "Require clients of the front to present a certificate signed by --trusted-ca-file.")
	fs.StringVar(&l.PeerTLS.CertFile, "peer-cert-file", "", "TLS certificate for raft traffic with the voters (https peer URLs), as etcd's --peer-cert-file.")
	fs.StringVar(&l.PeerTLS.KeyFile, "peer-key-file", "", "TLS key for --peer-cert-file.")
	fs.StringVar(&l.PeerTLS.TrustedCAFile, "peer-trusted-ca-file", "", "CA bundle the voters' peer certificates are verified against, as etcd's --peer-trusted-ca-file.")
	fs.BoolVar(&l.PeerTLS.ClientCertAuth, "peer-client-cert-auth", false, "Require peers to present a certificate signed by --peer-trusted-ca-file, as etcd's --peer-client-cert-auth.")
	fs.StringVar(&f.TLSVersions.MinVersion, "tls-min-version", f.TLSVersions.MinVersion, "Minimum TLS version of every connection the replica serves or opens, as etcd's: TLS1.2 or TLS1.3.")
	fs.StringVar(&f.TLSVersions.MaxVersion, "tls-max-version", f.TLSVersions.MaxVersion, "Maximum TLS version, as etcd's: TLS1.2, TLS1.3, or empty for Go's highest.")
	fs.Var((*list)(&f.TLSVersions.CipherSuites), "cipher-suites", "Comma-separated TLS 1.2 cipher suites (Go's names), as etcd's; empty: Go's. Not with --tls-min-version TLS1.3.")
	fs.StringVar(&f.User, "user", f.User, "User name[:password] the replica's own client logs in with, on an auth-enabled cluster (as etcdctl's --user).")
	fs.StringVar(&f.Password, "password", f.Password, "Password for --user; prefer UNDERSTUDY_PASSWORD or the config file, which keep it out of ps.")
	fs.Int64Var(&l.QuotaBackendBytes, "quota-backend-bytes", l.QuotaBackendBytes, "Backend quota in bytes, as etcd's. A member over its quota stops writes cluster-wide (NOSPACE), so 0 takes the largest quota any voter reports and a smaller value is refused.")
	fs.DurationVar(&l.QuotaCheckInterval, "quota-check-interval", l.QuotaCheckInterval, "How often the voters' backend quotas are asked again; a learner whose quota every voter's has passed stops (docs/operations.md).")
	fs.UintVar(&f.MaxRequestBytes, "max-request-bytes", f.MaxRequestBytes, "Maximum client request size in bytes the replica accepts, as etcd's.")
	fs.StringVar(&l.AutoCompactionMode, "auto-compaction-mode", l.AutoCompactionMode, "etcd's flag: periodic or revision. Used only once promoted and leading; without --auto-compaction-retention, the replica learns the voters' policy from the compactions it applies (docs/roles.md).")
	fs.StringVar(&l.AutoCompactionRetention, "auto-compaction-retention", l.AutoCompactionRetention, "etcd's flag. Used only once promoted and leading; 0: the replica learns the voters' policy from the compactions it applies, and runs it as leader (docs/roles.md).")
	fs.IntVar(&l.MaxLearners, "max-learners", l.MaxLearners, "etcd's flag, checked on every member addition applied: give a replica that may be promoted the voters' value. 0 accepts what they accept.")
	fs.UintVar(&f.MaxTxnOps, "max-txn-ops", f.MaxTxnOps, "Maximum number of operations in a transaction, as etcd's.")
	fs.Var((*uint32Value)(&f.MaxConcurrentStreams), "max-concurrent-streams", "Maximum concurrent streams each client can open at a time, as etcd's.")
	fs.DurationVar(&f.GRPCKeepAliveMinTime, "grpc-keepalive-min-time", f.GRPCKeepAliveMinTime, "Minimum interval a client should wait before pinging the replica, as etcd's.")
	fs.DurationVar(&f.GRPCKeepAliveInterval, "grpc-keepalive-interval", f.GRPCKeepAliveInterval, "Frequency of server-to-client pings to check a connection is alive, as etcd's.")
	fs.DurationVar(&f.GRPCKeepAliveTimeout, "grpc-keepalive-timeout", f.GRPCKeepAliveTimeout, "Wait for a ping's answer before closing a non-responsive connection, as etcd's.")
	fs.DurationVar(&f.WatchProgressNotifyInterval, "watch-progress-notify-interval", f.WatchProgressNotifyInterval, "Period of progress notifications on watches that ask for them, as etcd's.")
	fs.Uint64Var(&f.ReadyMaxLag, "ready-max-lag", f.ReadyMaxLag, "/readyz fails while the replica's applied index is more than this many entries behind the commit index it knows.")
	fs.DurationVar(&f.ReadyMaxStaleness, "ready-max-staleness", f.ReadyMaxStaleness, "/readyz fails while the replica's freshness age is above this (0: the larger of 5s and 3 × the slower of --freshness-interval and --freshness-idle-interval).")
	fs.Var((*roleValue)(&l.Promotion.Role), "role", "reader (never promotes), voter (promotes itself once caught up) or standby (replaces a voter unreachable for --failover-after).")
	fs.Uint64Var(&l.Promotion.MaxLag, "promote-max-lag", l.Promotion.MaxLag, "Promote only within this many entries of the leader's commit index (etcd's own check is 90% of the leader's log, which on a long log is far looser).")
	fs.DurationVar(&l.Promotion.Hold, "promote-hold", l.Promotion.Hold, "Promote only after being caught up, without a break, for this long.")
	fs.DurationVar(&l.Promotion.LeaderContact, "promote-leader-contact", l.Promotion.LeaderContact, "Count as caught up only if the leader was heard from within this long.")
	fs.DurationVar(&l.Promotion.FailoverAfter, "failover-after", l.Promotion.FailoverAfter, "A standby replaces a voter silent by raft's evidence for longer than this; long enough for a reboot (docs/roles.md, Defaults).")
	fs.StringVar(&l.ReplaceStaleDataDir, "replace-stale-data-dir", l.ReplaceStaleDataDir, "CLUSTER_ID (hex): if --data-dir holds a stale member (voters restored from a snapshot) and --join is that cluster, move member/ aside and join anew.")
	fs.BoolVar(&l.ReplaceOwnLearner, "replace-own-learner", l.ReplaceOwnLearner, "With no member in --data-dir, remove the learner listed under --name at these peer URLs (its data lost) and join anew; never a voter. For StatefulSets (docs/operations.md).")
	fs.BoolVar(&l.RemoveOnExit, "remove-on-exit", l.RemoveOnExit, "On a clean stop, remove this replica's member entry and its data (what etcd wrote in --data-dir, then the directory if nothing else is in it; for replicas that come and go).")
	fs.StringVar(&f.Zone, "zone", f.Zone, "Zone label told to balancers that probe this replica, for zone-affine reads (for example the cloud zone's name).")
	fs.Var((*headersMode)(&f.FreshnessHeaders), "freshness-headers", "When answers carry the understudy-read-mode, -staleness-bound, -known-leader and -applied-revision headers: on-request, always or off (docs/read-modes.md).")
	fs.BoolVar(&f.EnablePprof, "enable-pprof", f.EnablePprof, "Enable runtime profiling data via HTTP server. Address is at client URL + \"/debug/pprof/\" (etcd's flag; also on at --log-level debug, as etcd).")
	fs.StringVar(&f.LogLevel, "log-level", f.LogLevel, "Log level: debug, info, warn or error.")
	fs.StringVar(&f.ConfigFile, ConfigFileFlag, "", "Path to a YAML file of settings keyed by flag name. Precedence: flag > UNDERSTUDY_* environment > file > default.")
	// Defaults that follow other flags (LoadReplica), shown as etcd shows
	// its ${name}.etcd.
	fs.Lookup("data-dir").DefValue = "${name}.replica"
	fs.Lookup("initial-advertise-peer-urls").DefValue = "${listen-peer-urls}"
	fs.Lookup("advertise-client-urls").DefValue = "${listen-client-urls}"
	return fs
}

// learnerFlags are the flags of a learner replica's own settings (Learner):
// its member's, its role's and its member entry's. A cascaded replica has
// none of them; --join is refused beside --upstream, the others, unused,
// are named in Cascaded.Unused (TestLearnerFlagsAreTheLearnersFields).
var learnerFlags = []string{"join", "listen-peer-urls", "initial-advertise-peer-urls", "skip-peer-url-check",
	"heartbeat-interval", "election-timeout", "auth-token", "peer-cert-file", "peer-key-file", "peer-trusted-ca-file",
	"peer-client-cert-auth", "quota-backend-bytes", "quota-check-interval", "auto-compaction-mode",
	"auto-compaction-retention", "max-learners", "role", "promote-max-lag", "promote-hold", "promote-leader-contact",
	"failover-after", "replace-stale-data-dir", "replace-own-learner", "remove-on-exit"}

// LoadReplica parses args, the environment and any config file into cfg,
// and keeps the kind they make: a cascaded replica with --upstream, a
// learner replica without. A learner replica's setting given beside
// --upstream is refused (by Validate); its other settings, unused, are
// dropped with it.
func LoadReplica(cfg *Replica, fs *flag.FlagSet, args []string) error {
	got, err := loadFlagsOnly(fs, args, nil)
	if errors.Is(err, ErrHelp) {
		return err
	}
	if !got.Set["data-dir"] {
		cfg.DataDir = cfg.Name + ".replica"
	}
	if got.Set["listen-client-urls"] && !got.Set["advertise-client-urls"] {
		cfg.AdvertiseClientURLs = cfg.ListenClientURLs
		cfg.clientAdvertiseDerived = true
	}
	cfg.refused = nil
	if cfg.Cascaded != nil && len(cfg.Cascaded.Upstream) > 0 {
		if cfg.Learner != nil {
			cfg.refused = refuseLearner(*cfg.Learner, got.Set["join"])
		}
		cfg.Learner = nil
		cfg.Cascaded.Unused = nil
		for _, name := range learnerFlags {
			if got.Set[name] && name != "join" {
				cfg.Cascaded.Unused = append(cfg.Cascaded.Unused, "--"+name)
			}
		}
		return err
	}
	cfg.Cascaded = nil
	if cfg.Learner == nil {
		l := DefaultLearner()
		cfg.Learner = &l
	}
	if l := cfg.Learner; got.Set["listen-peer-urls"] && !got.Set["initial-advertise-peer-urls"] {
		l.AdvertisePeerURLs = l.ListenPeerURLs
		l.peerAdvertiseDerived = true
	}
	return err
}

// list is a comma-separated flag value; a new value replaces the old one,
// so that a flag overrides the file rather than adding to it.
type list []string

func (l *list) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

func (l *list) Set(s string) error {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	*l = out
	return nil
}

// headersMode is --freshness-headers: on-request, always or off; true and
// false, its values when it was a boolean, still mean always and off.
type headersMode string

func (m *headersMode) String() string {
	if m == nil {
		return ""
	}
	return string(*m)
}

func (m *headersMode) Set(s string) error {
	switch s {
	case "true":
		s = wire.HeadersAlways
	case "false":
		s = wire.HeadersOff
	}
	*m = headersMode(s)
	return nil // Validate names a bad value with the others
}

// roleValue is --role: a bad value is refused and leaves the role as it
// was, so that it is reported once.
type roleValue promotion.Role

func (r *roleValue) String() string {
	if r == nil {
		return ""
	}
	return string(*r)
}

func (r *roleValue) Set(s string) error {
	role, err := promotion.ParseRole(s)
	if err != nil {
		return err
	}
	*r = roleValue(role)
	return nil
}

// uint32Value is a uint32 flag (etcd's --max-concurrent-streams).
type uint32Value uint32

func (v *uint32Value) String() string {
	if v == nil {
		return ""
	}
	return strconv.FormatUint(uint64(*v), 10)
}

func (v *uint32Value) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return fmt.Errorf("want a whole number from 0 to %d", uint32(math.MaxUint32))
	}
	*v = uint32Value(n)
	return nil
}
