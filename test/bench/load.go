package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Result is what one load run measured.
type Result struct {
	Ops        int           `json:"ops"`
	Errors     int           `json:"errors"`
	Seconds    float64       `json:"seconds"`
	Throughput float64       `json:"ops_per_second"`
	P50        time.Duration `json:"p50_ns"`
	P99        time.Duration `json:"p99_ns"`
	// CPU is the CPU-seconds each process used during the run, by role.
	CPU map[string]float64 `json:"cpu_seconds"`
	// LeaderRounds is the ReadIndex rounds replicas asked the leader for
	// during a strong-read row served by replicas; 0 elsewhere.
	LeaderRounds float64 `json:"leader_rounds,omitempty"`
}

// CPUPer10k is the CPU-seconds role used per 10,000 operations.
func (r Result) CPUPer10k(role string) float64 {
	if r.Ops == 0 {
		return 0
	}
	return r.CPU[role] * 10000 / float64(r.Ops)
}

// load runs op from concurrency workers for d and measures latency. Each
// worker is given its index, so that callers can spread work over clients.
// The same generator drives every side of a comparison.
func load(ctx context.Context, concurrency int, d time.Duration, op func(ctx context.Context, worker int) error) Result {
	// Each worker has a context of its own, cancelled when the run ends:
	// not a deadline, which travels with every request (grpc-timeout) and
	// costs a timer on both sides, and not one shared context, whose lock
	// every request's own context would contend on. etcd's benchmark tool
	// pays neither.
	var stopped atomic.Bool
	cancels := make([]context.CancelFunc, concurrency)
	ctxs := make([]context.Context, concurrency)
	for w := range concurrency {
		ctxs[w], cancels[w] = context.WithCancel(context.WithoutCancel(ctx))
	}
	stopAll := func() {
		stopped.Store(true)
		for _, c := range cancels {
			c()
		}
	}
	timer := time.AfterFunc(d, stopAll)
	defer timer.Stop()
	unhook := context.AfterFunc(ctx, stopAll)
	defer unhook()
	lat := make([][]time.Duration, concurrency)
	errs := make([]int, concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx := ctxs[w]
			l := make([]time.Duration, 0, 1<<14)
			for !stopped.Load() {
				t0 := time.Now()
				err := op(wctx, w)
				if stopped.Load() {
					break // cut off by the end of the run, not a failure
				}
				if err != nil {
					errs[w]++
					continue
				}
				l = append(l, time.Since(t0))
			}
			lat[w] = l
		}()
	}
	wg.Wait()
	return result(time.Since(start), lat, errs, 0)
}

// result sums the workers' latencies and errors over a run of elapsed.
func result(elapsed time.Duration, lat [][]time.Duration, errs []int, moreErrs int) Result {
	var all []time.Duration
	r := Result{Seconds: elapsed.Seconds(), Errors: moreErrs}
	for w := range lat {
		all = append(all, lat[w]...)
		r.Errors += errs[w]
	}
	r.Ops = len(all)
	r.Throughput = float64(r.Ops) / elapsed.Seconds()
	slices.Sort(all)
	r.P50, r.P99 = percentile(all, 0.50), percentile(all, 0.99)
	return r
}

// loadAt issues op at a fixed rate (ops per second) for d, from up to
// concurrency workers: an open loop, as many independent clients are. An
// op's latency counts from when it was due, so time spent queued because
// every worker was busy counts too (no coordinated omission). Ops due but
// not started when d ends are not counted.
func loadAt(ctx context.Context, rate, concurrency int, d time.Duration, op func(ctx context.Context, worker int) error) Result {
	// Not cancellable: an op runs to its end (as in load, no context
	// shared by every request: its lock would be contended).
	ctx = context.WithoutCancel(ctx)
	due := make(chan time.Time, rate) // up to a second's backlog
	lat := make([][]time.Duration, concurrency)
	errs := make([]int, concurrency)
	var wg sync.WaitGroup
	for w := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := make([]time.Duration, 0, 1<<12)
			for at := range due {
				if err := op(ctx, w); err != nil {
					errs[w]++
					continue
				}
				l = append(l, time.Since(at))
			}
			lat[w] = l
		}()
	}
	// The pacer: every tick, every op due by now is handed out.
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	tick := time.NewTicker(time.Millisecond)
	sent, dropped := 0, 0
	for now := range tick.C {
		elapsed := now.Sub(start)
		if elapsed >= d {
			break
		}
		for ; time.Duration(sent)*interval <= elapsed; sent++ {
			select {
			case due <- start.Add(time.Duration(sent) * interval):
			default: // a second behind: the load is past what the system serves
				dropped++
			}
		}
	}
	tick.Stop()
	close(due)
	wg.Wait()
	// Ops the system could not take, a second behind, count as errors.
	return result(time.Since(start), lat, errs, dropped)
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

// cpuSeconds reads a process's user+system CPU time from /proc.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	s := string(b)
	rest := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(rest) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseFloat(rest[11], 64)
	st, err2 := strconv.ParseFloat(rest[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	const clkTck = 100 // USER_HZ on Linux
	return (ut + st) / clkTck, nil
}

// cpuMeter measures the CPU used by a set of processes over an interval.
type cpuMeter struct {
	pids   map[string]int
	before map[string]float64
}

func startCPU(pids map[string]int) *cpuMeter {
	m := &cpuMeter{pids: pids, before: map[string]float64{}}
	for role, pid := range pids {
		m.before[role], _ = cpuSeconds(pid)
	}
	return m
}

func (m *cpuMeter) stop() map[string]float64 {
	out := map[string]float64{}
	for role, pid := range m.pids {
		after, _ := cpuSeconds(pid)
		out[role] = after - m.before[role]
	}
	return out
}
