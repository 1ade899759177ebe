package mirror

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Config configures a mirror. The clients are the caller's.
type Config struct {
	Source, Dest *clientv3.Client
	// Prefix is copied from the source; its keys land under DestPrefix.
	Prefix, DestPrefix string
	// Rev, with no checkpoint yet, streams from this source revision on
	// without an initial sync.
	Rev int64
	// Name identifies the checkpoint.
	Name string
	// MaxTxnOps bounds one destination transaction, checkpoint included.
	MaxTxnOps int
	// MaxRequestBytes is the destination's --max-request-bytes: a
	// transaction's changes are planned to at most three quarters of it
	// (core.Budget). 0 means etcd's default, 1.5 MiB.
	MaxRequestBytes int
	// PageSize is the number of keys per read in a full sync.
	PageSize int
	// NoLeases writes keys without leases.
	NoLeases bool
	// Policy says what the mirror may do to destination keys it did not
	// write (see Policy). Under Keep, an initial sync into an image that
	// holds keys the mirror did not write is refused.
	Policy Policy
	// ResetPolicy lets a restart write under a Policy other than the one
	// its checkpoint records; without it such a restart is refused.
	ResetPolicy bool
	// Resync syncs in full again at start although a checkpoint says
	// where to resume: for a source restored behind the checkpoint, which
	// the mirror otherwise refuses.
	Resync bool
	// RequestTimeout bounds every request to either cluster (watches
	// excepted: they are kept honest by gRPC keepalive and progress
	// notifications).
	RequestTimeout time.Duration
	// StallAfter is how long the mirror may have work to do without
	// committing any before it reports itself stalled (metric and log).
	StallAfter time.Duration
	// ProgressInterval is how often an idle mirror moves its checkpoint.
	ProgressInterval time.Duration
	// CycleCheckInterval is how often, at most, the mirror reads the
	// checkpoints of both clusters again, before a checkpoint write, to
	// refuse a mirror cycle that formed while it runs (see cycle.go).
	CycleCheckInterval time.Duration
	// CopyMirrored copies source keys that another mirror wrote into the
	// source (its checkpoint is in the source and its ownership record
	// says it wrote the key's version). False, the default, leaves them
	// out: copying another mirror's copy on is how mirror cycles start.
	// A failback sets Failback instead, which copies only the keys of
	// the mirror it fails back from.
	CopyMirrored bool
	// Failback (--failback) lets the mirror copy back into its source
	// what a drained mirror copied from it (see failback.go): that mirror
	// is left out of the cycle check and its keys are copied, and the
	// destination's keys it copied are taken over. Without it such a
	// mirror is refused, naming that mirror's records.
	Failback bool
	// Clock drives the mirror's decisions and waits (checkpoint and commit
	// times, the progress cadence, backoff, the stall watchdog, the
	// cycle-check interval, the lag metrics, the list of the source's live
	// leases, the wait for a watch to be created); nil is the real clock.
	// Request timeouts are contexts, on the real clock.
	Clock clockwork.Clock
	// Progress, if not nil, is told of a full sync's progress.
	Progress func(copied, total int64)
	Logger   *zap.Logger
	// Registerer receives the metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

// Validate reports every missing or bad field.
func (c Config) Validate() error {
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf("mirror: "+format, a...)) }
	if c.Source == nil || c.Dest == nil {
		add("Source and Dest clients are required")
	}
	if c.Name == "" || strings.ContainsAny(c.Name, "/\x00") {
		add("Name %q: must be non-empty, without '/'", c.Name)
	}
	if c.MaxTxnOps < MinTxnOps {
		add("MaxTxnOps %d: must be at least %d", c.MaxTxnOps, MinTxnOps)
	}
	if c.PageSize < 1 {
		add("PageSize %d: must be at least 1", c.PageSize)
	}
	if c.MaxRequestBytes < 0 {
		add("MaxRequestBytes %d: must be 0 (etcd's default) or more", c.MaxRequestBytes)
	}
	if c.ProgressInterval <= 0 {
		add("ProgressInterval %v: must be more than 0", c.ProgressInterval)
	}
	if c.RequestTimeout <= 0 {
		add("RequestTimeout %v: must be more than 0", c.RequestTimeout)
	}
	if c.StallAfter <= 0 {
		add("StallAfter %v: must be more than 0", c.StallAfter)
	}
	if c.CycleCheckInterval <= 0 {
		add("CycleCheckInterval %v: must be more than 0", c.CycleCheckInterval)
	}
	if c.Policy < Keep || c.Policy > Prune {
		add("Policy %d: must be Keep, Overwrite or Prune", c.Policy)
	}
	if c.Failback && c.Rev > 0 {
		add("Failback with Rev %d: a failback syncs in full (it takes over the destination's keys); drop --rev", c.Rev)
	}
	if c.Logger == nil {
		add("Logger is required")
	}
	return errors.Join(problems...)
}

// MinTxnOps is the least MaxTxnOps: one change, its ownership checks
// (nestedOps) and the checkpoint.
const MinTxnOps = nestedOps + 2
