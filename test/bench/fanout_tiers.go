package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// Rows of the fanout scenario's watch tiers and bootstraps.
const (
	tierLeader   = "watch delivery, tier 0: the leader"
	tierReplica  = "watch delivery, tier 1: a learner replica"
	tierCascaded = "watch delivery, tier 2: a cascaded replica fed by it"
	tierDepth2   = "watch delivery, tier 3: a cascaded replica fed by that one"
	bootCascaded = "bootstrap: a cascaded replica from a learner replica's snapshot"
	bootLearner  = "bootstrap: a learner replica joining (the leader's snapshot)"
)

// tierPuts is the puts of a watch-tier window, at tierRate a second.
const (
	tierPuts = 500
	tierRate = 100
)

// watchTiers measures, at each tier of copies, the time from a put's
// acknowledgement by the leader to its event on a watch: on the leader, on
// a learner replica, on a cascaded replica fed by it and on one fed by that
// one (started here). Rows: p50 and p99 of the delay, ops = events.
func (g *fanoutRig) watchTiers(r *runner) []Row {
	s := g.scale
	depth2 := harness.StartReplica(r, s.u, harness.ReplicaConfig{Name: "d1", Upstream: []string{g.cascaded[0].ClientURL}, Extra: s.p.replicaArgs})
	tiers := []struct {
		name string
		url  string
	}{{tierLeader, s.uLeader.ClientURL}, {tierReplica, g.replicas[0].ClientURL}, {tierCascaded, g.cascaded[0].ClientURL}, {tierDepth2, depth2.ClientURL}}
	var urls []string
	for _, tr := range tiers {
		urls = append(urls, tr.url)
	}
	d := deliveries(r, s.uPut, urls, "bench/tier/", tierPuts, tierRate)
	var rows []Row
	for i, tr := range tiers {
		ds, missed := d.delays(i)
		rows = append(rows, Row{Scenario: fanoutID, Name: tr.name, Note: fmt.Sprintf("%d puts at %d/s through the leader; the delay from the put's acknowledgement to its event", tierPuts, tierRate),
			Result: Result{Ops: len(ds), Errors: missed, Seconds: float64(tierPuts) / tierRate, P50: percentile(ds, 0.5), P99: percentile(ds, 0.99)}})
		r.Logf("%-60s p50 %v p99 %v", tr.name, percentile(ds, 0.5), percentile(ds, 0.99))
	}
	depth2.Stop()
	return rows
}

// bootstraps fills u with about bytes of data, then measures a cascaded
// replica's bootstrap from a learner replica (its snapshot) and a learner
// replica's join (the leader's snapshot): how long until each serves, and
// the leader's CPU meanwhile.
func (g *fanoutRig) bootstraps(r *runner, bytes int) []Row {
	s := g.scale
	const valueSize = 512 << 10
	value := strings.Repeat("b", valueSize)
	fill(r, s.uPut, "bench/boot/", bytes/valueSize, value)
	var rows []Row
	for _, b := range []struct {
		name string
		cfg  harness.ReplicaConfig
	}{
		{bootCascaded, harness.ReplicaConfig{Name: "boot-c", Upstream: []string{g.replicas[0].ClientURL}, NoWait: true, Extra: s.p.replicaArgs}},
		{bootLearner, harness.ReplicaConfig{Name: "boot-r", NoWait: true, Extra: s.p.replicaArgs}},
	} {
		cpu := startCPU(map[string]int{"leader": s.uLeader.Proc.PID()})
		start := time.Now()
		rep := harness.StartReplica(r, s.u, b.cfg)
		rep.WaitServing(r, 30*time.Minute)
		took := time.Since(start)
		res := Result{Ops: 1, Seconds: took.Seconds(), CPU: cpu.stop(), P50: took, P99: took}
		rows = append(rows, Row{Scenario: fanoutID, Name: b.name, Note: fmt.Sprintf("%d MiB of %d KiB values; ops/s inverse of the time until it serves (p50 = p99 = that time); leader CPU-s meanwhile in the CPU column", bytes>>20, valueSize>>10), Result: res})
		r.Logf("%-60s serving after %v, leader %.2f CPU-s", b.name, took.Round(100*time.Millisecond), res.CPU["leader"])
		rep.Stop()
		if b.cfg.Upstream == nil {
			leave(r, s.u, rep.Name)
		}
	}
	return rows
}

// fill puts n values under prefix through cli, one a put, from 8 writers.
func fill(r *runner, cli *clientv3.Client, prefix string, n int, value string) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				_, err := cli.Put(ctx, fmt.Sprintf("%s%06d", prefix, i), value)
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		r.Fatalf("fill: %v", err)
	}
}
