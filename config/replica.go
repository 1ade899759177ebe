package config

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/understudy-kv/understudy/promotion"
	"github.com/understudy-kv/understudy/readindex"
	"github.com/understudy-kv/understudy/wire"
)

// Replica configures a replica: an embedded etcd member that joins as a
// learner, fronted by understudy's own etcd-compatible gRPC server.
type Replica struct {
	// Name is the member name; it must be unique in the cluster.
	Name string
	// DataDir holds the embedded member's data. A data dir that already
	// holds a member means "restart as that member": nothing is added.
	DataDir string
	// Join lists client URLs of the cluster to join (voters or replicas).
	// It has no default: a replica joins only a cluster it is told. Left
	// out, the data dir must hold this replica's member; replica.Run then
	// takes the client URLs of the members that member last knew.
	Join []string
	// Upstream, instead of Join, makes a cascaded replica: client URLs of
	// the source cluster's replicas (or members) to copy from, by
	// snapshot and then watch; it is no member of the cluster (package
	// cascade).
	Upstream []string
	// joinSet records that --join was given (with --upstream, a refusal).
	joinSet bool
	// Announce, for a cascaded replica, announces it in the source cluster
	// while it serves (clients that discover replicas find it): under
	// ResolverPrefix (empty: wire.ReplicasTarget), on a lease of
	// ResolverTTL seconds (grpc-proxy's flags and format).
	Announce       bool
	ResolverPrefix string
	ResolverTTL    int
	// ListenPeerURLs and AdvertisePeerURLs are the embedded member's raft
	// URLs; the voters must reach AdvertisePeerURLs. LoadReplica takes
	// --listen-peer-urls for them when only those are given.
	ListenPeerURLs    []string
	AdvertisePeerURLs []string
	// ListenClientURLs and AdvertiseClientURLs are the replica's front: the
	// gRPC server clients talk to. AdvertiseClientURLs is what `member list`
	// shows for the replica; LoadReplica takes --listen-client-urls for them
	// when only those are given.
	ListenClientURLs    []string
	AdvertiseClientURLs []string
	// peerAdvertiseDerived and clientAdvertiseDerived record that the
	// advertised URLs were taken from the listen URLs (LoadReplica): an
	// unspecified address there then needs the advertise flag.
	peerAdvertiseDerived, clientAdvertiseDerived bool
	// ListenMetricsURLs serve /metrics and /health over plain HTTP.
	ListenMetricsURLs []string

	// JoinTimeout bounds the first start: if the learner has not caught up
	// by then, the replica removes the member entry it added and exits.
	JoinTimeout time.Duration
	// MaxStaleness is the staleness bound applied to serializable reads that
	// carry no bound of their own; 0 serves them from the local store as is.
	MaxStaleness time.Duration
	// ReadIndex are the ReadIndex machinery's settings: freshness rounds
	// (--freshness-interval, --freshness-idle-interval,
	// --freshness-quiet-interval), their batching (--read-batch-interval,
	// --read-batch-max-wait) and rounds through hubs (--read-index-via,
	// --read-index-via-timeout, --read-index-via-in-flight); defined, and
	// validated, in package readindex.
	ReadIndex readindex.Settings

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
	// ClientTLS secures the front on https client URLs (etcd's --cert-file,
	// --key-file, --trusted-ca-file, --client-cert-auth); its certificate
	// and CA are also what the replica uses towards the --join URLs.
	ClientTLS TLS
	// PeerTLS secures the embedded member's raft traffic, as etcd's
	// --peer-* flags; it must be what the voters' peers accept.
	PeerTLS TLS
	// TLSVersions bound every TLS connection of the replica, both sides.
	TLSVersions TLSVersions

	// User and Password log the replica's own client (joining, status,
	// membership changes) in to an auth-enabled cluster, as etcdctl's
	// --user ("name" or "name:password") and --password. Keep the
	// password out of `ps` with UNDERSTUDY_PASSWORD or the config file.
	User, Password string

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
	// MaxRequestBytes, MaxTxnOps and MaxConcurrentStreams limit the front's
	// clients, as etcd's flags of the same names limit a voter's.
	MaxRequestBytes      uint
	MaxTxnOps            uint
	MaxConcurrentStreams uint32
	// GRPCKeepAlive* are etcd's gRPC server keepalive settings.
	GRPCKeepAliveMinTime  time.Duration
	GRPCKeepAliveInterval time.Duration
	GRPCKeepAliveTimeout  time.Duration
	// WatchProgressNotifyInterval is the period of progress notifications
	// on watches that ask for them (etcd's --watch-progress-notify-interval).
	WatchProgressNotifyInterval time.Duration

	// ReadyMaxLag and ReadyMaxStaleness say when /readyz admits the
	// replica: applied within ReadyMaxLag entries of the commit index it
	// knows, and fresh (see --freshness-interval) within ReadyMaxStaleness;
	// 0 means the larger of 5s and 3 × the slower freshness interval.
	ReadyMaxLag       uint64
	ReadyMaxStaleness time.Duration

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

	// Zone labels the replica for zone-affine balancers (free text, such as
	// a cloud zone name); empty means none.
	Zone string
	// FreshnessHeaders says when answers carry the answer headers (read
	// mode, staleness bound, known leader, applied revision):
	// wire.HeadersOnRequest (the default: when the request asks with
	// wire.FreshnessKey or is a probe), wire.HeadersAlways or
	// wire.HeadersOff.
	FreshnessHeaders string
	// EnablePprof serves runtime profiles under /debug/pprof/ on the
	// client URLs (etcd's --enable-pprof; also at log level debug, as
	// etcd).
	EnablePprof bool
	// LogLevel is one of debug, info, warn, error.
	LogLevel string

	// ConfigFile is the YAML file values were read from, if any.
	ConfigFile string
}

// ReadyStaleness is the effective --ready-max-staleness.
func (c Replica) ReadyStaleness() time.Duration {
	if c.ReadyMaxStaleness > 0 {
		return c.ReadyMaxStaleness
	}
	return max(5*time.Second, 3*c.ReadIndex.Slowest())
}

// Credentials splits --user and --password as etcdctl does: "name:password"
// in --user, or the password in --password.
func (c Replica) Credentials() (user, password string) {
	if name, pw, ok := strings.Cut(c.User, ":"); ok && c.Password == "" {
		return name, pw
	}
	return c.User, c.Password
}

// TLS is one side's certificates, as etcd names them.
type TLS struct {
	CertFile, KeyFile, TrustedCAFile string
	// ClientCertAuth requires clients to present a certificate signed by
	// TrustedCAFile.
	ClientCertAuth bool
}

// Enabled reports whether any certificate is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" || t.TrustedCAFile != "" }

// QuietInterval is the --freshness-quiet-interval in force (see
// readindex.Settings.Quiet).
func (c Replica) QuietInterval() time.Duration { return c.ReadIndex.Quiet() }

// DefaultReplica is a replica on 127.0.0.1:2479 (clients) and :2480 (peers),
// beside a default etcd or primary on 2379/2380. It joins no cluster: --join
// (or --upstream) names the one to join.
func DefaultReplica() Replica {
	return Replica{
		Name:                "replica",
		DataDir:             "replica.replica",
		ListenPeerURLs:      []string{"http://127.0.0.1:2480"},
		AdvertisePeerURLs:   []string{"http://127.0.0.1:2480"},
		ListenClientURLs:    []string{"http://127.0.0.1:2479"},
		AdvertiseClientURLs: []string{"http://127.0.0.1:2479"},
		JoinTimeout:         2 * time.Minute,
		ReadIndex:           readindex.DefaultSettings(),
		HeartbeatMs:         100,
		ElectionMs:          1000,
		AuthToken:           "simple",
		LogLevel:            "info",
		FreshnessHeaders:    wire.HeadersOnRequest,
		Promotion:           promotion.DefaultConfig(),
		TLSVersions:         DefaultTLSVersions(),

		MaxRequestBytes:             embed.DefaultMaxRequestBytes,
		MaxTxnOps:                   embed.DefaultMaxTxnOps,
		AutoCompactionMode:          embed.CompactorModePeriodic,
		AutoCompactionRetention:     "0",
		MaxConcurrentStreams:        embed.DefaultMaxConcurrentStreams,
		GRPCKeepAliveMinTime:        embed.DefaultGRPCKeepAliveMinTime,
		GRPCKeepAliveInterval:       embed.DefaultGRPCKeepAliveInterval,
		GRPCKeepAliveTimeout:        embed.DefaultGRPCKeepAliveTimeout,
		WatchProgressNotifyInterval: 10 * time.Minute, // etcd's
		Announce:                    true,
		ResolverTTL:                 10,
		ReadyMaxLag:                 1000,
		QuotaCheckInterval:          30 * time.Second,
	}
}

// StaleDataDirCluster is --replace-stale-data-dir's cluster ID.
func (c Replica) StaleDataDirCluster() (uint64, error) {
	id, err := strconv.ParseUint(c.ReplaceStaleDataDir, 16, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("--replace-stale-data-dir %q: want the cluster ID of --join in hex, as the refusal to start names it (etcdctl member list -w json: header.cluster_id, in hex)", c.ReplaceStaleDataDir)
	}
	return id, nil
}

// Validate reports every problem at once, each naming its flag.
func (c Replica) Validate() error {
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	if c.Name == "" {
		add("--name: must not be empty")
	}
	if c.DataDir == "" {
		add("--data-dir: must not be empty")
	}
	// No --join and no --upstream is a restart, or refused by replica.Run,
	// which reads the data dir.
	if len(c.Upstream) > 0 {
		problems = append(problems, c.validateCascaded()...)
	}
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
		{"upstream", c.Upstream},
		{"listen-peer-urls", c.ListenPeerURLs},
		{"initial-advertise-peer-urls", given(c.AdvertisePeerURLs, !c.peerAdvertiseDerived)},
		{"listen-client-urls", c.ListenClientURLs},
		{"advertise-client-urls", given(c.AdvertiseClientURLs, !c.clientAdvertiseDerived)},
		{"listen-metrics-urls", c.ListenMetricsURLs},
		{"read-index-via", c.ReadIndex.ViaURLs},
	} {
		problems = append(problems, checkURLs(f.name, f.urls)...)
	}
	problems = append(problems, checkPlainHTTP("listen-metrics-urls", c.ListenMetricsURLs)...)
	problems = append(problems, c.checkAdvertised()...)
	for _, f := range []struct {
		name string
		urls []string
	}{
		{"listen-peer-urls", c.ListenPeerURLs},
		{"initial-advertise-peer-urls", c.AdvertisePeerURLs},
		{"listen-client-urls", c.ListenClientURLs},
	} {
		if len(f.urls) == 0 {
			add("--%s: must name at least one URL", f.name)
		}
	}
	if c.JoinTimeout <= 0 {
		add("--join-timeout %v: must be more than 0", c.JoinTimeout)
	}
	if c.MaxStaleness < 0 {
		add("--max-staleness %v: must be 0 (no bound) or more", c.MaxStaleness)
	}
	if err := c.ReadIndex.Validate(); err != nil {
		problems = append(problems, err)
	}
	for _, u := range c.ReadIndex.ViaURLs {
		if slices.Contains(c.AdvertiseClientURLs, u) || slices.Contains(c.ListenClientURLs, u) {
			add("--read-index-via %s: is this replica's own client URL; name other replicas of the cluster", u)
		}
	}
	if c.QuotaBackendBytes < 0 {
		add("--quota-backend-bytes %d: must be 0 (the voters' largest) or more", c.QuotaBackendBytes)
	}
	if c.QuotaCheckInterval <= 0 {
		add("--quota-check-interval %v: must be more than 0 (default 30s)", c.QuotaCheckInterval)
	}
	if c.MaxRequestBytes == 0 {
		add("--max-request-bytes 0: must be more than 0")
	}
	if c.MaxTxnOps == 0 {
		add("--max-txn-ops 0: must be more than 0")
	}
	if err := checkCompaction(c.AutoCompactionMode, c.AutoCompactionRetention); err != nil {
		problems = append(problems, err)
	}
	if c.MaxLearners < 0 {
		add("--max-learners %d: must be 0 (whatever the voters accept) or more", c.MaxLearners)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"grpc-keepalive-min-time", c.GRPCKeepAliveMinTime},
		{"grpc-keepalive-interval", c.GRPCKeepAliveInterval},
		{"grpc-keepalive-timeout", c.GRPCKeepAliveTimeout},
		{"watch-progress-notify-interval", c.WatchProgressNotifyInterval},
	} {
		if d.v <= 0 {
			add("--%s %v: must be more than 0", d.name, d.v)
		}
	}
	if c.ReadyMaxStaleness < 0 {
		add("--ready-max-staleness %v: must be 0 (derived from --freshness-interval) or more", c.ReadyMaxStaleness)
	} else if slowest := c.ReadIndex.Slowest(); c.ReadyMaxStaleness > 0 && c.ReadyMaxStaleness <= slowest {
		add("--ready-max-staleness %v: must be more than --freshness-interval and --freshness-idle-interval (%v), or the replica would flap between ready and not", c.ReadyMaxStaleness, slowest)
	}
	if c.Password != "" && c.User == "" {
		add("--password: needs --user")
	}
	if c.HeartbeatMs == 0 {
		add("--heartbeat-interval 0: must be more than 0 ms")
	} else if c.ElectionMs < 5*c.HeartbeatMs {
		add("--election-timeout %d: must be at least 5 × --heartbeat-interval (%d ms)", c.ElectionMs, 5*c.HeartbeatMs)
	}
	problems = append(problems, checkTLS("", "--listen-client-urls and --advertise-client-urls", c.ClientTLS, append(slices.Clone(c.ListenClientURLs), c.AdvertiseClientURLs...))...)
	problems = append(problems, checkTLS("peer-", "--listen-peer-urls and --initial-advertise-peer-urls", c.PeerTLS, append(slices.Clone(c.ListenPeerURLs), c.AdvertisePeerURLs...))...)
	if err := c.Promotion.Validate(); err != nil {
		problems = append(problems, err)
	}
	if err := c.TLSVersions.Validate(); err != nil {
		problems = append(problems, err)
	}
	switch c.FreshnessHeaders {
	case wire.HeadersOnRequest, wire.HeadersAlways, wire.HeadersOff:
	default:
		add("--freshness-headers %q: must be %s, %s or %s", c.FreshnessHeaders, wire.HeadersOnRequest, wire.HeadersAlways, wire.HeadersOff)
	}
	if err := checkLogLevel(c.LogLevel); err != nil {
		problems = append(problems, err)
	}
	return errors.Join(problems...)
}

// checkTLS checks one side's certificates against its URLs: https needs a
// certificate and key; a front serves one scheme.
func checkTLS(prefix, urlFlags string, t TLS, urls []string) []error {
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	https, http := 0, 0
	for _, u := range urls {
		if strings.HasPrefix(u, "https://") {
			https++
		} else {
			http++
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		add("--%scert-file %q and --%skey-file %q: give both or neither", prefix, t.CertFile, prefix, t.KeyFile)
	}
	if https > 0 && t.CertFile == "" {
		add("--%scert-file: %s are https, which needs a certificate and key (--%scert-file, --%skey-file)", prefix, urlFlags, prefix, prefix)
	}
	if https > 0 && http > 0 {
		add("%s: mix http and https; use one scheme", urlFlags)
	}
	if t.ClientCertAuth && t.TrustedCAFile == "" {
		add("--%sclient-cert-auth: needs --%strusted-ca-file", prefix, prefix)
	}
	return problems
}

// Cascaded reports a cascaded replica (--upstream).
func (c Replica) Cascaded() bool { return len(c.Upstream) > 0 }

// checkAdvertised refuses an unspecified address (0.0.0.0, [::]) among the
// URLs the replica publishes: it listens on every interface and reaches
// nobody, yet it would land in the member list (peer URLs) or be what
// clients and cycle checks are told (client URLs). As etcd, which requires
// --advertise-client-urls once --listen-client-urls is given, an
// unspecified listen address needs its advertise flag.
func (c Replica) checkAdvertised() []error {
	var problems []error
	for _, f := range []struct {
		listen, advertise string
		urls              []string
		derived, used     bool
	}{
		// A cascaded replica is no member: it publishes no peer URL.
		{"listen-peer-urls", "initial-advertise-peer-urls", c.AdvertisePeerURLs, c.peerAdvertiseDerived, !c.Cascaded()},
		{"listen-client-urls", "advertise-client-urls", c.AdvertiseClientURLs, c.clientAdvertiseDerived, true},
	} {
		i := slices.IndexFunc(f.urls, unspecifiedHost)
		switch {
		case !f.used || i < 0:
		case f.derived:
			problems = append(problems, fmt.Errorf("--%s %s: an unspecified address listens on every interface but is no address to publish: give --%s, the URLs others reach this replica at (as etcd requires --advertise-client-urls with --listen-client-urls)",
				f.listen, f.urls[i], f.advertise))
		default:
			problems = append(problems, fmt.Errorf("--%s %s: an unspecified address is no address others can reach; give this host's address or DNS name",
				f.advertise, f.urls[i]))
		}
	}
	return problems
}

// given is urls if they were given, and none if they are another flag's
// (which reports their problems).
func given(urls []string, ok bool) []string {
	if !ok {
		return nil
	}
	return urls
}

// unspecifiedHost reports a URL whose host is 0.0.0.0 or :: (checkURL
// reports one that does not parse).
func unspecifiedHost(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(u.Hostname())
	return err == nil && a.IsUnspecified()
}
