package mirror

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// watchdog reports, once a second, whether the mirror is stalled (see
// metrics.stall), logging each change.
func (mr *mirror) watchdog(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			stalled, changed, err, idle := mr.m.stall(now, mr.cfg.StallAfter)
			switch {
			case stalled && changed:
				mr.lg.Warn("mirror stalled: no progress while there is work to do", zap.Duration("for", idle), zap.NamedError("last-error", err))
			case stalled && idle%(time.Minute) < time.Second:
				mr.lg.Warn("mirror still stalled", zap.Duration("for", idle), zap.NamedError("last-error", err))
			case changed:
				mr.lg.Info("mirror progressing again")
			}
		}
	}
}
