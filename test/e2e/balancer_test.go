package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/understudy-kv/understudy/balancer"
	"github.com/understudy-kv/understudy/test/harness"
)

// metric sums the series of a metric (a PromQL series name) whose labels
// include every "name=value" given, as served at url (a member's or
// replica's base URL, whose /metrics it scrapes).
func metric(t *testing.T, url, name string, labels ...string) float64 {
	t.Helper()
	return harness.MustScrape(t, url+"/metrics").Sum(name, labels...)
}

// handled is how many calls of a KV method a voter has handled.
func handled(t *testing.T, m *harness.Member, method string) float64 {
	return metric(t, m.ClientURL, "grpc_server_handled_total", "grpc_method="+method, "grpc_service=etcdserverpb.KV")
}

// served is how many KV calls of a method and read mode a replica has
// served (mode "" for writes).
func served(t *testing.T, metricsURL, method, mode string) float64 {
	return metric(t, metricsURL, "understudy_replica_requests_total", "method="+method, "mode="+mode, "service=KV")
}

type balancedReplica struct {
	*replica
	metricsURL string
}

func TestBalancer(t *testing.T) {
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, Kinds: []harness.Kind{harness.KindPrimary, harness.KindPrimary, harness.KindPrimary}})
	var reps []balancedReplica
	for i := range 2 {
		mu := harness.URL(harness.FreePort(t))
		r := startReplica(t, bins, c, fmt.Sprintf("r%d", i+1), replicaOpts{Extra: []string{"--listen-metrics-urls", mu}})
		reps = append(reps, balancedReplica{r, mu})
	}
	b, err := balancer.New(balancer.Config{
		Endpoints: []string{c.Members[0].ClientURL},
		Client:    clientv3.Config{DialTimeout: 5 * time.Second, Logger: zap.NewNop()},
		Logger:    zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)),
		// Probe often, so that a killed replica is ejected quickly.
		ProbeInterval: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	cli := b.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}

	t.Run("reads reach only replicas, writes only the leader", func(t *testing.T) {
		leader := c.Leader(t)
		var rangesBefore, putsBefore []float64
		for _, m := range c.Members {
			rangesBefore = append(rangesBefore, handled(t, m, "Range"))
			putsBefore = append(putsBefore, handled(t, m, "Put"))
		}
		var strongBefore, putsAtReplicas float64
		for _, r := range reps {
			strongBefore += served(t, r.metricsURL, "Range", "strong")
			putsAtReplicas += served(t, r.metricsURL, "Put", "")
		}

		const reads, writes = 10000, 500
		var failed atomic.Int64
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < reads; i += 16 {
					if _, err := cli.Get(ctx, "k"); err != nil {
						failed.Add(1)
					}
				}
			}()
		}
		for i := range writes {
			if _, err := cli.Put(ctx, "w/"+strconv.Itoa(i), "v"); err != nil {
				t.Fatalf("put %d: %v", i, err)
			}
		}
		wg.Wait()
		if n := failed.Load(); n > 0 {
			t.Fatalf("%d of %d reads failed", n, reads)
		}
		for i, m := range c.Members {
			if d := handled(t, m, "Range") - rangesBefore[i]; d != 0 {
				t.Errorf("voter %s handled %.0f reads with both replicas healthy, want 0", m.Name, d)
			}
			d := handled(t, m, "Put") - putsBefore[i]
			switch {
			case m == leader && d != writes:
				t.Errorf("the leader %s handled %.0f of %d puts", m.Name, d, writes)
			case m != leader && d != 0:
				t.Errorf("follower %s handled %.0f puts, want 0: writes go to the leader", m.Name, d)
			}
		}
		var strong, puts float64
		for _, r := range reps {
			n := served(t, r.metricsURL, "Range", "strong")
			if n == 0 {
				t.Errorf("replica %s served no reads", r.Name)
			}
			strong += n
			puts += served(t, r.metricsURL, "Put", "")
		}
		if strong-strongBefore < reads {
			t.Errorf("replicas served %.0f strong reads, want at least %d", strong-strongBefore, reads)
		}
		if puts != putsAtReplicas {
			t.Errorf("replicas were sent %.0f puts, want 0", puts-putsAtReplicas)
		}
	})

	t.Run("concurrency mutex and election", func(t *testing.T) {
		s1, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
		if err != nil {
			t.Fatal(err)
		}
		defer s1.Close()
		s2, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()

		m1, m2 := concurrency.NewMutex(s1, "/lock"), concurrency.NewMutex(s2, "/lock")
		if err := m1.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m2.TryLock(ctx); err != concurrency.ErrLocked {
			t.Fatalf("second TryLock while held: %v, want ErrLocked", err)
		}
		locked := make(chan error, 1)
		go func() { locked <- m2.Lock(ctx) }()
		select {
		case err := <-locked:
			t.Fatalf("second Lock returned (%v) while the first holds the lock", err)
		default:
		}
		if err := m1.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-locked; err != nil {
			t.Fatalf("second Lock after Unlock: %v", err)
		}
		if err := m2.Unlock(ctx); err != nil {
			t.Fatal(err)
		}

		e1, e2 := concurrency.NewElection(s1, "/elect"), concurrency.NewElection(s2, "/elect")
		if err := e1.Campaign(ctx, "one"); err != nil {
			t.Fatal(err)
		}
		won := make(chan error, 1)
		go func() { won <- e2.Campaign(ctx, "two") }()
		l, err := e1.Leader(ctx)
		if err != nil || string(l.Kvs[0].Value) != "one" {
			t.Fatalf("leader %v, %v; want one", l, err)
		}
		if err := e1.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-won; err != nil {
			t.Fatalf("second campaign after resign: %v", err)
		}
		l, err = e2.Leader(ctx)
		if err != nil || string(l.Kvs[0].Value) != "two" {
			t.Fatalf("leader %v, %v; want two", l, err)
		}
	})

	t.Run("a killed replica's reads move to the other and come back after restart", func(t *testing.T) {
		dead, alive := reps[0], reps[1]
		const workers = 8
		var ok, failed atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := cli.Get(ctx, "k"); err != nil {
						failed.Add(1)
					} else {
						ok.Add(1)
					}
				}
			}()
		}
		defer func() { close(stop); wg.Wait() }()
		harness.WaitFor(t, 30*time.Second, "reads under way", func() (bool, error) { return ok.Load() > 500, nil })

		dead.Kill()
		atKill := served(t, alive.metricsURL, "Range", "strong")
		okAtKill := ok.Load()
		harness.WaitFor(t, 30*time.Second, "2000 reads succeeded and served by the other replica since the kill", func() (bool, error) {
			return served(t, alive.metricsURL, "Range", "strong")-atKill >= 2000 && ok.Load()-okAtKill >= 2000, nil
		})
		t.Logf("%d reads succeeded and %d failed after the kill", ok.Load()-okAtKill, failed.Load())
		if n := failed.Load(); n > workers {
			t.Fatalf("%d reads failed after the kill, more than the %d that can have been in flight on it", n, workers)
		}

		dead.Restart(t)
		direct := client(t, dead.ClientURL)
		harness.WaitFor(t, time.Minute, "restarted replica serving", func() (bool, error) {
			c, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := direct.Get(c, "k", clientv3.WithSerializable())
			return err == nil, err
		})
		back := served(t, dead.metricsURL, "Range", "strong")
		harness.WaitFor(t, 30*time.Second, "reads on the restarted replica", func() (bool, error) {
			return served(t, dead.metricsURL, "Range", "strong")-back >= 100, nil
		})
	})

	t.Run("writes follow a new leader", func(t *testing.T) {
		old := c.Leader(t)
		var next *harness.Member
		for _, m := range c.Members {
			if m != old {
				next = m
				break
			}
		}
		var written, failed atomic.Int64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// A put in flight when leadership moves may fail with etcd's
				// "leader changed"; it is ambiguous, so not sent again.
				if _, err := cli.Put(ctx, "lc/"+strconv.Itoa(i%100), "v"); err != nil {
					failed.Add(1)
					continue
				}
				written.Add(1)
			}
		}()
		defer func() {
			close(stop)
			<-done
			t.Logf("%d puts, %d failed during the leader change", written.Load(), failed.Load())
		}()
		harness.WaitFor(t, 30*time.Second, "writes under way", func() (bool, error) { return written.Load() > 100, nil })

		lc := client(t, old.ClientURL)
		if _, err := lc.MoveLeader(ctx, next.ID); err != nil {
			t.Fatalf("move leader to %s: %v", next.Name, err)
		}
		c.WaitLeader(t, 30*time.Second) // every member agrees
		moved := time.Now()
		// The members' default election timeout is one second.
		harness.WaitFor(t, time.Second, "the balancer sends writes to the new leader", func() (bool, error) {
			return b.Leader() == next.ClientURL, nil
		})
		t.Logf("writes switched to the new leader %v after it was elected", time.Since(moved))
		before := handled(t, next, "Put")
		harness.WaitFor(t, 10*time.Second, "puts handled by the new leader", func() (bool, error) {
			return handled(t, next, "Put")-before >= 50, nil
		})
		oldBefore := handled(t, old, "Put")
		n := written.Load()
		harness.WaitFor(t, 10*time.Second, "more puts", func() (bool, error) { return written.Load()-n >= 50, nil })
		if d := handled(t, old, "Put") - oldBefore; d != 0 {
			t.Errorf("the old leader still handled %.0f puts after the switch", d)
		}
	})
}
