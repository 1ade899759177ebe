package replica

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cheggaaa/pb/v3"
	"github.com/jonboulle/clockwork"
	"github.com/mattn/go-isatty"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/learner"
)

// defaultProgress shows catch-up as a bar when stderr is a terminal, and as
// a log line every few seconds otherwise (systemd, Kubernetes, tests).
func defaultProgress(lg *zap.Logger, clock clockwork.Clock) func(learner.Progress) {
	if isatty.IsTerminal(os.Stderr.Fd()) {
		return barProgress()
	}
	return logProgress(lg, clock, 2*time.Second)
}

func barProgress() func(learner.Progress) {
	var (
		once sync.Once
		bar  *pb.ProgressBar
	)
	return func(p learner.Progress) {
		once.Do(func() {
			bar = pb.New64(int64(p.LeaderCommit)).SetWriter(os.Stderr).
				SetTemplateString(`catching up {{counters . }} entries {{bar . }} {{percent . }} {{etime . }}`).Start()
		})
		bar.SetTotal(int64(p.LeaderCommit))
		bar.SetCurrent(int64(min(p.Applied, p.LeaderCommit)))
		if p.CaughtUp() {
			bar.Finish()
		}
	}
}

// logProgress logs catch-up at most once every interval on clock, and
// once caught up.
func logProgress(lg *zap.Logger, clock clockwork.Clock, every time.Duration) func(learner.Progress) {
	var last time.Time
	return func(p learner.Progress) {
		if !p.CaughtUp() && clock.Since(last) < every {
			return
		}
		last = clock.Now()
		pct := 100.0
		if p.LeaderCommit > 0 {
			pct = 100 * float64(min(p.Applied, p.LeaderCommit)) / float64(p.LeaderCommit)
		}
		msg := "catching up"
		if p.CaughtUp() {
			msg = "caught up"
		}
		lg.Info(msg, zap.Uint64("applied", p.Applied), zap.Uint64("leader-commit", p.LeaderCommit),
			zap.Uint64("behind", p.Behind()), zap.String("progress", fmt.Sprintf("%.1f%%", pct)))
	}
}
