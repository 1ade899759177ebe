package config

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/understudy-kv/understudy/conn"
	"github.com/understudy-kv/understudy/mirror/core"
)

// MirrorSide is how the mirror reaches one cluster: etcdctl's connection
// flags, each name after the side (--source-cacert, --dest-user).
type MirrorSide = conn.Flags

// Mirror configures `replica mirror`: a watch-based copy of a key prefix
// into another cluster. The mirror's own settings are core.Settings, the
// one definition package mirror runs by; the rest is how to reach the two
// clusters and what the command around the mirror does.
type Mirror struct {
	Source, Dest MirrorSide
	// Settings are the mirror's (package mirror/core): prefix and name,
	// transaction limits, policy, timeouts. Each field names its flag.
	core.Settings
	// NoDestPrefix (--no-dest-prefix) strips Prefix: keys land at the
	// destination's root. LoadMirror sets DestPrefix from --dest-prefix,
	// else from NoDestPrefix, else to Prefix (keys keep their names).
	NoDestPrefix bool
	// KeepaliveTime and KeepaliveTimeout are the gRPC keepalive of both
	// clients (etcdctl's --keepalive-time, --keepalive-timeout): a
	// connection that does not answer a ping within the timeout is
	// dropped and dialled again.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// ListenMetricsURLs serve /metrics over plain HTTP.
	ListenMetricsURLs []string
	LogLevel          string
	ConfigFile        string

	// destPrefixSet records that --dest-prefix was given.
	destPrefixSet bool
}

// DefaultMirror mirrors every key, with no source or destination: both are
// given (--source-endpoints, --dest-endpoints), never assumed.
func DefaultMirror() Mirror {
	return Mirror{
		Source:           MirrorSide{Credentials: conn.Credentials{DialTimeout: conn.DefaultDialTimeout}},
		Dest:             MirrorSide{Credentials: conn.Credentials{DialTimeout: conn.DefaultDialTimeout}},
		Settings:         core.DefaultSettings(),
		KeepaliveTime:    10 * time.Second,
		KeepaliveTimeout: 5 * time.Second,
		LogLevel:         "info",
	}
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
		cfg.DestPrefix = s
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
	fs.DurationVar(&cfg.RequestTimeout, "command-timeout", cfg.RequestTimeout, "Timeout of each request to either cluster; a request that times out is retried with backoff.")
	fs.DurationVar(&cfg.KeepaliveTime, "keepalive-time", cfg.KeepaliveTime, "gRPC keepalive time of both clients (gRPC's least is 10s).")
	fs.DurationVar(&cfg.KeepaliveTimeout, "keepalive-timeout", cfg.KeepaliveTimeout, "gRPC keepalive timeout of both clients: a connection silent this long after a ping is dialled again.")
	fs.DurationVar(&cfg.StallAfter, "stall-timeout", cfg.StallAfter, "Report the mirror stalled (understudy_mirror_stalled 1, and a log line) once it has had work to do this long without making progress.")
	fs.DurationVar(&cfg.ProgressInterval, "progress-interval", cfg.ProgressInterval, "How often an idle mirror asks the source for its revision, to move the checkpoint on.")
	fs.DurationVar(&cfg.CycleCheckInterval, "cycle-check-interval", cfg.CycleCheckInterval, "How often, at most, a running mirror reads the mirror checkpoints of both clusters again to refuse a mirror cycle (mirrors that feed each other) formed after it started; it also checks at start.")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", cfg.DrainTimeout, "replica mirror drain: give up (exit 1, saying why) if the destination does not hold every source revision with the prefix quiet within this long, e.g. because writers keep changing the source.")
	fs.Var((*list)(&cfg.ListenMetricsURLs), "listen-metrics-urls", "URLs to serve /metrics on (plain HTTP).")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "Log level: debug, info, warn or error.")
	fs.StringVar(&cfg.ConfigFile, ConfigFileFlag, "", "Path to a YAML file of settings keyed by flag name. Precedence: flag > UNDERSTUDY_* environment > file > default.")
	return fs
}

// LoadMirror parses args, the environment and any config file into cfg,
// and resolves DestPrefix: --dest-prefix as given, "" with
// --no-dest-prefix, else Prefix.
func LoadMirror(cfg *Mirror, fs *flag.FlagSet, args []string) error {
	got, err := loadFlagsOnly(fs, args, nil)
	if errors.Is(err, ErrHelp) {
		return err
	}
	cfg.destPrefixSet = got.Set["dest-prefix"]
	switch {
	case cfg.destPrefixSet:
	case cfg.NoDestPrefix:
		cfg.DestPrefix = ""
	default:
		cfg.DestPrefix = cfg.Prefix
	}
	return err
}

// Validate reports every problem at once, each naming its flag: the
// mirror's settings' (core.Settings.Validate) and the command's.
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
	if c.NoDestPrefix && c.destPrefixSet {
		add("--dest-prefix %q and --no-dest-prefix: give one or neither", c.DestPrefix)
	}
	if err := c.Settings.Validate(); err != nil {
		problems = append(problems, err)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"keepalive-time", c.KeepaliveTime}, {"keepalive-timeout", c.KeepaliveTimeout}} {
		if d.v <= 0 {
			add("--%s %v: must be more than 0", d.flag, d.v)
		}
	}
	problems = append(problems, checkURLs("listen-metrics-urls", c.ListenMetricsURLs)...)
	problems = append(problems, checkPlainHTTP("listen-metrics-urls", c.ListenMetricsURLs)...)
	if err := checkLogLevel(c.LogLevel); err != nil {
		problems = append(problems, err)
	}
	return errors.Join(problems...)
}
