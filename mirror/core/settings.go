package core

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Settings are the operator's settings of a mirror: the one definition
// that `replica mirror`'s flags fill (config.Mirror) and that the mirror,
// its drain and its verify run by (mirror.Config, DrainConfig,
// VerifyConfig). Each field names its flag; Validate checks them together,
// once.
type Settings struct {
	// Prefix is the source prefix copied (--prefix; "" is every key).
	Prefix string
	// DestPrefix replaces Prefix in destination keys: --dest-prefix, ""
	// with --no-dest-prefix (keys land at the root), Prefix when neither
	// is given (keys keep their names; config.LoadMirror resolves it).
	DestPrefix string
	// Rev, when there is no checkpoint yet, starts streaming at this
	// source revision without an initial sync (--rev, etcdctl
	// make-mirror's); 0 syncs in full. verify compares at it.
	Rev int64
	// Name identifies the mirror's checkpoint in the destination (--name).
	Name string
	// MaxTxnOps bounds the operations in one destination transaction,
	// checkpoint included (--max-txn-ops); at least MinTxnOps, at most
	// the destination's --max-txn-ops (etcd's default 128).
	MaxTxnOps int
	// MaxRequestBytes is the destination's --max-request-bytes
	// (--max-request-bytes): a transaction's changes are planned to at
	// most three quarters of it (Budget).
	MaxRequestBytes int
	// PageSize is the number of keys read per request in a full sync
	// and in verify (--page-size).
	PageSize int
	// NoLeases writes every key without a lease (--no-leases).
	NoLeases bool
	// Overwrite (--overwrite) lets the mirror copy over destination keys
	// it did not write (it still deletes only keys it wrote); Prune
	// (--prune) makes the image an exact copy of the source. Without
	// either, an initial sync into an image that holds keys the mirror
	// did not write is refused, and such keys are never touched. Policy
	// is the two as one.
	Overwrite, Prune bool
	// ResetPolicy lets a restart run under another Policy than the one
	// its checkpoint records (--reset-policy); without it the restart is
	// refused, naming both.
	ResetPolicy bool
	// Resync syncs in full again at start although the checkpoint says
	// where to resume (--resync): for a source restored behind the
	// checkpoint (from a backup), which the mirror refuses otherwise.
	Resync bool
	// Failback lets the mirror copy back into its source what a drained
	// mirror (the reverse one, its cutover record in this mirror's
	// source) copied from it, taking over the destination's keys that
	// mirror copied (--failback); without it such a mirror is refused
	// (docs/mirror-dr.md).
	Failback bool
	// RequestTimeout bounds every request to either cluster
	// (--command-timeout, etcdctl's name); watches excepted, which gRPC
	// keepalive and progress notifications keep honest.
	RequestTimeout time.Duration
	// StallAfter is how long the mirror may have work to do without
	// committing any before it reports itself stalled, metric and log
	// (--stall-timeout).
	StallAfter time.Duration
	// ProgressInterval is how often an idle mirror asks the source where
	// it is, so that the checkpoint keeps up with revisions it is not
	// sent (--progress-interval).
	ProgressInterval time.Duration
	// CycleCheckInterval is how often, at most, a running mirror reads
	// the mirror checkpoints of both clusters again, before a checkpoint
	// write, to refuse a mirror cycle formed after it started
	// (--cycle-check-interval). The check also runs at start and right
	// after the mirror's first checkpoint.
	CycleCheckInterval time.Duration
	// DrainTimeout bounds a drain (`replica mirror drain`,
	// --drain-timeout): a source that keeps changing under the prefix,
	// or a mirror that does not catch up, for this long fails it.
	DrainTimeout time.Duration
}

// MinTxnOps is the least MaxTxnOps: one change, its ownership checks
// (NestedOps) and the checkpoint.
const MinTxnOps = NestedOps + 2

// DefaultMaxTxnOps and DefaultMaxRequestBytes are etcd's defaults of
// --max-txn-ops and --max-request-bytes, and so the mirror's.
const (
	DefaultMaxTxnOps       = 128
	DefaultMaxRequestBytes = 1536 * 1024
)

// minRequestBytes is the least MaxRequestBytes the mirror plans for.
const minRequestBytes = 64 * 1024

// DefaultSettings are the flags' defaults.
func DefaultSettings() Settings {
	return Settings{
		Name:               "default",
		MaxTxnOps:          DefaultMaxTxnOps,
		MaxRequestBytes:    DefaultMaxRequestBytes,
		PageSize:           1000,
		RequestTimeout:     5 * time.Second,
		StallAfter:         30 * time.Second,
		ProgressInterval:   5 * time.Second,
		CycleCheckInterval: 10 * time.Second,
		DrainTimeout:       30 * time.Second,
	}
}

// Policy is what Overwrite and Prune say the mirror may do to destination
// keys it did not write.
func (s Settings) Policy() Policy {
	switch {
	case s.Prune:
		return Prune
	case s.Overwrite:
		return Overwrite
	}
	return Keep
}

// Validate reports every bad setting at once, each naming its flag.
func (s Settings) Validate() error {
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	if s.Rev < 0 {
		add("--rev %d: must be 0 (initial sync) or a source revision", s.Rev)
	}
	if s.Failback && s.Rev > 0 {
		add("--failback with --rev %d: a failback syncs in full (it takes over the destination's keys); drop --rev", s.Rev)
	}
	if s.Name == "" || strings.ContainsAny(s.Name, "/\x00") {
		add("--name %q: must be non-empty, without '/'", s.Name)
	}
	if s.MaxTxnOps < MinTxnOps {
		add("--max-txn-ops %d: must be at least %d (one change, its ownership checks and the checkpoint), at most the destination's --max-txn-ops", s.MaxTxnOps, MinTxnOps)
	}
	if s.MaxRequestBytes < minRequestBytes {
		add("--max-request-bytes %d: must be at least %d, and the destination's --max-request-bytes (etcd's default %d)", s.MaxRequestBytes, minRequestBytes, DefaultMaxRequestBytes)
	}
	if s.PageSize < 1 {
		add("--page-size %d: must be at least 1", s.PageSize)
	}
	if s.Overwrite && s.Prune {
		add("--overwrite and --prune: give one or neither (--prune overwrites too)")
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"command-timeout", s.RequestTimeout}, {"stall-timeout", s.StallAfter}, {"progress-interval", s.ProgressInterval},
		{"cycle-check-interval", s.CycleCheckInterval}, {"drain-timeout", s.DrainTimeout},
	} {
		if d.v <= 0 {
			add("--%s %v: must be more than 0", d.flag, d.v)
		}
	}
	return errors.Join(problems...)
}
