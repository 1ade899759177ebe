package mirror

import (
	"context"
	"fmt"

	"go.uber.org/zap"
)

// checkSource refuses a source that is not the one the checkpoint copied:
// another cluster ID, or a revision behind the checkpoint's (core.State.SourceBehind).
// It reads the source's revision linearizably (a member that lags says
// nothing of the cluster's history), before the mirror resumes and at
// every step: after an interruption, the source the clients reach again
// may have been restored meanwhile.
func (mr *mirror) checkSource(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, mr.cfg.RequestTimeout)
	defer cancel()
	id, rev, err := clusterID(ctx, mr.cfg.Source)
	if err != nil {
		return fmt.Errorf("mirror: source revision: %w", err)
	}
	if id != mr.sourceID {
		return fmt.Errorf("%w: the source is now cluster %s, the mirror started on cluster %s (and its checkpoint names it): the source endpoints reach another cluster; restart the mirror against the cluster it copies, or with another --name",
			ErrRefused, id, mr.sourceID)
	}
	if mr.st.SourceBehind(rev) {
		return mr.behind(rev)
	}
	return nil
}

// behind is the refusal of a source at revision rev, behind the checkpoint.
func (mr *mirror) behind(rev int64) error {
	return fmt.Errorf("%w: the source is at revision %d, behind this mirror's checkpoint at source revision %d (%q in the destination): the source holds another history than the one the destination copied (was it restored from a backup?), and copying on would mix the two; restart with --resync to copy the source anew (a full sync that compares before writing, and deletes the keys this mirror wrote that the source does not have)",
		ErrRefused, rev, mr.st.Revision(), CheckpointKey(mr.cfg.Name))
}

// suspectSource checks the source again when a watch response reports a
// revision behind the checkpoint: a watch the client resumed on a restored
// source (or on a member that lags) waits there for revisions the source
// may never have again.
func (mr *mirror) suspectSource(ctx context.Context, rev int64) error {
	if !mr.st.SourceBehind(rev) {
		return nil
	}
	mr.lg.Info("the source reports a revision behind the checkpoint; checking the cluster's revision",
		zap.Int64("reported", rev), zap.Int64("checkpoint", mr.st.Revision()))
	return mr.checkSource(ctx)
}
