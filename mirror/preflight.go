package mirror

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/mirror/core"
)

// clusterID names a cluster as checkpoints record it, with its revision now.
func clusterID(ctx context.Context, cli *clientv3.Client) (string, int64, error) {
	resp, err := cli.Get(ctx, ReservedPrefix, clientv3.WithCountOnly())
	if err != nil {
		return "", 0, err
	}
	return fmt.Sprintf("%x", resp.Header.ClusterId), resp.Header.Revision, nil
}

// preflight refuses what would corrupt data, and loads the checkpoint:
//   - source and destination the same cluster with overlapping prefixes
//     (the mirror would copy its own writes, forever), or a cycle through
//     other mirrors whose checkpoints it can read (checkCycles);
//   - a destination prefix that another source's mirror writes;
//   - this mirror's own checkpoint written for another source or mapping;
//   - a first sync under Keep into an image holding keys it did not write.
//
// What it read starts the state (core.State.Start).
func (mr *mirror) preflight(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*mr.cfg.RequestTimeout)
	defer cancel()
	src, _, err := clusterID(ctx, mr.cfg.Source)
	if err != nil {
		return fmt.Errorf("mirror: source cluster%s: %w%s", asWhom(mr.cfg.Source), err, rightsHint(err, "source", "read"))
	}
	dst, _, err := clusterID(ctx, mr.cfg.Dest)
	if err != nil {
		return fmt.Errorf("mirror: destination cluster%s: %w%s", asWhom(mr.cfg.Dest), err, rightsHint(err, "dest", "read and write"))
	}
	mr.sourceID, mr.destID = src, dst
	if err := mr.planFailback(ctx); err != nil {
		return err
	}
	cps, err := mr.checkCycles(ctx)
	if err != nil {
		return err
	}
	mr.st.CycleChecked(mr.clock.Now(), core.NoCycle)
	if err := mr.checkDestCheckpoints(cps); err != nil {
		return err
	}
	start, err := mr.readStart(ctx)
	if err != nil {
		return err
	}
	switch mr.st.Start(start) {
	case core.BeginSync:
		if mr.cfg.Policy() == Keep {
			return mr.refuseUnowned(ctx)
		}
	case core.BeginResync:
		mr.lg.Warn("--resync: syncing in full again; the checkpoint's revision is not resumed from", zap.Int64("revision", start.Checkpoint.Revision))
	case core.BeginResume:
		cp := start.Checkpoint
		mr.lg.Info("resuming from the checkpoint", zap.String("phase", cp.Phase), zap.Int64("revision", cp.Revision), zap.String("synced-through", cp.SyncedThrough))
		if mr.cfg.Rev > 0 {
			mr.lg.Warn("--rev ignored: the checkpoint says where to resume", zap.Int64("rev", mr.cfg.Rev))
		}
	case core.BeginAtRev:
		mr.lg.Info("streaming from --rev without an initial sync", zap.Int64("rev", mr.cfg.Rev))
	}
	return nil
}

// readStart reads this mirror's checkpoint and, if it has none, whether
// the destination holds ownership records of it.
func (mr *mirror) readStart(ctx context.Context) (core.Start, error) {
	in := core.Start{Identity: mr.identity(), Failback: mr.failback, Resync: mr.cfg.Resync, Rev: mr.cfg.Rev}
	var err error
	in.Checkpoint, in.ModRev, err = ReadCheckpoint(ctx, mr.cfg.Dest, mr.cfg.Name)
	if err != nil || in.Checkpoint != nil {
		return in, err
	}
	resp, err := mr.cfg.Dest.Get(ctx, ownPrefix(mr.cfg.Name), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return in, fmt.Errorf("mirror: destination ownership records: %w", err)
	}
	in.NoneOwned = resp.Count == 0
	return in, nil
}

// refuseUnowned refuses a first sync under Keep into an image that holds
// keys the mirror did not write.
func (mr *mirror) refuseUnowned(ctx context.Context) error {
	n, sample, err := unowned(ctx, mr.cfg.Dest, mr.cfg.DestPrefix, mr.cfg.Name, mr.cfg.PageSize, 5)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%w: the destination already holds %d key(s) in %s that this mirror did not write (%s): give --overwrite to copy the source over them and keep every other key (the mirror deletes only keys it wrote), or --prune to make %s an exact copy of the source (deleting the keys the source does not have)",
			ErrRefused, n, image(mr.cfg.DestPrefix), quoteSample(sample, n), image(mr.cfg.DestPrefix))
	}
	return nil
}

// checkDestCheckpoints refuses this mirror's own checkpoint (among cps,
// the destination's) written for another source or mapping, and a
// destination prefix that another mirror writes.
func (mr *mirror) checkDestCheckpoints(cps map[string]Checkpoint) error {
	for name, c := range cps {
		if name == mr.cfg.Name {
			if c.SourceClusterID != mr.sourceID {
				return fmt.Errorf("%w: the destination's checkpoint %q belongs to source cluster %s, not to this source (%s); use another --name, or delete key %q to start over",
					ErrRefused, name, c.SourceClusterID, mr.sourceID, CheckpointKey(name))
			}
			if c.SourcePrefix != mr.cfg.Prefix || c.DestPrefix != mr.cfg.DestPrefix {
				return fmt.Errorf("%w: checkpoint %q mirrors prefix %q to %q, not %q to %q; use another --name for another mapping",
					ErrRefused, name, c.SourcePrefix, c.DestPrefix, mr.cfg.Prefix, mr.cfg.DestPrefix)
			}
			continue
		}
		if overlap(c.DestPrefix, mr.cfg.DestPrefix) {
			return fmt.Errorf("%w: mirror %q would write %s, which overlaps %s that mirror %q writes (from source cluster %s, prefix %q); two mirrors would overwrite and delete each other's keys: use a destination prefix outside %q, or, if mirror %q is retired for good, delete its keys under %q",
				ErrRefused, mr.cfg.Name, image(mr.cfg.DestPrefix), image(c.DestPrefix), name, c.SourceClusterID, c.SourcePrefix, c.DestPrefix, name, ReservedPrefix+name+"/")
		}
	}
	return nil
}

// image names the destination keys a mirror writes.
func image(destPrefix string) string {
	if destPrefix == "" {
		return "the whole keyspace (--no-dest-prefix)"
	}
	return fmt.Sprintf("the keys under %q", destPrefix)
}

func quoteSample(keys []string, n int) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = strconv.Quote(k)
	}
	s := strings.Join(q, ", ")
	if n > len(keys) {
		s += fmt.Sprintf(" and %d more", n-len(keys))
	}
	return s
}

// asWhom names the user a client authenticates as, for refusals.
func asWhom(cli *clientv3.Client) string {
	if cli.Username == "" {
		return ""
	}
	return fmt.Sprintf(" (as user %q)", cli.Username)
}

// rightsHint says, for a permission error, what the mirror needs on side.
func rightsHint(err error, side, rights string) string {
	if !errors.Is(err, rpctypes.ErrPermissionDenied) && rpctypes.ErrorDesc(err) != rpctypes.ErrorDesc(rpctypes.ErrGRPCPermissionDenied) {
		return ""
	}
	return fmt.Sprintf("; the mirror needs %s on the prefix and on %q in that cluster: grant them to --%s-user's role, or give a user that has them", rights, ReservedPrefix, side)
}
