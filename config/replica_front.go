package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/understudy-kv/understudy/readindex"
	"github.com/understudy-kv/understudy/wire"
)

// Front is what every replica has, whatever feeds it: its name and data
// dir, the etcd-compatible gRPC server clients talk to (understudy's own
// front, package readpath), its freshness rounds and readiness, and the
// client side it uses towards its cluster (--join or --upstream).
type Front struct {
	// Name is the member name (a cascaded replica's, in its announcement
	// and logs); it must be unique in the cluster.
	Name string
	// DataDir holds the replica's data: a learner replica's embedded
	// member, or a cascaded replica's store. A data dir that already holds
	// a member means "restart as that member": nothing is added.
	DataDir string
	// ListenClientURLs and AdvertiseClientURLs are the replica's front: the
	// gRPC server clients talk to. AdvertiseClientURLs is what `member list`
	// shows for the replica; LoadReplica takes --listen-client-urls for them
	// when only those are given.
	ListenClientURLs    []string
	AdvertiseClientURLs []string
	// clientAdvertiseDerived records that the advertised URLs were taken
	// from the listen URLs (LoadReplica): an unspecified address there
	// then needs the advertise flag.
	clientAdvertiseDerived bool
	// ListenMetricsURLs serve /metrics and /health over plain HTTP.
	ListenMetricsURLs []string

	// JoinTimeout bounds the first start: if a learner has not caught up
	// by then, the replica removes the member entry it added and exits; a
	// cascaded replica's first bootstrap must succeed within it.
	JoinTimeout time.Duration
	// MaxStaleness is the staleness bound applied to serializable reads that
	// carry no bound of their own; 0 serves them from the local store as is.
	MaxStaleness time.Duration
	// ReadIndex are the ReadIndex machinery's settings: freshness rounds
	// (--freshness-interval, --freshness-idle-interval,
	// --freshness-quiet-interval), their batching (--read-batch-interval,
	// --read-batch-max-wait) and rounds through hubs (--read-index-via,
	// --read-index-via-timeout, --read-index-via-in-flight, a learner
	// replica's only); defined, and validated, in package readindex.
	ReadIndex readindex.Settings

	// ClientTLS secures the front on https client URLs (etcd's --cert-file,
	// --key-file, --trusted-ca-file, --client-cert-auth); its certificate
	// and CA are also what the replica uses towards the --join (or
	// --upstream) URLs.
	ClientTLS TLS
	// TLSVersions bound every TLS connection of the replica, both sides.
	TLSVersions TLSVersions

	// User and Password log the replica's own client (joining, status,
	// membership changes; a cascaded replica's copy of its upstreams) in to
	// an auth-enabled cluster, as etcdctl's --user ("name" or
	// "name:password") and --password. Keep the password out of `ps` with
	// UNDERSTUDY_PASSWORD or the config file.
	User, Password string

	// MaxRequestBytes, MaxTxnOps and MaxConcurrentStreams limit the front's
	// clients, as etcd's flags of the same names limit a voter's, whatever
	// feeds the replica: a learner replica's are its embedded member's; a
	// cascaded replica's front takes no larger request than
	// MaxRequestBytes, though its store applies the source's revisions
	// whatever their size (package cascade).
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

// DefaultFront is a front on 127.0.0.1:2479, beside a default etcd or
// primary on 2379.
func DefaultFront() Front {
	return Front{
		Name:                        "replica",
		DataDir:                     "replica.replica",
		ListenClientURLs:            []string{"http://127.0.0.1:2479"},
		AdvertiseClientURLs:         []string{"http://127.0.0.1:2479"},
		JoinTimeout:                 2 * time.Minute,
		ReadIndex:                   readindex.DefaultSettings(),
		LogLevel:                    "info",
		FreshnessHeaders:            wire.HeadersOnRequest,
		TLSVersions:                 DefaultTLSVersions(),
		MaxRequestBytes:             embed.DefaultMaxRequestBytes,
		MaxTxnOps:                   embed.DefaultMaxTxnOps,
		MaxConcurrentStreams:        embed.DefaultMaxConcurrentStreams,
		GRPCKeepAliveMinTime:        embed.DefaultGRPCKeepAliveMinTime,
		GRPCKeepAliveInterval:       embed.DefaultGRPCKeepAliveInterval,
		GRPCKeepAliveTimeout:        embed.DefaultGRPCKeepAliveTimeout,
		WatchProgressNotifyInterval: 10 * time.Minute, // etcd's
		ReadyMaxLag:                 1000,
	}
}

// ReadyStaleness is the effective --ready-max-staleness.
func (c Front) ReadyStaleness() time.Duration {
	if c.ReadyMaxStaleness > 0 {
		return c.ReadyMaxStaleness
	}
	return max(5*time.Second, 3*c.ReadIndex.Slowest())
}

// Credentials splits --user and --password as etcdctl does: "name:password"
// in --user, or the password in --password.
func (c Front) Credentials() (user, password string) {
	if name, pw, ok := strings.Cut(c.User, ":"); ok && c.Password == "" {
		return name, pw
	}
	return c.User, c.Password
}

// QuietInterval is the --freshness-quiet-interval in force (see
// readindex.Settings.Quiet).
func (c Front) QuietInterval() time.Duration { return c.ReadIndex.Quiet() }

// Validate reports every problem of the front's settings at once, each
// naming its flag.
func (c Front) Validate() error {
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	if c.Name == "" {
		add("--name: must not be empty")
	}
	if c.DataDir == "" {
		add("--data-dir: must not be empty")
	}
	for _, f := range []struct {
		name string
		urls []string
	}{
		{"listen-client-urls", c.ListenClientURLs},
		{"advertise-client-urls", given(c.AdvertiseClientURLs, !c.clientAdvertiseDerived)},
		{"listen-metrics-urls", c.ListenMetricsURLs},
		{"read-index-via", c.ReadIndex.ViaURLs},
	} {
		problems = append(problems, checkURLs(f.name, f.urls)...)
	}
	problems = append(problems, checkPlainHTTP("listen-metrics-urls", c.ListenMetricsURLs)...)
	problems = append(problems, checkAdvertised("listen-client-urls", "advertise-client-urls", c.AdvertiseClientURLs, c.clientAdvertiseDerived)...)
	if len(c.ListenClientURLs) == 0 {
		add("--listen-client-urls: must name at least one URL")
	}
	if c.JoinTimeout <= 0 {
		add("--join-timeout %v: must be more than 0", c.JoinTimeout)
	}
	if c.MaxStaleness < 0 {
		add("--max-staleness %v: must be 0 (no bound) or more", c.MaxStaleness)
	}
	if c.MaxRequestBytes == 0 {
		add("--max-request-bytes 0: must be more than 0 (etcd's default %d)", uint(embed.DefaultMaxRequestBytes))
	}
	if c.MaxTxnOps == 0 {
		add("--max-txn-ops 0: must be more than 0 (etcd's default %d)", embed.DefaultMaxTxnOps)
	}
	if err := c.ReadIndex.Validate(); err != nil {
		problems = append(problems, err)
	}
	for _, u := range c.ReadIndex.ViaURLs {
		if slices.Contains(c.AdvertiseClientURLs, u) || slices.Contains(c.ListenClientURLs, u) {
			add("--read-index-via %s: is this replica's own client URL; name other replicas of the cluster", u)
		}
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
	problems = append(problems, checkTLS("", "--listen-client-urls and --advertise-client-urls", c.ClientTLS, append(slices.Clone(c.ListenClientURLs), c.AdvertiseClientURLs...))...)
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
