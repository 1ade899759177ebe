package mirror

import (
	"context"
	"time"

	"github.com/understudy-kv/understudy/mirror/core"
	"go.uber.org/zap"
)

// watchdogTick is how often the watchdog applies the stall rule.
const watchdogTick = time.Second

// watchdog reports, every tick of the mirror's clock, whether the mirror
// is stalled (core.Progress.Check, through metrics.stall), logging what
// the verdict says.
func (mr *mirror) watchdog(ctx context.Context) {
	t := mr.clock.NewTicker(watchdogTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.Chan():
			v := mr.m.stall(now, mr.cfg.StallAfter)
			switch v.Say(watchdogTick) {
			case core.SayStalled:
				mr.lg.Warn("mirror stalled: no progress while there is work to do", zap.Duration("for", v.IdleFor), zap.NamedError("last-error", v.LastErr))
			case core.SayStillStalled:
				mr.lg.Warn("mirror still stalled", zap.Duration("for", v.IdleFor), zap.NamedError("last-error", v.LastErr))
			case core.SayProgressing:
				mr.lg.Info("mirror progressing again")
			}
		}
	}
}
