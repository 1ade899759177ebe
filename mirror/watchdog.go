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
				mr.lg.Warn("mirror stalled: no progress while there is work to do", stallFields(v)...)
			case core.SayStillStalled:
				mr.lg.Warn("mirror still stalled", stallFields(v)...)
			case core.SayProgressing:
				mr.lg.Info("mirror progressing again")
			}
		}
	}
}

// stallFields are a stall's log fields: how long, the last error, and
// what the operator can do about it if only they can (stallHint).
func stallFields(v core.Verdict) []zap.Field {
	fs := []zap.Field{zap.Duration("for", v.IdleFor), zap.NamedError("last-error", v.LastErr)}
	if h := stallHint(v.LastErr); h != "" {
		fs = append(fs, zap.String("what-to-do", h))
	}
	return fs
}
