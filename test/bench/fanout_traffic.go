package main

import "fmt"

// idleTraffic is what the leader sent and received over an arm's windows:
// raft messages' bytes to and from its peers, and gRPC calls it served.
type idleTraffic struct {
	sent, received, calls, seconds float64
}

func (t *idleTraffic) add(d idleTraffic, secs float64) {
	t.sent += d.sent
	t.received += d.received
	t.calls += d.calls
	t.seconds += secs
}

func (t idleTraffic) minus(o idleTraffic) idleTraffic {
	return idleTraffic{sent: t.sent - o.sent, received: t.received - o.received, calls: t.calls - o.calls}
}

func (t idleTraffic) text() string {
	if t.seconds == 0 {
		return "none measured"
	}
	return fmt.Sprintf("%.0f B sent to and %.0f B received from its peers, %.2f gRPC calls served",
		t.sent/t.seconds, t.received/t.seconds, t.calls/t.seconds)
}

func mustTraffic(r *runner, clientURL string) idleTraffic {
	t, err := leaderTraffic(clientURL)
	if err != nil {
		r.Fatalf("fanout-paired: %v", err)
	}
	return t
}

// leaderTraffic reads the counters of idleTraffic from the leader's
// /metrics.
func leaderTraffic(clientURL string) (idleTraffic, error) {
	fams, err := scrape(clientURL)
	if err != nil {
		return idleTraffic{}, err
	}
	sum := func(name string) float64 {
		var v float64
		if f := fams[name]; f != nil {
			for _, m := range f.Metric {
				v += m.GetCounter().GetValue()
			}
		}
		return v
	}
	return idleTraffic{sent: sum("etcd_network_peer_sent_bytes_total"), received: sum("etcd_network_peer_received_bytes_total"),
		calls: sum("grpc_server_handled_total")}, nil
}

// fanoutPairedComparisons are the report's ratios of the fanout-paired rows.
func fanoutPairedComparisons() []comparison {
	running, stopped := fanoutName(pairedE, pairedIdleRunning), fanoutName(pairedE, pairedIdleStopped)
	putsRunning, putsStopped := fanoutName(pairedE, pairedPutsRunning), fanoutName(pairedE, pairedPutsStopped)
	return []comparison{
		// No goal: the arms differ by more than the readers (docs/scaling.md,
		// "What these show, and what not"), so no ratio here meets or misses one.
		{"leader CPU idle with 16 cascaded replicas running vs the same 16 stopped (SIGSTOP), windows in ABBA order", running, stopped, metricLeaderPct, "", ""},
		{"leader CPU per put with 16 cascaded replicas running vs the same 16 stopped (SIGSTOP), 100 puts/s, windows in ABBA order", putsRunning, putsStopped, "leader CPU/10k", "", ""},
	}
}
