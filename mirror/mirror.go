package mirror

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/understudy-kv/understudy/mirror/core"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

var (
	// ErrRefused wraps the reasons a mirror will not start: they need an
	// operator, not a retry.
	ErrRefused = errors.New("mirror: refused")

	// errCompacted means the source no longer has the revisions the
	// mirror needs: it must sync in full.
	errCompacted = errors.New("mirror: the source compacted past the checkpoint")

	// errFenced means another process wrote the checkpoint.
	errFenced = errors.New("mirror: the checkpoint changed under the mirror: another mirror with the same --name is writing to this destination")

	// errLanded means a write whose outcome the mirror did not learn did
	// land (the checkpoint carries its token): resume from it.
	errLanded = errors.New("mirror: an earlier write of this mirror landed after all; resuming from it")
)

// mirror is one running mirror. Its loop (Run) is the only writer of the
// destination's mirrored keys; the lease keeper and the stall watchdog are
// its other goroutines.
type mirror struct {
	cfg       Config
	lg        *zap.Logger
	clock     clockwork.Clock
	m         *metrics
	sourceID  string
	destID    string
	cp        *Checkpoint
	cpModRev  int64 // the checkpoint's ModRevision in the destination; 0 if none
	cpKey     string
	ownPrefix string
	// token is this process's mark in the checkpoints it writes.
	token string
	// noneOwned: with no checkpoint, the destination has no ownership
	// record of this mirror either (a first sync has nothing to sweep).
	noneOwned bool
	leases    *leases

	// Cycles (cyclecheck.go): feeders are the mirrors writing into the
	// source under the prefix, as of source revision feedersRev;
	// sourceHidden that the source's checkpoints cannot be read; claimRev
	// the revision of this mirror's first checkpoint write, before
	// anything was copied; cycleDue that the check must run before the
	// next write.
	feeders    []link
	feedersRev int64
	// links follows the source's mirror checkpoints while the mirror
	// watches the source (links.go), or nil.
	links        *linkFollower
	sourceHidden bool
	claimRev     int64
	cycleDue     bool
	checkedAt    time.Time

	// failback is what preflight decided about a failback (failback.go).
	failback failbackPlan
}

// Run mirrors until ctx ends; it returns nil then. It returns an error
// wrapping ErrRefused when the destination or the pair of clusters is not
// one it may write (another mirror's image, keys it did not write under
// Keep, the same cluster with overlapping prefixes, a mirror cycle, at
// start or found later), and an error wrapping
// errFenced when another process writes its checkpoint.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	clock := cfg.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	mr := &mirror{cfg: cfg, lg: cfg.Logger, clock: clock, m: newMetrics(cfg.Registerer, clock), cpKey: CheckpointKey(cfg.Name),
		ownPrefix: ownPrefix(cfg.Name), token: newToken()}
	if err := mr.preflight(ctx); err != nil {
		return err
	}
	if change, err := mr.checkPolicy(); err != nil {
		return err
	} else if change != policySame {
		if err := mr.writePolicy(ctx); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer func() { cancel(); wg.Wait() }()
	wg.Add(1)
	go func() { defer wg.Done(); mr.watchdog(ctx) }()
	if !cfg.NoLeases {
		mr.leases = newLeases(cfg.Source, cfg.Dest, leaseKeyPrefix(cfg.Name), cfg.RequestTimeout, mr.lg, mr.m)
		defer mr.leases.close()
		if err := mr.retry(ctx, "reading the lease mappings", mr.leases.load); err != nil {
			return nil // ctx ended
		}
		wg.Add(1)
		go func() { defer wg.Done(); mr.leases.watchSource(ctx) }()
	}
	return mr.loop(ctx)
}

// loop runs steps until ctx ends or one is fatal, reacting to each
// step's outcome as core.React says.
func (mr *mirror) loop(ctx context.Context) error {
	backoff := mr.newBackoff()
	for ctx.Err() == nil {
		err := mr.step(ctx)
		if ctx.Err() != nil {
			return nil
		}
		switch core.React(outcome(err)) {
		case core.Stop:
			return err
		case core.SyncAgain:
			mr.lg.Warn("the source compacted past the checkpoint; syncing in full again", zap.Int64("checkpoint", mr.cp.Revision))
			mr.m.resyncs.Inc()
			next := core.Resync(*mr.cp)
			mr.cp = &next // written with the first page of the new sync
			backoff.Reset()
		case core.Retry:
		case core.BackOff:
			mr.m.failing(err)
			d := backoff.Next()
			mr.lg.Warn("mirror interrupted; resuming from the checkpoint", zap.Error(err), zap.Duration("after", d))
			select {
			case <-ctx.Done():
				return nil
			case <-mr.clock.After(d):
			}
			// The write may or may not have landed: the checkpoint says.
			if err := mr.reload(ctx); errors.Is(err, errFenced) {
				return err
			} else if err != nil && ctx.Err() == nil {
				mr.lg.Warn("cannot read the checkpoint", zap.Error(err))
			}
		default:
			backoff.Reset()
		}
	}
	return nil
}

// outcome classifies a step's error for core.React.
func outcome(err error) core.Outcome {
	switch {
	case err == nil:
		return core.Done
	case errors.Is(err, errFenced), errors.Is(err, ErrRefused):
		return core.Fatal
	case errors.Is(err, errCompacted):
		return core.Compacted
	case errors.Is(err, errLanded):
		return core.Landed
	}
	return core.Failed
}

// step does the next phase from the checkpoint: a full sync, then streaming.
func (mr *mirror) step(ctx context.Context) error {
	if err := mr.checkSource(ctx); err != nil {
		return err
	}
	step := core.NextStep(mr.cp, mr.failback.adopt)
	if step == core.StepAdopt {
		return mr.adopt(ctx)
	}
	var w *sourceWatch
	if step == core.StepSync {
		var err error
		if w, err = mr.sync(ctx); err != nil {
			return err
		}
	}
	return mr.stream(ctx, w)
}

// retry calls f until it succeeds or ctx ends, backing off between tries.
func (mr *mirror) retry(ctx context.Context, what string, f func(context.Context) error) error {
	b := mr.newBackoff()
	for {
		rctx, cancel := context.WithTimeout(ctx, mr.cfg.RequestTimeout)
		err := f(rctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
		mr.m.failing(err)
		d := b.Next()
		mr.lg.Warn(what, zap.Error(err), zap.Duration("retry-after", d))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-mr.clock.After(d):
		}
	}
}

// reload reads the checkpoint back after an interrupted write: an
// unchanged one, or one this process wrote, is resumed from; one another
// process wrote fences this one off.
func (mr *mirror) reload(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, mr.cfg.RequestTimeout)
	defer cancel()
	cp, modRev, err := ReadCheckpoint(rctx, mr.cfg.Dest, mr.cfg.Name)
	if err != nil {
		return err
	}
	switch {
	case modRev == mr.cpModRev:
	case cp != nil && modRev < mr.cpModRev:
		// A destination's revisions never go back but by a restore: it
		// was restored from a backup behind this mirror's last write. Its
		// keys and this checkpoint were written together, so the mirror
		// resumes from it and copies again what the restore took back.
		mr.lg.Warn("the destination's checkpoint is older than this mirror's last write: the destination was restored from a backup; resuming from its checkpoint",
			zap.Int64("checkpoint", cp.Revision), zap.Int64("last-written", mr.cp.Revision),
			zap.Int64("dest-revision", modRev), zap.Int64("last-written-dest-revision", mr.cpModRev))
		mr.cp, mr.cpModRev = cp, modRev
	case cp != nil && cp.Token == mr.token:
		mr.lg.Info("a write whose outcome was unknown had landed; resuming from it", zap.Int64("checkpoint", cp.Revision), zap.Int64("dest-revision", modRev))
		if mr.cpModRev == 0 {
			// The claim landed: check for cycles before the next write.
			mr.claimRev, mr.cycleDue = modRev, true
		}
		mr.cp, mr.cpModRev = cp, modRev
	default:
		return mr.fenced(cp, modRev)
	}
	return nil
}

func (mr *mirror) fenced(cp *Checkpoint, modRev int64) error {
	if cp == nil {
		return fmt.Errorf("%w (its checkpoint %q was deleted)", errFenced, mr.cpKey)
	}
	return fmt.Errorf("%w (checkpoint %q rewritten at destination revision %d by process token %s at %s; this process is %s)",
		errFenced, mr.cpKey, modRev, cp.Token, cp.Updated.Format(time.RFC3339Nano), mr.token)
}

// commit writes ops and the next checkpoint in one transaction, only if
// the checkpoint is still the one this mirror last wrote; it returns the
// responses to ops. Puts skipped because the mirror does not own their
// keys are logged and counted.
func (mr *mirror) commit(ctx context.Context, ops []owned, next Checkpoint) ([]*pb.ResponseOp, error) {
	if err := mr.recheck(ctx); err != nil {
		return nil, err
	}
	if mr.cpModRev == 0 && len(ops) > 0 && mr.cp != nil {
		// Claim the image (checked for cycles) before the first key.
		if _, err := mr.commit(ctx, nil, *mr.cp); err != nil {
			return nil, err
		}
	}
	creating := mr.cpModRev == 0
	next.Updated, next.Token = mr.clock.Now().UTC(), mr.token
	txnOps := make([]clientv3.Op, 0, len(ops)+1)
	for _, o := range ops {
		txnOps = append(txnOps, o.op)
	}
	txnOps = append(txnOps, clientv3.OpPut(mr.cpKey, next.Encode()))
	cmp := clientv3.Compare(clientv3.ModRevision(mr.cpKey), "=", mr.cpModRev)
	tctx, cancel := context.WithTimeout(ctx, mr.cfg.RequestTimeout)
	resp, err := mr.cfg.Dest.Txn(tctx).If(cmp).Then(txnOps...).Commit()
	cancel()
	if err != nil {
		return nil, fmt.Errorf("mirror: destination transaction: %w", err)
	}
	if !resp.Succeeded {
		// Ours, landed after a timeout, or another process's?
		if err := mr.reload(ctx); err != nil {
			return nil, err
		}
		return nil, errLanded
	}
	mr.cp, mr.cpModRev = &next, resp.Header.Revision
	mr.m.committed(mr.clock.Now())
	if creating {
		mr.claimRev, mr.cycleDue = mr.cpModRev, true
		if err := mr.recheck(ctx); err != nil {
			return nil, err
		}
	}
	conflicts := skipped(ops, resp.Responses)
	if len(conflicts) > 0 {
		mr.m.conflicts.Add(float64(len(conflicts)))
		mr.lg.Warn("source keys not copied: the destination has keys of the same names that this mirror did not write (--overwrite copies over them)",
			zap.Strings("keys", conflicts[:min(len(conflicts), 5)]), zap.Int("count", len(conflicts)))
	}
	return resp.Responses[:len(ops)], nil
}

// commitResp writes ops with the checkpoint unchanged.
func (mr *mirror) commitResp(ctx context.Context, ops []owned) ([]*pb.ResponseOp, error) {
	return mr.commit(ctx, ops, *mr.cp)
}

// mapping is the mirror's prefix mapping.
func (mr *mirror) mapping() core.Mapping {
	return core.Mapping{Prefix: mr.cfg.Prefix, DestPrefix: mr.cfg.DestPrefix}
}

// mapKey is a source key's name in the destination.
func (mr *mirror) mapKey(k []byte) string { return mr.mapping().Map(k) }

// unmapKey is a destination key's name in the source.
func (mr *mirror) unmapKey(k []byte) string { return mr.mapping().Unmap(k) }

// fresh is a checkpoint of this mirror with nothing applied yet.
func (mr *mirror) fresh() Checkpoint {
	return Checkpoint{SourceClusterID: mr.sourceID, SourcePrefix: mr.cfg.Prefix, DestPrefix: mr.cfg.DestPrefix, Policy: mr.cfg.Policy.String(),
		FailbackFrom: mr.failback.from, Adopted: mr.failback.from != "" && !mr.failback.adopt}
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
func reserved(k []byte) bool { return core.Reserved(k) }

// newToken is a random mark for this process's checkpoints.
func newToken() string {
	b := make([]byte, 8)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// newBackoff is core.Backoff with random jitter.
func (mr *mirror) newBackoff() *core.Backoff {
	return core.NewBackoff(func(n time.Duration) time.Duration { return rand.N(n + 1) })
}
