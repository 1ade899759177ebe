package mirror

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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
	// PageSize is the number of keys per read in a full sync.
	PageSize int
	// NoLeases writes keys without leases.
	NoLeases bool
	// ProgressInterval is how often an idle mirror moves its checkpoint.
	ProgressInterval time.Duration
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
	if c.MaxTxnOps < 2 {
		add("MaxTxnOps %d: must be at least 2", c.MaxTxnOps)
	}
	if c.PageSize < 1 {
		add("PageSize %d: must be at least 1", c.PageSize)
	}
	if c.ProgressInterval <= 0 {
		add("ProgressInterval %v: must be more than 0", c.ProgressInterval)
	}
	if c.Logger == nil {
		add("Logger is required")
	}
	return errors.Join(problems...)
}

// ErrRefused wraps the reasons a mirror will not start: they need an
// operator, not a retry.
var ErrRefused = errors.New("mirror: refused")

// errCompacted means the source no longer has the revisions the mirror
// needs: it must sync in full.
var errCompacted = errors.New("mirror: the source compacted past the checkpoint")

// errFenced means someone else wrote the checkpoint.
var errFenced = errors.New("mirror: the checkpoint changed under the mirror: another mirror with the same --name is writing to this destination")

// mirror is one running mirror; its loop is its only goroutine besides
// the lease keeper.
type mirror struct {
	cfg       Config
	lg        *zap.Logger
	m         *metrics
	sourceID  string
	cp        *Checkpoint
	cpModRev  int64 // the checkpoint's ModRevision in the destination; 0 if none
	cpKey     string
	leases    *leases
	sourceRev func() int64
}

// Run mirrors until ctx ends; it returns nil then. It returns an error
// wrapping ErrRefused when the destination or the pair of clusters is not
// one it may write (another source's checkpoint, the same cluster with
// overlapping prefixes), and errFenced-like errors when another mirror
// with the same name writes the checkpoint.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	mr := &mirror{cfg: cfg, lg: cfg.Logger, m: newMetrics(cfg.Registerer), cpKey: CheckpointKey(cfg.Name)}
	if err := mr.preflight(ctx); err != nil {
		return err
	}
	if !cfg.NoLeases {
		mr.leases = newLeases(cfg.Source, cfg.Dest, leaseKeyPrefix(cfg.Name), mr.lg)
		if err := mr.leases.load(ctx); err != nil {
			return err
		}
		done := make(chan struct{})
		lctx, cancel := context.WithCancel(ctx)
		go func() { defer close(done); mr.leases.keepAlive(lctx) }()
		defer func() { cancel(); <-done }()
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := mr.step(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errFenced):
			return err
		case errors.Is(err, errCompacted):
			mr.lg.Warn("the source compacted past the checkpoint; syncing in full again, with deletes", zap.Int64("checkpoint", mr.cp.Revision))
			mr.m.resyncs.Inc()
			next := *mr.cp
			next.Phase, next.Revision, next.SyncedThrough, next.From = PhaseSync, 0, "", 0
			next.Resyncs++
			mr.cp = &next // written with the first page of the new sync
			backoff = 100 * time.Millisecond
			continue
		case err != nil:
			mr.lg.Warn("mirror interrupted; resuming from the checkpoint", zap.Error(err), zap.Duration("after", backoff))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			// The write may or may not have landed: the checkpoint says.
			if err := mr.reload(ctx); err != nil && ctx.Err() == nil {
				mr.lg.Warn("cannot read the checkpoint", zap.Error(err))
			}
			continue
		}
		backoff = 100 * time.Millisecond
	}
	return nil
}

// step does the next phase from the checkpoint: a full sync, then streaming.
func (mr *mirror) step(ctx context.Context) error {
	if mr.cp == nil || mr.cp.Phase == PhaseSync {
		if err := mr.sync(ctx); err != nil {
			return err
		}
	}
	return mr.stream(ctx)
}

// reload reads the checkpoint back after an interrupted write.
func (mr *mirror) reload(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cp, modRev, err := ReadCheckpoint(rctx, mr.cfg.Dest, mr.cfg.Name)
	if err != nil {
		return err
	}
	if cp != nil {
		mr.cp, mr.cpModRev = cp, modRev
	}
	return nil
}

// commit writes ops and the next checkpoint in one transaction, only if
// the checkpoint is still the one this mirror last wrote.
func (mr *mirror) commit(ctx context.Context, ops []clientv3.Op, next Checkpoint) error {
	next.Updated = time.Now().UTC()
	cmp := clientv3.Compare(clientv3.ModRevision(mr.cpKey), "=", mr.cpModRev)
	resp, err := mr.cfg.Dest.Txn(ctx).If(cmp).Then(append(ops, clientv3.OpPut(mr.cpKey, next.encode()))...).Commit()
	if err != nil {
		return fmt.Errorf("mirror: destination transaction: %w", err)
	}
	if !resp.Succeeded {
		return errFenced
	}
	mr.cp, mr.cpModRev = &next, resp.Header.Revision
	mr.m.txns.Inc()
	return nil
}

// mapKey is a source key's name in the destination.
func (mr *mirror) mapKey(k []byte) string {
	return mr.cfg.DestPrefix + strings.TrimPrefix(string(k), mr.cfg.Prefix)
}

// unmapKey is a destination key's name in the source.
func (mr *mirror) unmapKey(k []byte) string {
	return mr.cfg.Prefix + strings.TrimPrefix(string(k), mr.cfg.DestPrefix)
}

// fresh is a checkpoint of this mirror with nothing applied yet.
func (mr *mirror) fresh() Checkpoint {
	return Checkpoint{SourceClusterID: mr.sourceID, SourcePrefix: mr.cfg.Prefix, DestPrefix: mr.cfg.DestPrefix}
}

// span is the key range of a prefix: key and range end, the whole
// keyspace for "".
func span(prefix string) (key, end string) {
	if prefix == "" {
		return "\x00", "\x00"
	}
	return prefix, clientv3.GetPrefixRangeEnd(prefix)
}

// reserved reports the mirrors' own keys, never copied, deleted or
// compared.
func reserved(k []byte) bool { return strings.HasPrefix(string(k), ReservedPrefix) }
