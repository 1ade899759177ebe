package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/mirror"
)

// loadWriter puts keys under prefix from workers goroutines, each at most
// one put per every, until stop is called; stop returns the puts made.
func loadWriter(t *testing.T, p *mirrorPair, prefix string, workers int, every time.Duration) (stop func() int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if _, err := p.s.Put(ctx, fmt.Sprintf("%sw%d-%d", prefix, w, i%500), fmt.Sprint(i)); err == nil {
					n.Add(1)
				}
			}
		}()
	}
	var once sync.Once
	stop = func() int64 {
		once.Do(func() { cancel(); wg.Wait() })
		return n.Load()
	}
	t.Cleanup(func() { stop() })
	return stop
}

// drainArgs is `replica mirror drain` with the pair's flags and extra.
func (p *mirrorPair) drainArgs(extra ...string) []string {
	return append([]string{"mirror", "drain"}, p.args(extra...)[1:]...)
}

// TestMirrorDrain: under a load of about 1,000 puts/s on top of 20,000
// mirrored keys (100,000 with -mirror.long), a writer that keeps writing
// makes drain fail with the reason within --drain-timeout; once the
// writers stop, drain says the destination is ready within 5 s, leaves a
// cutover record with the last source revision, and verify compares at
// that record and agrees.
func TestMirrorDrain(t *testing.T) {
	keys := 20000
	if *mirrorLong {
		keys = 100000
	}
	p := startMirrorPair(t)
	fill(t, p.s, "d/", keys)
	p.start(t, "--prefix", "d/")
	p.waitCaughtUp(t, "default")

	// A writer that keeps writing: drain gives up, saying why.
	stop := loadWriter(t, p, "d/", 8, 8*time.Millisecond)
	loadStart := time.Now()
	code, out := p.run(t, p.drainArgs("--prefix", "d/", "--drain-timeout", "3s")...)
	if code == 0 || !strings.Contains(out, "kept changing under prefix \"d/\"") || !strings.Contains(out, "stop the writers") {
		t.Fatalf("drain under a writer that keeps writing exited %d:\n%s\nwant a failure saying the source kept changing", code, out)
	}
	if cut, err := mirror.ReadCutover(context.Background(), p.d, "default"); err != nil || cut != nil {
		t.Fatalf("a failed drain left a cutover record %+v (%v)", cut, err)
	}

	// The writers stop; drain, right after.
	puts := stop()
	loadFor := time.Since(loadStart)
	last := p.head(t)
	start := time.Now()
	code, out = p.run(t, p.drainArgs("--prefix", "d/")...)
	took := time.Since(start)
	if code != 0 || !strings.Contains(out, "destination ready") {
		t.Fatalf("drain after the writers stopped exited %d:\n%s", code, out)
	}
	if took > 5*time.Second {
		t.Fatalf("drain took %v, want at most 5s", took)
	}
	cut, err := mirror.ReadCutover(context.Background(), p.d, "default")
	if err != nil || cut == nil {
		t.Fatalf("no cutover record after drain (%v)", err)
	}
	if cut.Revision < last || cut.SourcePrefix != "d/" || cut.SourceClusterID == "" || cut.Time.IsZero() {
		t.Fatalf("cutover record %+v: want the last source revision (at least %d), the prefix, the source cluster and a time", cut, last)
	}
	code, out = p.verify(t, "--prefix", "d/")
	if code != 0 || !strings.Contains(out, "cutover record") || !strings.Contains(out, fmt.Sprintf("source revision %d (the cutover record's)", cut.Revision)) {
		t.Fatalf("verify after drain exited %d:\n%s\nwant agreement at the cutover record's revision %d", code, out, cut.Revision)
	}
	t.Logf("%d keys; the writers made %d puts in %v (%.0f/s); drain returned ready in %v at source revision %d",
		keys, puts, loadFor.Round(time.Millisecond), float64(puts)/loadFor.Seconds(), took.Round(time.Millisecond), cut.Revision)
}
