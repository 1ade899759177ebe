package compare

import (
	"io"
	"sync"
	"time"

	"github.com/cheggaaa/pb/v3"
	"github.com/jonboulle/clockwork"
)

// progress is a bar of the run's elapsed time, on a terminal.
type progress struct {
	bar  *pb.ProgressBar
	stop func()
}

// startBar shows, on w (nil: no bar), the time since base on clock out of
// d.
func startBar(w io.Writer, clock clockwork.Clock, base time.Time, d time.Duration) *progress {
	if w == nil {
		return &progress{stop: func() {}}
	}
	bar := pb.New64(int64(d / time.Second)).SetWriter(w).
		SetTemplateString(`compare {{counters . }} s {{bar . }} {{percent . }} {{string . "status"}}`).Start()
	if bar.Width() <= 0 {
		bar.SetWidth(100) // a terminal that reports no size (script(1), some CI ptys)
	}
	bar.Set("status", "running")
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := clock.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.Chan():
				bar.SetCurrent(min(int64(clock.Since(base)/time.Second), bar.Total()))
				if clock.Since(base) >= d {
					bar.Set("status", "draining the watches")
				}
			}
		}
	})
	return &progress{bar: bar, stop: func() {
		close(quit)
		wg.Wait()
		bar.Finish()
	}}
}

func (p *progress) status(s string) {
	if p.bar != nil {
		p.bar.Set("status", s)
	}
}
