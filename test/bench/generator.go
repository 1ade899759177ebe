package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// benchToolVersion is the etcd release whose benchmark tool checks our
// generator. The tool lives in etcd's root module, which does not build at
// v3.7; it is built in a module of its own so that it stays out of this
// module's dependency graph.
const benchToolVersion = "v3.6.8"

// buildBenchTool builds etcd's benchmark tool into the user cache directory
// once, and returns its path.
func buildBenchTool() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "understudy", "etcd-benchmark-"+benchToolVersion)
	bin := filepath.Join(dir, "benchmark")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module benchtool\n\ngo 1.26\n"), 0o644); err != nil {
		return "", err
	}
	for _, args := range [][]string{
		{"get", "go.etcd.io/etcd/v3/tools/benchmark@" + benchToolVersion},
		{"build", "-o", bin, "go.etcd.io/etcd/v3/tools/benchmark"},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return bin, nil
}

// runBenchTool runs `benchmark range key` and reads its summary.
func runBenchTool(bin, endpoint, key, consistency string, clients, conns, total int) (Result, error) {
	cmd := exec.Command(bin, "range", key, "--consistency", consistency, "--total", strconv.Itoa(total),
		"--clients", strconv.Itoa(clients), "--conns", strconv.Itoa(conns), "--endpoints", endpoint)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return Result{}, fmt.Errorf("%s: %v\n%s", cmd, err, errOut.String())
	}
	return parseBenchTool(out.String())
}

// parseBenchTool reads the figures of etcd's pkg/report summary.
func parseBenchTool(s string) (Result, error) {
	var r Result
	var found int
	secs := func(v string) time.Duration {
		f, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " secs."), 64)
		return time.Duration(f * float64(time.Second))
	}
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "Total:"):
			r.Seconds = secs(strings.TrimPrefix(l, "Total:")).Seconds()
			found++
		case strings.HasPrefix(l, "Requests/sec:"):
			r.Throughput, _ = strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(l, "Requests/sec:")), 64)
			found++
		case strings.HasPrefix(l, "50% in"):
			r.P50 = secs(strings.TrimPrefix(l, "50% in"))
			found++
		case strings.HasPrefix(l, "99% in"):
			r.P99 = secs(strings.TrimPrefix(l, "99% in"))
			found++
		}
	}
	if found != 4 || r.Throughput == 0 {
		return r, fmt.Errorf("benchmark tool output not understood:\n%s", s)
	}
	r.Ops = int(r.Throughput*r.Seconds + 0.5)
	return r, nil
}

// generatorScenario shows that the project's load generator measures what
// etcd's benchmark tool measures: the same reads, clients and connections
// against the same stock etcd leader, one after the other.
func generatorScenario(p params) ([]Row, error) {
	bin, err := buildBenchTool()
	if err != nil {
		return nil, fmt.Errorf("building etcd's benchmark tool %s: %w", benchToolVersion, err)
	}
	var rows []Row
	err = scenario("load generator vs etcd benchmark tool", func(r *runner) {
		c := harness.StartCluster(r, harness.ClusterConfig{N: 3, Kinds: []harness.Kind{harness.KindEtcd, harness.KindEtcd, harness.KindEtcd}})
		leader := c.Leader(r)
		const key = "bench/generator"
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Client(r).Put(ctx, key, value256); err != nil {
			r.Fatalf("put: %v", err)
		}
		cs := clients(r, leader.ClientURL, p.conns)
		for _, mode := range []struct {
			name, consistency string
			opts              []clientv3.OpOption
		}{
			{"serializable", "s", []clientv3.OpOption{clientv3.WithSerializable()}},
			{"linearizable", "l", nil},
		} {
			pids := map[string]int{"leader": leader.Proc.PID()}
			runOwn := func() Result {
				cpu := startCPU(pids)
				res := load(context.Background(), p.workers, p.dur, func(ctx context.Context, w int) error {
					_, err := cs[w%len(cs)].Get(ctx, key, mode.opts...)
					return err
				})
				res.CPU = cpu.stop()
				return res
			}
			// The tool runs a number of requests, not a duration: as many
			// as the generator did, so both run for about as long.
			runTool := func(total int) Result {
				cpu := startCPU(pids)
				res, err := runBenchTool(bin, leader.ClientURL, key, mode.consistency, p.workers, p.conns, total)
				if err != nil {
					r.Fatalf("%v", err)
				}
				res.CPU = cpu.stop()
				return res
			}
			// In the order generator, tool, tool, generator, so that a
			// drift in the cluster over the runs weighs on both alike.
			own1 := runOwn()
			tool1 := runTool(own1.Ops)
			tool2 := runTool(own1.Ops)
			own2 := runOwn()
			own, tool := combine(own1, own2), combine(tool1, tool2)
			r.Logf("%s range @ etcd leader: generator %.0f ops/s, benchmark tool %.0f ops/s", mode.name, own.Throughput, tool.Throughput)
			rows = append(rows,
				Row{Scenario: "generator", Name: "generator: " + mode.name + " range @ etcd leader", Result: own},
				Row{Scenario: "generator", Name: "etcd benchmark " + benchToolVersion + ": " + mode.name + " range @ etcd leader", Result: tool},
			)
		}
	})
	return rows, err
}

// combine adds up two runs of the same thing.
func combine(a, b Result) Result {
	r := Result{Ops: a.Ops + b.Ops, Errors: a.Errors + b.Errors, Seconds: a.Seconds + b.Seconds,
		P50: (a.P50 + b.P50) / 2, P99: (a.P99 + b.P99) / 2, CPU: map[string]float64{}}
	r.Throughput = float64(r.Ops) / r.Seconds
	for k, v := range a.CPU {
		r.CPU[k] += v
	}
	for k, v := range b.CPU {
		r.CPU[k] += v
	}
	return r
}
