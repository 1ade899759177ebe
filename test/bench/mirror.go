package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// mirrorTool is one way of mirroring: a command line that copies the
// source prefix "mirror/" into the destination under the same names.
type mirrorTool struct {
	name string
	cmd  func(bins *harness.Bins, src, dst string) (bin string, args []string)
}

var mirrorTools = []mirrorTool{
	{"understudy mirror", func(b *harness.Bins, src, dst string) (string, []string) {
		return b.Replica, []string{"mirror", "--source-endpoints", src, "--dest-endpoints", dst, "--prefix", "mirror/", "--log-level", "warn"}
	}},
	{"etcdctl make-mirror", func(b *harness.Bins, src, dst string) (string, []string) {
		return b.Etcdctl, []string{"--endpoints", src, "make-mirror", "--prefix", "mirror/", dst}
	}},
}

// understudyMirror is mirrorTools' understudy mirror.
func understudyMirror() mirrorTool {
	for _, t := range mirrorTools {
		if t.name == "understudy mirror" {
			return t
		}
	}
	panic("bench: no understudy mirror in mirrorTools")
}

// mirrorScenario copies the same data with understudy's mirror and with
// etcdctl make-mirror, each into a fresh destination cluster: the time of
// the initial sync, then the lag of each event at a steady write rate.
func mirrorScenario(p params) ([]Row, error) {
	var rows []Row
	err := scenario("mirror", func(r *runner) {
		src := harness.StartCluster(r, harness.ClusterConfig{N: 1, Token: "bench-source"})
		sc := src.Client(r)
		harness.Fill(r, sc, p.mirrorKeys, func(i int) (string, string) { return fmt.Sprintf("mirror/k/%07d", i), value256 })
		for _, tool := range mirrorTools {
			dst := harness.StartCluster(r, harness.ClusterConfig{N: 1, Token: "bench-dest"})
			dc := dst.Client(r)
			bin, args := tool.cmd(src.Bins, src.Endpoints()[0], dst.Endpoints()[0])
			start := time.Now()
			proc := harness.Start(r, harness.ProcConfig{Name: "mirror", Bin: bin, Args: args})
			harness.WaitFor(r, 20*time.Minute, tool.name+" initial sync", func() (bool, error) {
				resp, err := dc.Get(context.Background(), "mirror/k/", clientv3.WithPrefix(), clientv3.WithCountOnly())
				return err == nil && resp.Count >= int64(p.mirrorKeys), err
			})
			took := time.Since(start)
			rows = append(rows, Row{Scenario: "mirror", Name: fmt.Sprintf("%s: initial sync of %d keys", tool.name, p.mirrorKeys),
				Result: Result{Ops: p.mirrorKeys, Seconds: took.Seconds(), Throughput: float64(p.mirrorKeys) / took.Seconds()}})
			r.Logf("%-24s synced %d keys in %v", tool.name, p.mirrorKeys, took.Round(time.Millisecond))
			// Every key has landed, but a tool may still be finishing its
			// sync: lag is measured once a change made now comes through.
			waitStreaming(r, sc, dc, tool.name)
			r.Logf("%-24s streaming %v after the start", tool.name, time.Since(start).Round(time.Millisecond))

			for _, rate := range []int{p.mirrorRate, 2 * p.mirrorRate} {
				lag, own := mirrorLag(sc, dc, p, rate)
				rows = append(rows, Row{Scenario: "mirror", Name: fmt.Sprintf("%s: lag at %d puts/s", tool.name, rate), Result: lag},
					Row{Scenario: "mirror", Name: fmt.Sprintf("%s: lag at %d puts/s, from the source's watch event", tool.name, rate), Result: own})
				r.Logf("%-24s lag at %d puts/s: p50 %v p99 %v (%d of %d events); from the source's watch event: p50 %v p99 %v",
					tool.name, rate, lag.P50, lag.P99, lag.Ops, lag.Ops+lag.Errors, own.P50, own.P99)
			}
			proc.Stop()
		}
	})
	return rows, err
}

// waitStreaming puts a probe into the source prefix now and waits until
// the mirror named what has copied it to the destination.
func waitStreaming(r *runner, src, dst *clientv3.Client, what string) {
	probe := strconv.FormatInt(time.Now().UnixNano(), 10)
	if _, err := src.Put(context.Background(), "mirror/probe", probe); err != nil {
		r.Fatalf("probe: %v", err)
	}
	harness.WaitFor(r, 5*time.Minute, what+" streaming", func() (bool, error) {
		resp, err := dst.Get(context.Background(), "mirror/probe")
		return err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == probe, err
	})
}

// mirrorLag writes timestamps to the source at rate puts/s for p.dur and
// measures, for each, when the destination's watch delivers it: from the
// put (what a user sees: the source's commit included) and from when the
// source's own watch delivered it (the mirror's share).
func mirrorLag(src, dst *clientv3.Client, p params, rate int) (Result, Result) {
	m := lagRun{put: src, srcWatch: src, dst: dst, rate: rate, dur: p.dur}.measure()
	return m.lag, m.own
}

// lagRun is one window of timestamped puts into the source prefix
// "mirror/lag/", with the mirror's lag measured at the destination.
type lagRun struct {
	// put writes the timestamps; srcWatch watches them at the source
	// (for the lag from the source's own watch event); dst, at the
	// destination. With dst nil nothing is timed (a window with no
	// mirror): the puts are made and the CPU measured alone.
	put, srcWatch, dst *clientv3.Client
	rate               int
	dur                time.Duration
	// pad is the bytes added to each put's value after its timestamp.
	pad int
	// cpu are the processes whose CPU is measured over the puts' window
	// (not the wait for the last events after it).
	cpu map[string]int
	// profile, if set, is the client URL of a member (run with
	// --enable-pprof) whose CPU profile is taken over the puts' window.
	profile string
}

// lagMeasure is what a lagRun measured.
type lagMeasure struct {
	lag, own Result
	puts     int
	cpu      map[string]float64
	// window is how long the puts went on.
	window time.Duration
	// profile is lagRun.profile's member's CPU profile over the window.
	profile cpuProfile
	// profileErr is why it could not be taken.
	profileErr error
}

func (lr lagRun) measure() lagMeasure {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu      sync.Mutex
		lats    []time.Duration
		atDest  = map[string]time.Time{}
		atSrc   = map[string]time.Time{}
		wdone   sync.WaitGroup
		started sync.WaitGroup
	)
	watch := func(cli *clientv3.Client, f func(now time.Time, ev *clientv3.Event)) {
		started.Add(1)
		wdone.Add(1)
		go func() {
			defer wdone.Done()
			wch := cli.Watch(ctx, "mirror/lag/", clientv3.WithPrefix())
			started.Done()
			for resp := range wch {
				now := time.Now()
				mu.Lock()
				for _, ev := range resp.Events {
					if ev.Type == clientv3.EventTypePut {
						f(now, ev)
					}
				}
				mu.Unlock()
			}
		}()
	}
	if lr.dst != nil {
		watch(lr.dst, func(now time.Time, ev *clientv3.Event) {
			stamp := stampOf(ev.Kv.Value)
			if ns, err := strconv.ParseInt(stamp, 10, 64); err == nil {
				lats = append(lats, now.Sub(time.Unix(0, ns)))
				atDest[stamp] = now
			}
		})
		watch(lr.srcWatch, func(now time.Time, ev *clientv3.Event) { atSrc[stampOf(ev.Kv.Value)] = now })
	}
	started.Wait()
	cpu := startCPU(lr.cpu)
	start := time.Now()
	profiled := make(chan lagMeasure, 1)
	if lr.profile != "" {
		go func() {
			p, err := profileCPU(ctx, lr.profile, lr.dur)
			profiled <- lagMeasure{profile: p, profileErr: err}
		}()
	}
	puts := putAt(ctx, lr.put, lr.rate, lr.dur, lr.pad)
	m := lagMeasure{puts: puts, cpu: cpu.stop(), window: time.Since(start)}
	if lr.profile != "" {
		p := <-profiled
		m.profile, m.profileErr = p.profile, p.profileErr
	}
	if lr.dst != nil {
		// Let the last events arrive: until all have, or for 30 seconds;
		// what is missing then is reported as errors.
		deadline := time.Now().Add(30 * time.Second)
		poll := time.NewTicker(10 * time.Millisecond)
		for time.Now().Before(deadline) {
			mu.Lock()
			got := len(lats)
			mu.Unlock()
			if got >= puts {
				break
			}
			<-poll.C
		}
		poll.Stop()
	}
	cancel()
	wdone.Wait()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lats)
	m.lag = Result{Ops: len(lats), Errors: max(puts-len(lats), 0), Seconds: time.Since(start).Seconds()}
	m.lag.Throughput = float64(len(lats)) / lr.dur.Seconds()
	m.lag.P50, m.lag.P99 = percentile(lats, 0.5), percentile(lats, 0.99)
	var own []time.Duration
	for v, d := range atDest {
		if s, ok := atSrc[v]; ok {
			own = append(own, d.Sub(s))
		}
	}
	slices.Sort(own)
	m.own = Result{Ops: len(own), Errors: max(puts-len(own), 0), Seconds: m.lag.Seconds, Throughput: float64(len(own)) / lr.dur.Seconds()}
	m.own.P50, m.own.P99 = percentile(own, 0.5), percentile(own, 0.99)
	return m
}

// putAt puts timestamps under "mirror/lag/" (1,000 keys in turn) at rate
// puts/s for d, each followed by a space and pad bytes, and returns how
// many succeeded. Puts go out in bursts every 10ms, from goroutines, so
// that the rate holds whatever one put's latency.
func putAt(ctx context.Context, cli *clientv3.Client, rate int, d time.Duration, pad int) int {
	padding := ""
	if pad > 0 {
		padding = " " + strings.Repeat("p", pad)
	}
	perTick := max(rate/100, 1)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var wg sync.WaitGroup
	var puts atomic.Int64
	start := time.Now()
	for i := 0; time.Since(start) < d; i++ {
		<-tick.C
		for j := range perTick {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := "mirror/lag/" + strconv.Itoa((i*perTick+j)%1000)
				if _, err := cli.Put(ctx, key, strconv.FormatInt(time.Now().UnixNano(), 10)+padding); err == nil {
					puts.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	return int(puts.Load())
}

// stampOf is the timestamp a putAt value starts with.
func stampOf(v []byte) string {
	s, _, _ := strings.Cut(string(v), " ")
	return s
}
