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
	"github.com/understudy-kv/understudy/backoff"
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
// its other goroutines. Its state is st (core.State): the loop does the
// I/O, then the transition that takes its outcome. The other fields are
// fixed before the first step, but for what the mirror knows of the
// source's other mirrors (feeders) and of leases (leases).
type mirror struct {
	cfg       Config
	lg        *zap.Logger
	clock     clockwork.Clock
	m         *metrics
	sourceID  string
	destID    string
	cpKey     string
	ownPrefix string
	leases    *leases
	// failback is what preflight decided about a failback (failback.go);
	// whether the adoption is still to do is st's.
	failback core.Failback
	// feeders are the mirrors writing into the source under the prefix
	// (cyclecheck.go, links.go).
	feeders feeders

	st *core.State
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
		ownPrefix: ownPrefix(cfg.Name), st: core.NewState(newToken(), cfg.CycleCheckInterval)}
	if err := mr.preflight(ctx); err != nil {
		return err
	}
	if err := mr.checkPolicy(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer func() { cancel(); wg.Wait() }()
	wg.Add(1)
	go func() { defer wg.Done(); mr.watchdog(ctx) }()
	if !cfg.NoLeases {
		mr.leases = newLeases(cfg.Source, cfg.Dest, leaseKeyPrefix(cfg.Name), cfg.RequestTimeout, clock, mr.lg, mr.m)
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
// step's outcome as the state says (core.State.Stepped).
func (mr *mirror) loop(ctx context.Context) error {
	b := mr.newBackoff()
	for ctx.Err() == nil {
		err := mr.step(ctx)
		if ctx.Err() != nil {
			return nil
		}
		rev := mr.st.Revision()
		switch mr.st.Stepped(outcome(err)) {
		case core.Stop:
			return err
		case core.SyncAgain:
			mr.lg.Warn("the source compacted past the checkpoint; syncing in full again", zap.Int64("checkpoint", rev))
			mr.m.resyncs.Inc()
			b.Reset()
		case core.Retry:
		case core.BackOff:
			mr.m.failing(err)
			d := b.Next()
			mr.lg.Warn("mirror interrupted; resuming from the checkpoint", zap.Error(err), zap.Duration("after", d))
			if backoff.Wait(ctx, mr.clock, d) != nil {
				return nil
			}
			// The write may or may not have landed: the checkpoint says.
			if err := mr.reload(ctx); errors.Is(err, errFenced) {
				return err
			} else if err != nil && ctx.Err() == nil {
				mr.lg.Warn("cannot read the checkpoint", zap.Error(err))
			}
		default:
			b.Reset()
		}
	}
	return nil
}

// outcome classifies a step's error for core.State.Stepped.
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
	step := mr.st.Next()
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
		if err := backoff.Wait(ctx, mr.clock, d); err != nil {
			return err
		}
	}
}

// reload reads the checkpoint back after an interrupted write: an
// unchanged one, or one this process wrote, is resumed from, and so is an
// older one (a restored destination); one another process wrote fences
// this one off (core.State.Reloaded).
func (mr *mirror) reload(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, mr.cfg.RequestTimeout)
	defer cancel()
	cp, modRev, err := ReadCheckpoint(rctx, mr.cfg.Dest, mr.cfg.Name)
	if err != nil {
		return err
	}
	wrote, wroteAt := mr.st.Revision(), mr.st.ModRev()
	switch mr.st.Reloaded(cp, modRev) {
	case core.ReloadRestored:
		// Its keys and this checkpoint were written together: the mirror
		// copies again what the restore took back.
		mr.lg.Warn("the destination's checkpoint is older than this mirror's last write: the destination was restored from a backup; resuming from its checkpoint",
			zap.Int64("checkpoint", cp.Revision), zap.Int64("last-written", wrote),
			zap.Int64("dest-revision", modRev), zap.Int64("last-written-dest-revision", wroteAt))
	case core.ReloadLanded:
		mr.lg.Info("a write whose outcome was unknown had landed; resuming from it", zap.Int64("checkpoint", cp.Revision), zap.Int64("dest-revision", modRev))
	case core.ReloadFenced:
		return mr.fenced(cp, modRev)
	}
	return nil
}

func (mr *mirror) fenced(cp *Checkpoint, modRev int64) error {
	if cp == nil {
		return fmt.Errorf("%w (its checkpoint %q was deleted)", errFenced, mr.cpKey)
	}
	return fmt.Errorf("%w (checkpoint %q rewritten at destination revision %d by process token %s at %s; this process is %s)",
		errFenced, mr.cpKey, modRev, cp.Token, cp.Updated.Format(time.RFC3339Nano), mr.st.Token())
}

// commit writes ops and the next checkpoint in one transaction, only if
// the checkpoint is still the one this mirror last wrote; it returns the
// responses to ops. A cycle check that is due runs first; the first write
// of changes is preceded by the claim of the image (core.State.Claim).
func (mr *mirror) commit(ctx context.Context, ops []owned, next Checkpoint) ([]*pb.ResponseOp, error) {
	if err := mr.recheck(ctx); err != nil {
		return nil, err
	}
	if claim, ok := mr.st.Claim(len(ops) > 0); ok {
		if _, err := mr.write(ctx, nil, claim); err != nil {
			return nil, err
		}
	}
	return mr.write(ctx, ops, next)
}

// write is one destination transaction: ops and the checkpoint next,
// fenced on the checkpoint's ModRevision (core.State.Write), its outcome
// fed back (Committed; a failed compare reloads). Right after the claim it
// checks for cycles. Puts skipped because the mirror does not own their
// keys are logged and counted.
func (mr *mirror) write(ctx context.Context, ops []owned, next Checkpoint) ([]*pb.ResponseOp, error) {
	w := mr.st.Write(next, mr.clock.Now().UTC())
	txnOps := make([]clientv3.Op, 0, len(ops)+1)
	for _, o := range ops {
		txnOps = append(txnOps, o.op)
	}
	txnOps = append(txnOps, clientv3.OpPut(mr.cpKey, w.Checkpoint.Encode()))
	cmp := clientv3.Compare(clientv3.ModRevision(mr.cpKey), "=", w.IfModRev)
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
	mr.m.committed(mr.clock.Now())
	if mr.st.Committed(w, resp.Header.Revision) {
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
	return mr.commit(ctx, ops, *mr.st.Checkpoint())
}

// mapping is the mirror's prefix mapping.
func (mr *mirror) mapping() core.Mapping {
	return core.Mapping{Prefix: mr.cfg.Prefix, DestPrefix: mr.cfg.DestPrefix}
}

// mapKey is a source key's name in the destination.
func (mr *mirror) mapKey(k []byte) string { return mr.mapping().Map(k) }

// unmapKey is a destination key's name in the source.
func (mr *mirror) unmapKey(k []byte) string { return mr.mapping().Unmap(k) }

// identity is this mirror's checkpoint with nothing applied, but for a
// failback (core.State adds it).
func (mr *mirror) identity() Checkpoint {
	return Checkpoint{SourceClusterID: mr.sourceID, SourcePrefix: mr.cfg.Prefix, DestPrefix: mr.cfg.DestPrefix, Policy: mr.cfg.Policy().String()}
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

// newBackoff is the mirror's backoff: 100 ms doubling to 5 s, each wait
// between half the delay and the delay.
func (mr *mirror) newBackoff() *backoff.Exponential {
	return &backoff.Exponential{Initial: 100 * time.Millisecond, Max: 5 * time.Second,
		Jitter: func(n time.Duration) time.Duration { return rand.N(n + 1) }}
}
