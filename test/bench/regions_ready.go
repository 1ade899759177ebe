package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// readyPollEvery is how often the regions scenario asks the replica's
// /readyz while it measures: a kubelet probe's shortest period. Each ask
// runs etcd's linearizable_read check, a ReadIndex round through the
// leader in etcd's read loop, which the replica's own rounds queue behind:
// asked every 200 ms at 150 ms RTT, it doubled strong-read latency.
const readyPollEvery = time.Second

// readyWatch polls a replica's /readyz and notes the voters' raft term,
// phase by phase (one phase per RTT), to tell whether readiness flaps or
// the leader changes at WAN latency.
type readyWatch struct {
	url     string
	cluster *harness.Cluster
	stop    context.CancelFunc
	done    chan struct{}

	mu    sync.Mutex
	phase *readyPhase
	// phases in the order begun.
	phases []*readyPhase
}

// readyPhase is what the polls saw at one RTT.
type readyPhase struct {
	rtt              time.Duration
	start            time.Time
	seconds          float64
	polls, failed    int
	firstFailure     string
	lat              []time.Duration
	termStart, term  uint64
	leaderStart, ldr uint64
}

// watchReady starts polling url/readyz until stop.
func watchReady(url string, c *harness.Cluster) *readyWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &readyWatch{url: url, cluster: c, stop: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w
}

func (w *readyWatch) run(ctx context.Context) {
	defer close(w.done)
	tick := time.NewTicker(readyPollEvery)
	defer tick.Stop()
	cli := &http.Client{Timeout: 5 * time.Second}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t0 := time.Now()
		fail := ""
		resp, err := cli.Get(w.url + "/readyz")
		if err != nil {
			fail = err.Error()
		} else {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				fail = resp.Status
			}
		}
		w.mu.Lock()
		if ph := w.phase; ph != nil {
			ph.polls++
			ph.lat = append(ph.lat, time.Since(t0))
			if fail != "" {
				ph.failed++
				if ph.firstFailure == "" {
					ph.firstFailure = fail
				}
			}
		}
		w.mu.Unlock()
	}
}

// begin ends the current phase and starts one at rtt.
func (w *readyWatch) begin(rtt time.Duration) {
	term, leader := w.term()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.endLocked(term, leader)
	w.phase = &readyPhase{rtt: rtt, start: time.Now(), termStart: term, leaderStart: leader}
	w.phases = append(w.phases, w.phase)
}

func (w *readyWatch) endLocked(term, leader uint64) {
	if ph := w.phase; ph != nil {
		ph.seconds = time.Since(ph.start).Seconds()
		ph.term, ph.ldr = term, leader
	}
	w.phase = nil
}

// term is the highest raft term and the leader the voters report now.
func (w *readyWatch) term() (term, leader uint64) {
	for _, m := range w.cluster.Members {
		if st, err := w.cluster.Status(m); err == nil {
			term, leader = max(term, st.RaftTerm), st.Leader
		}
	}
	return term, leader
}

// finish stops polling and returns a row per phase.
func (w *readyWatch) finish() []Row {
	term, leader := w.term()
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	w.endLocked(term, leader)
	var rows []Row
	for _, ph := range w.phases {
		slices.Sort(ph.lat)
		res := Result{Ops: ph.polls - ph.failed, Errors: ph.failed, Seconds: ph.seconds,
			P50: percentile(ph.lat, 0.5), P99: percentile(ph.lat, 0.99)}
		if ph.seconds > 0 {
			res.Throughput = float64(res.Ops) / ph.seconds
		}
		note := fmt.Sprintf("/readyz asked every %v while the rows at this RTT ran (%.0f s): %d of %d answers not ready; voters' raft term %d → %d, leader %x → %x",
			readyPollEvery, ph.seconds, ph.failed, ph.polls, ph.termStart, ph.term, ph.leaderStart, ph.ldr)
		if ph.firstFailure != "" {
			note += "; first failure: " + ph.firstFailure
		}
		rows = append(rows, Row{Scenario: regionsID, Name: "replica /readyz, " + rttName(ph.rtt), Note: note, Result: res})
	}
	return rows
}
