package config

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/understudy-kv/understudy/promotion"
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
	Join []string
	// ListenPeerURLs and AdvertisePeerURLs are the embedded member's raft
	// URLs; the voters must reach AdvertisePeerURLs.
	ListenPeerURLs    []string
	AdvertisePeerURLs []string
	// ListenClientURLs and AdvertiseClientURLs are the replica's front: the
	// gRPC server clients talk to. AdvertiseClientURLs is what `member list`
	// shows for the replica.
	ListenClientURLs    []string
	AdvertiseClientURLs []string
	// ListenMetricsURLs serve /metrics and /health over plain HTTP.
	ListenMetricsURLs []string

	// JoinTimeout bounds the first start: if the learner has not caught up
	// by then, the replica removes the member entry it added and exits.
	JoinTimeout time.Duration
	// MaxStaleness is the staleness bound applied to serializable reads that
	// carry no bound of their own; 0 serves them from the local store as is.
	MaxStaleness time.Duration
	// FreshnessInterval is how often the replica confirms, by a ReadIndex
	// round, that it is up to date. Each round costs the leader one
	// heartbeat round, so this is the knob between bounded-read latency and
	// leader load.
	FreshnessInterval time.Duration
	// FreshnessIdleInterval is the period of those rounds while no bounded
	// read has come for a few seconds (a bounded read that needs a fresher
	// round asks for one at once); 0 keeps FreshnessInterval always.
	FreshnessIdleInterval time.Duration
	// ReadBatchInterval is the least time between two ReadIndex rounds;
	// strong and bounded reads arriving meanwhile share the next round.
	ReadBatchInterval time.Duration
	// ReadBatchMaxWait is the most a strong or bounded read waits for its
	// round to start because the round is held for the readers coming
	// back; 0 holds no round back.
	ReadBatchMaxWait time.Duration
	// ReadIndexVia lists client URLs of other replicas of the cluster to
	// obtain read indexes from, so that replicas share ReadIndex rounds
	// for strong reads; each must be a client URL a member advertises
	// (others are refused: docs/trust-model.md); empty: the replica's own
	// rounds through the leader.
	ReadIndexVia []string
	// ReadIndexViaTimeout bounds a request to them, and then the wait
	// until their index is applied here; past either, the replica does
	// its own round and keeps away from that hub for a back-off.
	ReadIndexViaTimeout time.Duration

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

	// Zone labels the replica for zone-affine balancers (free text, such as
	// a cloud zone name); empty means none.
	Zone string
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
	return max(5*time.Second, 3*c.FreshnessInterval, 3*c.FreshnessIdleInterval)
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

// DefaultReplica is a replica on 127.0.0.1:2479 (clients) and :2480 (peers),
// beside a default etcd or primary on 2379/2380.
func DefaultReplica() Replica {
	return Replica{
		Name:                  "replica",
		DataDir:               "replica.replica",
		ListenPeerURLs:        []string{"http://127.0.0.1:2480"},
		AdvertisePeerURLs:     []string{"http://127.0.0.1:2480"},
		ListenClientURLs:      []string{"http://127.0.0.1:2479"},
		AdvertiseClientURLs:   []string{"http://127.0.0.1:2479"},
		Join:                  []string{"http://127.0.0.1:2379"},
		JoinTimeout:           2 * time.Minute,
		FreshnessInterval:     50 * time.Millisecond,
		FreshnessIdleInterval: time.Second,
		ReadBatchInterval:     2 * time.Millisecond,
		ReadBatchMaxWait:      2 * time.Millisecond,
		ReadIndexViaTimeout:   200 * time.Millisecond,
		HeartbeatMs:           100,
		ElectionMs:            1000,
		AuthToken:             "simple",
		LogLevel:              "info",
		Promotion:             promotion.DefaultConfig(),

		MaxRequestBytes:             embed.DefaultMaxRequestBytes,
		MaxTxnOps:                   embed.DefaultMaxTxnOps,
		MaxConcurrentStreams:        embed.DefaultMaxConcurrentStreams,
		GRPCKeepAliveMinTime:        embed.DefaultGRPCKeepAliveMinTime,
		GRPCKeepAliveInterval:       embed.DefaultGRPCKeepAliveInterval,
		GRPCKeepAliveTimeout:        embed.DefaultGRPCKeepAliveTimeout,
		WatchProgressNotifyInterval: 10 * time.Minute, // etcd's
		ReadyMaxLag:                 1000,
		QuotaCheckInterval:          30 * time.Second,
	}
}

// NewReplicaFlags registers the replica's flags, bound to cfg. Flag names are
// etcd's wherever etcd has the same setting.
func NewReplicaFlags(cfg *Replica) *flag.FlagSet {
	fs := flag.NewFlagSet("replica", flag.ContinueOnError)
	fs.StringVar(&cfg.Name, "name", cfg.Name, "Member name of this replica; unique in the cluster.")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "Path to the data directory (default: ${name}.replica). An existing one restarts as the same member.")
	fs.Var((*list)(&cfg.Join), "join", "Comma-separated client URLs of the cluster to join (any voters).")
	fs.Var((*list)(&cfg.ListenPeerURLs), "listen-peer-urls", "URLs to listen on for raft traffic from the voters.")
	fs.Var((*list)(&cfg.AdvertisePeerURLs), "initial-advertise-peer-urls", "This replica's peer URLs as the voters must reach them.")
	fs.Var((*list)(&cfg.ListenClientURLs), "listen-client-urls", "URLs to serve etcd's gRPC API on (the replica's front).")
	fs.Var((*list)(&cfg.AdvertiseClientURLs), "advertise-client-urls", "Client URLs to publish in the member list (default: --listen-client-urls).")
	fs.Var((*list)(&cfg.ListenMetricsURLs), "listen-metrics-urls", "URLs to serve /metrics and /health on (plain HTTP).")
	fs.DurationVar(&cfg.JoinTimeout, "join-timeout", cfg.JoinTimeout, "On first start: time to catch up before the replica gives up, removes the learner entry it added and exits.")
	fs.DurationVar(&cfg.MaxStaleness, "max-staleness", cfg.MaxStaleness, "Staleness bound for serializable reads that carry none (0: serve them locally as they are). A request can set its own with the gRPC metadata key \"understudy-max-staleness\" (a Go duration).")
	fs.DurationVar(&cfg.FreshnessInterval, "freshness-interval", cfg.FreshnessInterval, "How often the replica confirms freshness with a ReadIndex round; each round costs the leader one heartbeat round.")
	fs.DurationVar(&cfg.FreshnessIdleInterval, "freshness-idle-interval", cfg.FreshnessIdleInterval, "Period of the freshness rounds while no bounded read has come for 5s, so that an idle replica costs the leader almost nothing (0: always --freshness-interval).")
	fs.DurationVar(&cfg.ReadBatchInterval, "read-batch-interval", cfg.ReadBatchInterval, "Least time between two ReadIndex rounds through the leader. Strong and bounded reads arriving meanwhile share the next round: longer means less leader work per read and at most this much more latency; 0 runs rounds back to back.")
	fs.DurationVar(&cfg.ReadBatchMaxWait, "read-batch-max-wait", cfg.ReadBatchMaxWait, "Most time a strong or bounded read waits for its ReadIndex round to start while the round is held for the other readers coming back (the number that waited at once in the last round): rounds then carry whole client populations, and the leader pays for fewer; 0 starts a round as soon as a read asks and --read-batch-interval allows.")
	fs.Var((*list)(&cfg.ReadIndexVia), "read-index-via", "Comma-separated client URLs of other replicas of this cluster to obtain read indexes from for strong reads, instead of a ReadIndex round of this replica's own: replicas in one place then share rounds. Reads stay linearizable: the named replica answers after a round that started after the request. Each must be a client URL that a member of this cluster advertises (etcdctl member list); an answer is used only if it names that member. Bounded reads, freshness and leader contact still come from own rounds. Empty: own rounds.")
	fs.DurationVar(&cfg.ReadIndexViaTimeout, "read-index-via-timeout", cfg.ReadIndexViaTimeout, "Time to wait for a --read-index-via replica's answer, and then for its index to be applied here; past either, the replica does its own round through the leader and keeps away from that hub for a back-off (1s, doubling while it keeps failing, up to 32s). A hub that answers in more than half this time 3 times in a row is dropped too.")
	fs.BoolVar(&cfg.SkipPeerURLCheck, "skip-peer-url-check", cfg.SkipPeerURLCheck, "Do not check, on first start, that --initial-advertise-peer-urls lead back to this replica (only for hosts that cannot reach their own advertised address).")
	fs.UintVar(&cfg.HeartbeatMs, "heartbeat-interval", cfg.HeartbeatMs, "Raft heartbeat interval in ms; use the voters' value.")
	fs.UintVar(&cfg.ElectionMs, "election-timeout", cfg.ElectionMs, "Raft election timeout in ms; use the voters' value.")
	fs.StringVar(&cfg.AuthToken, "auth-token", cfg.AuthToken, "Auth token type, as the voters' --auth-token (simple or jwt,…).")
	fs.StringVar(&cfg.ClientTLS.CertFile, "cert-file", "", "TLS certificate of the front, for https --listen-client-urls; also the replica's client certificate towards the --join URLs.")
	fs.StringVar(&cfg.ClientTLS.KeyFile, "key-file", "", "TLS key for --cert-file.")
	fs.StringVar(&cfg.ClientTLS.TrustedCAFile, "trusted-ca-file", "", "CA bundle that client certificates (with --client-cert-auth) and the --join URLs' certificates are verified against.")
	fs.BoolVar(&cfg.ClientTLS.ClientCertAuth, "client-cert-auth", false, "Require clients of the front to present a certificate signed by --trusted-ca-file.")
	fs.StringVar(&cfg.PeerTLS.CertFile, "peer-cert-file", "", "TLS certificate for raft traffic with the voters (https peer URLs), as etcd's --peer-cert-file.")
	fs.StringVar(&cfg.PeerTLS.KeyFile, "peer-key-file", "", "TLS key for --peer-cert-file.")
	fs.StringVar(&cfg.PeerTLS.TrustedCAFile, "peer-trusted-ca-file", "", "CA bundle the voters' peer certificates are verified against, as etcd's --peer-trusted-ca-file.")
	fs.BoolVar(&cfg.PeerTLS.ClientCertAuth, "peer-client-cert-auth", false, "Require peers to present a certificate signed by --peer-trusted-ca-file, as etcd's --peer-client-cert-auth.")
	fs.StringVar(&cfg.User, "user", cfg.User, "User name[:password] the replica's own client logs in with, on an auth-enabled cluster (as etcdctl's --user).")
	fs.StringVar(&cfg.Password, "password", cfg.Password, "Password for --user; prefer UNDERSTUDY_PASSWORD or the config file, which keep it out of `ps`.")
	fs.Int64Var(&cfg.QuotaBackendBytes, "quota-backend-bytes", cfg.QuotaBackendBytes, "Backend quota in bytes, as etcd's. A member over its quota stops writes cluster-wide (NOSPACE), so 0 takes the largest quota any voter reports and a smaller value is refused.")
	fs.DurationVar(&cfg.QuotaCheckInterval, "quota-check-interval", cfg.QuotaCheckInterval, "How often the voters' backend quotas are asked again. Once every voter's is above this learner's, its database would stop the cluster's writes first (NOSPACE), so it stops (started again, it takes the voters' quota); a promoted replica only reports it.")
	fs.UintVar(&cfg.MaxRequestBytes, "max-request-bytes", cfg.MaxRequestBytes, "Maximum client request size in bytes the replica accepts, as etcd's.")
	fs.UintVar(&cfg.MaxTxnOps, "max-txn-ops", cfg.MaxTxnOps, "Maximum number of operations in a transaction, as etcd's.")
	fs.Func("max-concurrent-streams", fmt.Sprintf("Maximum concurrent streams each client can open at a time, as etcd's (default %d).", cfg.MaxConcurrentStreams), func(v string) error {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return fmt.Errorf("want a whole number from 0 to %d", uint32(math.MaxUint32))
		}
		cfg.MaxConcurrentStreams = uint32(n)
		return nil
	})
	fs.DurationVar(&cfg.GRPCKeepAliveMinTime, "grpc-keepalive-min-time", cfg.GRPCKeepAliveMinTime, "Minimum interval a client should wait before pinging the replica, as etcd's.")
	fs.DurationVar(&cfg.GRPCKeepAliveInterval, "grpc-keepalive-interval", cfg.GRPCKeepAliveInterval, "Frequency of server-to-client pings to check a connection is alive, as etcd's.")
	fs.DurationVar(&cfg.GRPCKeepAliveTimeout, "grpc-keepalive-timeout", cfg.GRPCKeepAliveTimeout, "Wait for a ping's answer before closing a non-responsive connection, as etcd's.")
	fs.DurationVar(&cfg.WatchProgressNotifyInterval, "watch-progress-notify-interval", cfg.WatchProgressNotifyInterval, "Period of progress notifications on watches that ask for them, as etcd's.")
	fs.Uint64Var(&cfg.ReadyMaxLag, "ready-max-lag", cfg.ReadyMaxLag, "/readyz fails while the replica's applied index is more than this many entries behind the commit index it knows.")
	fs.DurationVar(&cfg.ReadyMaxStaleness, "ready-max-staleness", cfg.ReadyMaxStaleness, "/readyz fails while the replica's freshness age is above this (0: the larger of 5s and 3 × the slower of --freshness-interval and --freshness-idle-interval).")
	fs.Func("role", "reader (never promotes), voter (promotes itself once caught up) or standby (replaces a voter unreachable for --failover-after). Default reader.", func(s string) error {
		r, err := promotion.ParseRole(s)
		cfg.Promotion.Role = r
		return err
	})
	fs.Uint64Var(&cfg.Promotion.MaxLag, "promote-max-lag", cfg.Promotion.MaxLag, "Promote only within this many entries of the leader's commit index (etcd's own check is 90% of the leader's log, which on a long log is far looser).")
	fs.DurationVar(&cfg.Promotion.Hold, "promote-hold", cfg.Promotion.Hold, "Promote only after being caught up, without a break, for this long.")
	fs.DurationVar(&cfg.Promotion.LeaderContact, "promote-leader-contact", cfg.Promotion.LeaderContact, "Count as caught up only if the leader was heard from within this long.")
	fs.DurationVar(&cfg.Promotion.FailoverAfter, "failover-after", cfg.Promotion.FailoverAfter, "A standby replaces a voter silent for longer than this: none of its peer URLs answers and the leader's raft progress does not show it active (its client URLs are never asked).")
	fs.BoolVar(&cfg.RemoveOnExit, "remove-on-exit", cfg.RemoveOnExit, "On a clean stop, remove this replica's member entry and its data dir (for replicas that come and go).")
	fs.StringVar(&cfg.Zone, "zone", cfg.Zone, "Zone label told to balancers that probe this replica, for zone-affine reads (for example the cloud zone's name).")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "Log level: debug, info, warn or error.")
	fs.StringVar(&cfg.ConfigFile, ConfigFileFlag, "", "Path to a YAML file of settings keyed by flag name. Precedence: flag > UNDERSTUDY_* environment > file > default.")
	return fs
}

// LoadReplica parses args, the environment and any config file into cfg.
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
	}
	if got.Set["listen-peer-urls"] && !got.Set["initial-advertise-peer-urls"] {
		cfg.AdvertisePeerURLs = cfg.ListenPeerURLs
	}
	return err
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
	if len(c.Join) == 0 {
		add("--join: must name at least one client URL of the cluster")
	}
	for _, f := range []struct {
		name string
		urls []string
	}{
		{"join", c.Join},
		{"listen-peer-urls", c.ListenPeerURLs},
		{"initial-advertise-peer-urls", c.AdvertisePeerURLs},
		{"listen-client-urls", c.ListenClientURLs},
		{"advertise-client-urls", c.AdvertiseClientURLs},
		{"listen-metrics-urls", c.ListenMetricsURLs},
		{"read-index-via", c.ReadIndexVia},
	} {
		problems = append(problems, checkURLs(f.name, f.urls)...)
	}
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
	if c.FreshnessInterval <= 0 {
		add("--freshness-interval %v: must be more than 0", c.FreshnessInterval)
	}
	if c.FreshnessIdleInterval < 0 {
		add("--freshness-idle-interval %v: must be 0 (always --freshness-interval) or more", c.FreshnessIdleInterval)
	}
	if c.ReadBatchInterval < 0 || c.ReadBatchInterval > c.FreshnessInterval {
		add("--read-batch-interval %v: must be between 0 and --freshness-interval (%v)", c.ReadBatchInterval, c.FreshnessInterval)
	}
	if c.ReadBatchMaxWait < 0 || c.ReadBatchMaxWait > c.FreshnessInterval {
		add("--read-batch-max-wait %v: must be between 0 and --freshness-interval (%v)", c.ReadBatchMaxWait, c.FreshnessInterval)
	}
	if len(c.ReadIndexVia) > 0 && c.ReadIndexViaTimeout <= 0 {
		add("--read-index-via-timeout %v: must be more than 0", c.ReadIndexViaTimeout)
	}
	for _, u := range c.ReadIndexVia {
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
	} else if slowest := max(c.FreshnessInterval, c.FreshnessIdleInterval); c.ReadyMaxStaleness > 0 && c.ReadyMaxStaleness <= slowest {
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
