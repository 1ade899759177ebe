package config

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/understudy-kv/understudy/conn"
)

// MirrorSide is how the mirror reaches one cluster: etcdctl's connection
// flags, each name after the side (--source-cacert, --dest-user).
type MirrorSide = conn.Flags

// Mirror configures `replica mirror`: a watch-based copy of a key prefix
// into another cluster.
type Mirror struct {
	Source, Dest MirrorSide
	// Prefix is the source prefix copied ("" is every key).
	Prefix string
	// DestPrefix replaces Prefix in destination keys. By default keys keep
	// their names; NoDestPrefix strips Prefix (keys land at the root).
	DestPrefix   string
	NoDestPrefix bool
	// Rev, when there is no checkpoint yet, starts streaming at this source
	// revision without an initial sync (etcdctl make-mirror's --rev).
	Rev int64
	// Name identifies the mirror's checkpoint in the destination.
	Name string
	// MaxTxnOps bounds the operations in one destination transaction,
	// checkpoint included; etcd refuses more than its --max-txn-ops (128).
	MaxTxnOps int
	// MaxRequestBytes is the destination's --max-request-bytes: the
	// mirror keeps each transaction well below it.
	MaxRequestBytes int
	// PageSize is the number of keys read per request in a full sync.
	PageSize int
	// NoLeases writes every key without a lease.
	NoLeases bool
	// Overwrite lets the mirror copy over destination keys it did not
	// write (it still deletes only keys it wrote); Prune makes the image an
	// exact copy of the source. Without either, an initial sync into an
	// image that holds keys the mirror did not write is refused, and such
	// keys are never touched.
	Overwrite, Prune bool
	// ResetPolicy lets a restart run under another policy (--overwrite,
	// --prune or neither) than the one its checkpoint records; without it
	// the restart is refused, naming both.
	ResetPolicy bool
	// Resync syncs in full again at start although the checkpoint says
	// where to resume: for a source restored behind the checkpoint (from
	// a backup), which the mirror refuses otherwise.
	Resync bool
	// Failback lets the mirror copy back into its source what a drained
	// mirror (the reverse one, its cutover record in this mirror's source)
	// copied from it, taking over the destination's keys that mirror
	// copied; without it such a mirror is refused (docs/mirror-dr.md).
	Failback bool
	// CommandTimeout bounds every request to either cluster (etcdctl's
	// --command-timeout).
	CommandTimeout time.Duration
	// KeepaliveTime and KeepaliveTimeout are the gRPC keepalive of both
	// clients (etcdctl's --keepalive-time, --keepalive-timeout): a
	// connection that does not answer a ping within the timeout is
	// dropped and dialled again.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// StallTimeout is how long the mirror may have work to do without
	// making progress before it reports itself stalled.
	StallTimeout time.Duration
	// ProgressInterval is how often an idle mirror asks the source where
	// it is, so that the checkpoint keeps up with revisions it is not sent.
	ProgressInterval time.Duration
	// CycleCheckInterval is how often, at most, a running mirror reads
	// the mirror checkpoints of both clusters again (before a checkpoint
	// write) to refuse a mirror cycle formed after it started. The check
	// also runs at start and right after the mirror's first checkpoint.
	CycleCheckInterval time.Duration
	// DrainTimeout bounds `replica mirror drain`: a source that keeps
	// changing under the prefix, or a mirror that does not catch up, for
	// this long makes the drain fail.
	DrainTimeout time.Duration
	// ListenMetricsURLs serve /metrics over plain HTTP.
	ListenMetricsURLs []string
	LogLevel          string
	ConfigFile        string

	// destPrefixSet records that --dest-prefix was given.
	destPrefixSet bool
}

// MirrorMinTxnOps is the least --max-txn-ops: one change, the nested
// compares that keep the mirror off keys it did not write (4), and the
// checkpoint. It equals mirror.MinTxnOps.
const MirrorMinTxnOps = 6

// DefaultMirror mirrors every key, with no source or destination: both are
// given (--source-endpoints, --dest-endpoints), never assumed.
func DefaultMirror() Mirror {
	return Mirror{
		Source:             MirrorSide{Credentials: conn.Credentials{DialTimeout: conn.DefaultDialTimeout}},
		Dest:               MirrorSide{Credentials: conn.Credentials{DialTimeout: conn.DefaultDialTimeout}},
		Name:               "default",
		MaxTxnOps:          128,
		MaxRequestBytes:    1536 * 1024,
		PageSize:           1000,
		ProgressInterval:   5 * time.Second,
		CycleCheckInterval: 10 * time.Second,
		CommandTimeout:     5 * time.Second,
		KeepaliveTime:      10 * time.Second,
		KeepaliveTimeout:   5 * time.Second,
		StallTimeout:       30 * time.Second,
		DrainTimeout:       30 * time.Second,
		LogLevel:           "info",
	}
}

// MappedDestPrefix is the prefix source keys land under.
func (c Mirror) MappedDestPrefix() string {
	switch {
	case c.NoDestPrefix:
		return ""
	case c.destPrefixSet || c.DestPrefix != "":
		return c.DestPrefix
	}
	return c.Prefix
}

func sideFlags(fs *flag.FlagSet, s *MirrorSide, side, what string) {
	fs.Var((*list)(&s.Endpoints), side+"-endpoints", "Client URLs of the "+what+" cluster, comma-separated; required.")
	s.Credentials.Register(fs, side+"-", "the "+what+" cluster's")
}

// NewMirrorFlags registers the mirror's flags, bound to cfg; etcdctl
// make-mirror's names wherever it has the same setting.
func NewMirrorFlags(cfg *Mirror) *flag.FlagSet {
	fs := flag.NewFlagSet("replica mirror", flag.ContinueOnError)
	sideFlags(fs, &cfg.Source, "source", "source")
	sideFlags(fs, &cfg.Dest, "dest", "destination")
	fs.StringVar(&cfg.Prefix, "prefix", cfg.Prefix, "Source key prefix to mirror (default: every key).")
	fs.Func("dest-prefix", "Destination prefix that replaces --prefix in mirrored keys (default: keys keep their names).", func(s string) error {
		cfg.DestPrefix, cfg.destPrefixSet = s, true
		return nil
	})
	fs.BoolVar(&cfg.NoDestPrefix, "no-dest-prefix", cfg.NoDestPrefix, "Strip --prefix: mirrored keys land at the destination's root.")
	fs.Int64Var(&cfg.Rev, "rev", cfg.Rev, "With no checkpoint yet: stream from this source revision on, without an initial sync. A checkpoint, once written, wins.")
	fs.StringVar(&cfg.Name, "name", cfg.Name, "Name of this mirror's checkpoint in the destination (several mirrors may share a destination).")
	fs.IntVar(&cfg.MaxTxnOps, "max-txn-ops", cfg.MaxTxnOps, "Most operations in one destination transaction, checkpoint included; at most the destination's --max-txn-ops (etcd's default 128).")
	fs.IntVar(&cfg.MaxRequestBytes, "max-request-bytes", cfg.MaxRequestBytes, "The destination's --max-request-bytes (etcd's 1.5 MiB): transactions are planned to three quarters of it; a value over half of it cannot be copied (docs/mirror.md).")
	fs.IntVar(&cfg.PageSize, "page-size", cfg.PageSize, "Keys read per request during a full sync.")
	fs.BoolVar(&cfg.NoLeases, "no-leases", cfg.NoLeases, "Write keys without leases (by default a key on a source lease gets a destination lease of the remaining TTL, kept alive while the source lease lives).")
	fs.BoolVar(&cfg.Overwrite, "overwrite", cfg.Overwrite, "Copy the source over destination keys this mirror did not write (it still deletes only keys it wrote). docs/mirror.md.")
	fs.BoolVar(&cfg.Prune, "prune", cfg.Prune, "Make the destination image an exact copy of the source: overwrite, and delete keys the source does not have, whoever wrote them.")
	fs.BoolVar(&cfg.ResetPolicy, "reset-policy", cfg.ResetPolicy, "Run under this invocation's policy (--overwrite, --prune or neither) although the checkpoint records another; without it such a restart is refused, naming both.")
	fs.BoolVar(&cfg.Resync, "resync", cfg.Resync, "Sync in full again though the checkpoint says where to resume: for a source restored from a backup behind it, otherwise refused (docs/mirror.md).")
	fs.BoolVar(&cfg.Failback, "failback", cfg.Failback, "Fail back after a switchover: copy into the destination although the drained reverse mirror copied it there, taking over its keys (docs/mirror-dr.md).")
	fs.DurationVar(&cfg.CommandTimeout, "command-timeout", cfg.CommandTimeout, "Timeout of each request to either cluster; a request that times out is retried with backoff.")
	fs.DurationVar(&cfg.KeepaliveTime, "keepalive-time", cfg.KeepaliveTime, "gRPC keepalive time of both clients (gRPC's least is 10s).")
	fs.DurationVar(&cfg.KeepaliveTimeout, "keepalive-timeout", cfg.KeepaliveTimeout, "gRPC keepalive timeout of both clients: a connection silent this long after a ping is dialled again.")
	fs.DurationVar(&cfg.StallTimeout, "stall-timeout", cfg.StallTimeout, "Report the mirror stalled (understudy_mirror_stalled 1, and a log line) once it has had work to do this long without making progress.")
	fs.DurationVar(&cfg.ProgressInterval, "progress-interval", cfg.ProgressInterval, "How often an idle mirror asks the source for its revision, to move the checkpoint on.")
	fs.DurationVar(&cfg.CycleCheckInterval, "cycle-check-interval", cfg.CycleCheckInterval, "How often, at most, a running mirror reads the mirror checkpoints of both clusters again to refuse a mirror cycle (mirrors that feed each other) formed after it started; it also checks at start.")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", cfg.DrainTimeout, "replica mirror drain: give up (exit 1, saying why) if the destination does not hold every source revision with the prefix quiet within this long, e.g. because writers keep changing the source.")
	fs.Var((*list)(&cfg.ListenMetricsURLs), "listen-metrics-urls", "URLs to serve /metrics on (plain HTTP).")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "Log level: debug, info, warn or error.")
	fs.StringVar(&cfg.ConfigFile, ConfigFileFlag, "", "Path to a YAML file of settings keyed by flag name. Precedence: flag > UNDERSTUDY_* environment > file > default.")
	return fs
}

// LoadMirror parses args, the environment and any config file into cfg.
func LoadMirror(cfg *Mirror, fs *flag.FlagSet, args []string) error {
	_, err := loadFlagsOnly(fs, args, nil)
	return err
}

// Validate reports every problem at once, each naming its flag.
func (c Mirror) Validate() error {
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	for _, s := range []struct {
		side, what string
		v          MirrorSide
	}{{"source", "source", c.Source}, {"dest", "destination", c.Dest}} {
		if len(s.v.Endpoints) == 0 {
			add("--%s-endpoints: required: the client URLs of the %s cluster (there is no default)", s.side, s.what)
		}
		problems = append(problems, checkURLs(s.side+"-endpoints", s.v.Endpoints)...)
		if err := s.v.Credentials.Validate(s.side + "-"); err != nil {
			problems = append(problems, err)
		}
	}
	if c.NoDestPrefix && (c.destPrefixSet || c.DestPrefix != "") {
		add("--dest-prefix %q and --no-dest-prefix: give one or neither", c.DestPrefix)
	}
	if c.Rev < 0 {
		add("--rev %d: must be 0 (initial sync) or a source revision", c.Rev)
	}
	if c.Failback && c.Rev > 0 {
		add("--failback with --rev %d: a failback syncs in full (it takes over the destination's keys); drop --rev", c.Rev)
	}
	if c.Name == "" || strings.ContainsAny(c.Name, "/\x00") {
		add("--name %q: must be non-empty, without '/'", c.Name)
	}
	if c.MaxTxnOps < MirrorMinTxnOps {
		add("--max-txn-ops %d: must be at least %d (one change, its ownership checks and the checkpoint), at most the destination's --max-txn-ops", c.MaxTxnOps, MirrorMinTxnOps)
	}
	if c.MaxRequestBytes < 64*1024 {
		add("--max-request-bytes %d: must be at least 65536, and the destination's --max-request-bytes (etcd's default 1572864)", c.MaxRequestBytes)
	}
	if c.Overwrite && c.Prune {
		add("--overwrite and --prune: give one or neither (--prune overwrites too)")
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"command-timeout", c.CommandTimeout}, {"keepalive-time", c.KeepaliveTime}, {"keepalive-timeout", c.KeepaliveTimeout}, {"stall-timeout", c.StallTimeout}, {"drain-timeout", c.DrainTimeout}} {
		if d.v <= 0 {
			add("--%s %v: must be more than 0", d.flag, d.v)
		}
	}
	if c.PageSize < 1 {
		add("--page-size %d: must be at least 1", c.PageSize)
	}
	if c.ProgressInterval <= 0 {
		add("--progress-interval %v: must be more than 0", c.ProgressInterval)
	}
	if c.CycleCheckInterval <= 0 {
		add("--cycle-check-interval %v: must be more than 0", c.CycleCheckInterval)
	}
	problems = append(problems, checkURLs("listen-metrics-urls", c.ListenMetricsURLs)...)
	problems = append(problems, checkPlainHTTP("listen-metrics-urls", c.ListenMetricsURLs)...)
	if err := checkLogLevel(c.LogLevel); err != nil {
		problems = append(problems, err)
	}
	return errors.Join(problems...)
}
