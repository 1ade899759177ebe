package mirror

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/understudy-kv/understudy/mirror/core"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Failback. After a switchover from cluster A to cluster B (mirror A → B
// drained, its cutover record in B, clients moved to B), a mirror B → A
// copies B's prefix back. Without Config.Failback it is refused: the
// A → B mirror's checkpoint in B makes it a mirror cycle, and the keys
// that mirror wrote into B would be left out. With it, the mirror:
//   - requires the A → B mirror's cutover record in B, for cluster A and
//     the exact reverse of this mirror's prefixes (a completed switchover);
//   - leaves exactly that mirror out of the cycle check and out of the
//     feeders whose keys are not copied;
//   - adopts A's keys that mirror copied (adopt.go): a key of A under the
//     destination prefix is taken over (an ownership record of this mirror
//     is put beside it) if the A → B mirror holds an ownership record of
//     its copy in B and A's version is not newer than the cutover record's
//     revision (B holds it, or a later write made in B). Every other key of
//     A is left alone: keys no mirror copied, keys written in A after the
//     cutover, keys outside the prefix.
//
// The checkpoint records the mirror failed back from (FailbackFrom) and
// that the adoption is done (Adopted), so that a restart neither adopts
// again nor forgets which mirror it left out.

// reverseMirror is a mirror found in this mirror's source that copies
// this mirror's destination into its source: with this mirror, a cycle
// of two.
type reverseMirror struct {
	link link
	// cut is its cutover record in the source; nil if it has none.
	cut *Cutover
	// owned is how many ownership records it has in the source.
	owned int64
}

// reversesOf are the mirrors among links that copy self's destination
// image into self's source prefix.
func reversesOf(self link, links []link) []link {
	var out []link
	for _, l := range links {
		if l.src == self.dst && l.dst == self.src && overlap(l.srcPrefix, self.dstPrefix) && overlap(l.dstPrefix, self.srcPrefix) {
			out = append(out, l)
		}
	}
	return out
}

// decideFailback decides, from the --failback flag, this mirror's
// checkpoint (nil: none) and the reverse mirrors found in the source,
// whether this mirror fails back and from which mirror
// (core.DecideFailback), or words the refusal.
func decideFailback(self link, failback bool, cp *Checkpoint, found []reverseMirror) (core.Failback, error) {
	rs := make([]core.Reverse, len(found))
	for i, r := range found {
		rs[i] = core.Reverse{Name: r.link.name, Drained: r.cut != nil, Exact: r.exact(self)}
		if r.cut != nil {
			rs[i].CutRev = r.cut.Revision
		}
	}
	plan, refusal := core.DecideFailback(failback, cp, rs)
	if refusal == core.FailbackAccepted {
		return plan, nil
	}
	stored := ""
	if cp != nil {
		stored = cp.FailbackFrom
	}
	return core.Failback{}, failbackRefusal(refusal, self, stored, found)
}

// exact reports whether r, and its cutover record, copy exactly self's
// destination prefix of its destination cluster into its source prefix.
func (r reverseMirror) exact(self link) bool {
	return r.cut != nil && r.cut.SourceClusterID == self.dst && r.cut.SourcePrefix == self.dstPrefix && r.cut.DestPrefix == self.srcPrefix &&
		r.link.srcPrefix == self.dstPrefix && r.link.dstPrefix == self.srcPrefix
}

// failbackRefusal words a refusal of core.DecideFailback.
func failbackRefusal(refusal core.FailbackRefusal, self link, stored string, found []reverseMirror) error {
	switch refusal {
	case core.NothingToFailBack:
		return fmt.Errorf("%w: --failback: %s finds no mirror in cluster %s that copied its destination (cluster %s %s) into its source: there is nothing to fail back from; start it without --failback",
			ErrRefused, self.describe(), self.src, self.dst, prefixName(self.dstPrefix))
	case core.SeveralReverses:
		names := make([]string, len(found))
		for i, r := range found {
			names[i] = r.describe()
		}
		return fmt.Errorf("%w: %s would copy back into its source what %d mirrors copied from its destination: %s; fail back from one mirror at a time (retire the others by deleting their keys under %q in cluster %s)",
			ErrRefused, self.describe(), len(found), strings.Join(names, "; "), ReservedPrefix+"<name>/", self.src)
	}
	r := found[0]
	switch refusal {
	case core.NotAFailback:
		return notFailbackError(self, r, stored)
	case core.ReverseNotDrained:
		return fmt.Errorf("%w: --failback needs a completed switchover: %s copied into this mirror's source, but cluster %s holds no cutover record %q of it; drain it first (replica mirror drain with its flags, writers stopped), stop it, then start this mirror with --failback",
			ErrRefused, r.link.describe(), self.src, CutoverKey(r.link.name))
	case core.ReverseNotExact:
		return fmt.Errorf("%w: --failback: %s (cutover record %q: source cluster %s %s → %s) is not the reverse of %s: fail back with --prefix %q and a destination prefix %q",
			ErrRefused, r.link.describe(), CutoverKey(r.link.name), r.cut.SourceClusterID, prefixName(r.cut.SourcePrefix), prefixName(r.cut.DestPrefix),
			self.describe(), r.link.dstPrefix, r.link.srcPrefix)
	}
	return fmt.Errorf("%w: --failback: the checkpoint of mirror %q records a failback from mirror %q, but the mirror to fail back from now is mirror %q; use another --name",
		ErrRefused, self.name, stored, r.link.name)
}

// describe names a reverse mirror and the records it has in the source.
func (r reverseMirror) describe() string {
	cut := fmt.Sprintf("no cutover record %q (never drained)", CutoverKey(r.link.name))
	if r.cut != nil {
		cut = fmt.Sprintf("cutover record %q (drained at its source revision %d, %s)", CutoverKey(r.link.name), r.cut.Revision, r.cut.Time.Format(time.RFC3339))
	}
	return fmt.Sprintf("%s, with checkpoint %q, %s and %d ownership record(s) under %q in cluster %s",
		r.link.describe(), CheckpointKey(r.link.name), cut, r.owned, ownPrefix(r.link.name), r.link.dst)
}

// notFailbackError refuses a mirror back into the source of a reverse
// mirror without --failback, naming the records found.
func notFailbackError(self link, r reverseMirror, stored string) error {
	why := fmt.Sprintf("%s copies back into its source what %s copied from it", self.describe(), r.describe())
	if stored == r.link.name {
		why += fmt.Sprintf("; the checkpoint of mirror %q records a failback from it: restart it with --failback", self.name)
	}
	if r.cut == nil {
		return fmt.Errorf("%w: %s; started beside it, this would be a mirror cycle. To fail back: stop the writers, drain mirror %q (replica mirror drain with its flags), stop it, then give --failback; if mirror %q is retired for good, delete its keys under %q in cluster %s",
			ErrRefused, why, r.link.name, r.link.name, ReservedPrefix+r.link.name+"/", r.link.dst)
	}
	return fmt.Errorf("%w: %s; this is a failback: give --failback to copy %s back, taking over the destination's keys that mirror %q copied (the destination's other keys, and keys outside the prefix, are left alone; docs/mirror-dr.md)",
		ErrRefused, why, prefixName(self.srcPrefix), r.link.name)
}

// planFailback reads the reverse mirrors in the source and this mirror's
// checkpoint, and applies decideFailback.
func (mr *mirror) planFailback(ctx context.Context) error {
	cps, _, err := allCheckpoints(ctx, mr.cfg.Source)
	switch {
	case errors.Is(err, rpctypes.ErrPermissionDenied) && mr.cfg.Failback:
		return fmt.Errorf("%w: --failback: cannot read the mirror checkpoints in the source (permission denied on %q): the source user must read them to find the mirror to fail back from", ErrRefused, ReservedPrefix)
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		return nil // the cycle check says so
	case err != nil:
		return fmt.Errorf("mirror: source: %w", err)
	}
	self, except := mr.self(), ""
	if mr.sourceID == mr.destID {
		except = mr.cfg.Name // its own checkpoint
	}
	var found []reverseMirror
	for _, l := range reversesOf(self, linksInto(mr.sourceID, cps, except)) {
		r := reverseMirror{link: l}
		if r.cut, err = ReadCutover(ctx, mr.cfg.Source, l.name); err != nil {
			return fmt.Errorf("mirror: source: %w", err)
		}
		resp, err := mr.cfg.Source.Get(ctx, ownPrefix(l.name), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return fmt.Errorf("mirror: source: ownership records of mirror %q: %w", l.name, err)
		}
		r.owned = resp.Count
		found = append(found, r)
	}
	cp, _, err := ReadCheckpoint(ctx, mr.cfg.Dest, mr.cfg.Name)
	if err != nil {
		return err
	}
	plan, err := decideFailback(self, mr.cfg.Failback, cp, found)
	if err != nil {
		return err
	}
	mr.failback = plan
	if plan.From != "" {
		mr.lg.Info("--failback: failing back from the mirror that copied the destination into the source; it is left out of the cycle check, and the keys it wrote are copied",
			zap.String("from", plan.From), zap.Bool("adopt", plan.Adopt), zap.Int64("cutover-revision", plan.CutRev))
	}
	return nil
}

// self is this mirror as a link.
func (mr *mirror) self() link {
	return link{name: mr.cfg.Name, src: mr.sourceID, dst: mr.destID, srcPrefix: mr.cfg.Prefix, dstPrefix: mr.cfg.DestPrefix}
}

// withoutFailedBack leaves the mirror failed back from out of links of
// mirrors kept in cluster.
func (mr *mirror) withoutFailedBack(links []link, cluster string) []link {
	if mr.failback.From == "" || cluster != mr.sourceID {
		return links
	}
	out := links[:0:0]
	for _, l := range links {
		if !(l.name == mr.failback.From && l.src == mr.destID) {
			out = append(out, l)
		}
	}
	return out
}
