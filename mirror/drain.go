package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/understudy-kv/understudy/backoff"
	"github.com/understudy-kv/understudy/mirror/core"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Drain. Before clients switch from the source to the destination, the
// operator stops the writers and runs `replica mirror drain`: it waits
// until the mirror's checkpoint holds every source revision up to the
// source's current one, checks that nothing under the prefix changed since
// the checkpoint's revision, and writes a cutover record beside the
// checkpoint, in a transaction that checks the checkpoint is still the one
// it saw (fenced: a mirror that moved on meanwhile makes drain look again).

// Cutover is the record a drain leaves in the destination: at destination
// revision DestRevision the destination holds every source revision up to
// Revision under SourcePrefix, and nothing under the prefix changed in the
// source after Revision as of Time.
type Cutover struct {
	SourceClusterID string    `json:"source_cluster_id"`
	SourcePrefix    string    `json:"source_prefix"`
	DestPrefix      string    `json:"dest_prefix"`
	Revision        int64     `json:"revision"`
	CheckpointRev   int64     `json:"checkpoint_mod_revision"`
	Time            time.Time `json:"time"`
	// DestRevision is the destination revision the record was written at
	// (its ModRevision; not stored).
	DestRevision int64 `json:"-"`
}

// CutoverKey is where a drain of the mirror named name leaves its record.
func CutoverKey(name string) string { return ReservedPrefix + name + "/cutover" }

// ReadCutover returns the cutover record of the mirror named name; nil if
// there is none.
func ReadCutover(ctx context.Context, dst *clientv3.Client, name string) (*Cutover, error) {
	resp, err := dst.Get(ctx, CutoverKey(name))
	if err != nil {
		return nil, fmt.Errorf("mirror: reading cutover record %q: %w", CutoverKey(name), err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	var c Cutover
	if err := json.Unmarshal(resp.Kvs[0].Value, &c); err != nil {
		return nil, fmt.Errorf("mirror: %q is not a cutover record: %w", CutoverKey(name), err)
	}
	c.DestRevision = resp.Kvs[0].ModRevision
	return &c, nil
}

// DrainConfig says which mirror to drain: its Settings (the same flags as
// the mirror's) name it and bound the drain (DrainTimeout).
type DrainConfig struct {
	Source, Dest *clientv3.Client
	core.Settings
	// Quiet is how long the prefix must stay unchanged, with the mirror
	// caught up, before the drain calls the destination ready: a source
	// still written to is caught up only for moments (core.Drain).
	Quiet time.Duration
	// Clock times the quiet rule, the pauses between reads and the
	// cutover record; nil is the real clock. DrainTimeout and
	// RequestTimeout are contexts, on the real clock.
	Clock  clockwork.Clock
	Logger *zap.Logger
}

// ErrNotDrained wraps the reasons a drain gives up.
var ErrNotDrained = errors.New("mirror: not drained")

// DefaultDrainQuiet is the Quiet of `replica mirror drain`.
const DefaultDrainQuiet = time.Second

// drainPoll is how often a drain reads the checkpoint while it waits.
const drainPoll = 50 * time.Millisecond

// drainReason words why a drain gave up after timeout (core.Drain.GaveUp).
func drainReason(r core.DrainReport, prefix string, timeout time.Duration) error {
	if r.KeptChanging {
		return fmt.Errorf("%w: the source kept changing under prefix %q for %v (--drain-timeout): %d check(s) found changes after the mirror's checkpoint, the last at source revision %d, %v ago; stop the writers to the source and run drain again",
			ErrNotDrained, prefix, timeout, r.Changes, r.LastChange, r.LastAgo.Round(time.Millisecond))
	}
	return fmt.Errorf("%w: the mirror's checkpoint reached source revision %d, not the source's %d, within %v (--drain-timeout): is the mirror with this --name running and caught up (understudy_mirror_lag_revisions)?",
		ErrNotDrained, r.CheckpointRev, r.Head, timeout)
}

// drainer is one drain: its configuration, clock and what it has seen.
type drainer struct {
	cfg   DrainConfig
	clock clockwork.Clock
	srcID string
	st    *core.Drain
}

// Drain waits until the destination holds every source revision up to the
// source's current revision under the prefix, and writes the cutover
// record. It returns an error wrapping ErrNotDrained if that does not
// happen within DrainTimeout.
func Drain(ctx context.Context, cfg DrainConfig) (*Cutover, error) {
	if err := cfg.Settings.Validate(); err != nil {
		return nil, err
	}
	d := &drainer{cfg: cfg, clock: cfg.Clock, st: core.NewDrain(cfg.Quiet)}
	if d.clock == nil {
		d.clock = clockwork.NewRealClock()
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.DrainTimeout)
	defer cancel()
	rctx, rcancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	srcID, _, err := clusterID(rctx, cfg.Source)
	rcancel()
	if err != nil {
		return nil, fmt.Errorf("mirror: source cluster: %w", err)
	}
	d.srcID = srcID
	for {
		if ctx.Err() != nil {
			return nil, drainReason(d.st.GaveUp(d.clock.Now(), cfg.DrainTimeout), cfg.Prefix, cfg.DrainTimeout)
		}
		cut, err := d.once(ctx)
		if cut != nil || errors.Is(err, ErrRefused) {
			return cut, err
		}
		if err != nil && ctx.Err() == nil {
			cfg.Logger.Warn("drain: trying again", zap.Error(err))
			_ = backoff.Wait(ctx, d.clock, drainPoll)
		}
	}
}

// once reads the source's revision, waits for the checkpoint to reach it,
// checks the prefix has not changed since, and, once the quiet rule says
// so, writes the record fenced on the checkpoint. A nil record and error:
// look again.
func (d *drainer) once(ctx context.Context) (*Cutover, error) {
	cfg := d.cfg
	rctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer cancel()
	_, head, err := clusterID(rctx, cfg.Source)
	if err != nil {
		return nil, fmt.Errorf("mirror: source revision: %w", err)
	}
	d.st.SourceAt(head)
	cp, modRev, err := d.waitCheckpoint(ctx)
	if cp == nil || err != nil {
		return nil, err
	}
	if cp.SourceClusterID != d.srcID || cp.SourcePrefix != cfg.Prefix || cp.DestPrefix != cfg.DestPrefix {
		return nil, fmt.Errorf("%w: checkpoint %q mirrors prefix %q of source cluster %s to %q, not prefix %q of %s to %q: give the flags of the mirror to drain",
			ErrRefused, CheckpointKey(cfg.Name), cp.SourcePrefix, cp.SourceClusterID, cp.DestPrefix, cfg.Prefix, d.srcID, cfg.DestPrefix)
	}
	changed, err := changedSince(ctx, cfg, d.clock, d.st.Since(cp.Revision))
	if err != nil {
		return nil, err
	}
	switch d.st.Checked(cp.Revision, changed, d.clock.Now()) {
	case core.DrainChanged:
		return nil, nil
	case core.DrainWait:
		_ = backoff.Wait(ctx, d.clock, drainPoll)
		return nil, nil
	}
	return d.fenceCutover(ctx, cp.Revision, modRev)
}

// fenceCutover writes the cutover record at source revision rev, only if
// the mirror's checkpoint is still the one at destination revision modRev
// (the drain's); nil and no error if it moved.
func (d *drainer) fenceCutover(ctx context.Context, rev, modRev int64) (*Cutover, error) {
	cfg := d.cfg
	cut := Cutover{SourceClusterID: d.srcID, SourcePrefix: cfg.Prefix, DestPrefix: cfg.DestPrefix, Revision: rev, CheckpointRev: modRev, Time: d.clock.Now().UTC()}
	b, _ := json.Marshal(cut)
	tctx, tcancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer tcancel()
	resp, err := cfg.Dest.Txn(tctx).If(clientv3.Compare(clientv3.ModRevision(CheckpointKey(cfg.Name)), "=", modRev)).
		Then(clientv3.OpPut(CutoverKey(cfg.Name), string(b))).Commit()
	if err != nil {
		return nil, fmt.Errorf("mirror: writing the cutover record: %w", err)
	}
	if !resp.Succeeded {
		return nil, nil // the mirror moved its checkpoint: look again
	}
	cut.DestRevision = resp.Header.Revision
	return &cut, nil
}

// waitCheckpoint polls the mirror's checkpoint until it holds the source's
// revision (core.Drain.CheckpointAt); nil when ctx ends first.
func (d *drainer) waitCheckpoint(ctx context.Context) (*Checkpoint, int64, error) {
	cfg := d.cfg
	for {
		rctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
		cp, modRev, err := ReadCheckpoint(rctx, cfg.Dest, cfg.Name)
		cancel()
		if err != nil {
			return nil, 0, err
		}
		if cp == nil {
			return nil, 0, fmt.Errorf("%w: the destination has no checkpoint of mirror %q (key %q): give the --name of the mirror to drain", ErrRefused, cfg.Name, CheckpointKey(cfg.Name))
		}
		if d.st.CheckpointAt(*cp) {
			return cp, modRev, nil
		}
		if backoff.Wait(ctx, d.clock, drainPoll) != nil {
			return nil, 0, nil
		}
	}
}

// changedSince returns the revision of the first change under the source
// prefix after rev, or 0 if nothing there changed after rev as of the
// source's revision now (head): a watch from rev+1, and a progress
// notification at or past head, which the source sends only when every
// event up to it has been sent. A watch from past head would get none:
// nothing can have changed then.
func changedSince(ctx context.Context, cfg DrainConfig, clock clockwork.Clock, rev int64) (int64, error) {
	wctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), cfg.RequestTimeout)
	defer cancel()
	_, head, err := clusterID(wctx, cfg.Source)
	if err != nil {
		return 0, fmt.Errorf("mirror: source revision: %w", err)
	}
	if rev >= head {
		return 0, nil
	}
	key, end := span(cfg.Prefix)
	ch := cfg.Source.Watch(wctx, key, clientv3.WithRange(end), clientv3.WithRev(rev+1), clientv3.WithCreatedNotify(), clientv3.WithProgressNotify())
	tick := clock.NewTicker(drainPoll)
	defer tick.Stop()
	for {
		select {
		case <-wctx.Done():
			return 0, fmt.Errorf("mirror: source watch from revision %d: no progress within %v", rev+1, cfg.RequestTimeout)
		case <-tick.Chan():
			_ = cfg.Source.RequestProgress(wctx)
		case resp, ok := <-ch:
			if err := watchErr(resp, ok); err != nil {
				return 0, err
			}
			switch {
			case len(resp.Events) > 0:
				return resp.Events[0].Kv.ModRevision, nil
			case resp.IsProgressNotify() && resp.Header.Revision >= head:
				return 0, nil
			}
		}
	}
}
