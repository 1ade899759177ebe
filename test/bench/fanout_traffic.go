package main

import "fmt"

// idleTraffic is what the leader sent and received over an arm's windows:
// raft messages' bytes to and from its peers, and gRPC calls it served;
// and its Go runtime's collections (an idle process collects at least
// every two minutes, a cost of its own in the windows).
type idleTraffic struct {
	sent, received, calls, gcs, seconds float64
}

func (t *idleTraffic) add(d idleTraffic, secs float64) {
	t.sent += d.sent
	t.received += d.received
	t.calls += d.calls
	t.gcs += d.gcs
	t.seconds += secs
}

func (t idleTraffic) minus(o idleTraffic) idleTraffic {
	return idleTraffic{sent: t.sent - o.sent, received: t.received - o.received, calls: t.calls - o.calls, gcs: t.gcs - o.gcs}
}

func (t idleTraffic) text() string {
	if t.seconds == 0 {
		return "none measured"
	}
	return fmt.Sprintf("%.0f B sent to and %.0f B received from its peers, %.2f gRPC calls served; %.0f collections in %.0f s",
		t.sent/t.seconds, t.received/t.seconds, t.calls/t.seconds, t.gcs, t.seconds)
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
	var gcs float64
	if f := fams["go_gc_duration_seconds"]; f != nil && len(f.Metric) > 0 {
		gcs = float64(f.Metric[0].GetSummary().GetSampleCount())
	}
	return idleTraffic{sent: sum("etcd_network_peer_sent_bytes_total"), received: sum("etcd_network_peer_received_bytes_total"),
		calls: sum("grpc_server_handled_total"), gcs: gcs}, nil
}

// fanoutPairedComparisons are the report's ratios of the fanout-paired rows.
func fanoutPairedComparisons() []comparison {
	name := func(kind string) string { return fanoutName(pairedE, kind) }
	sent := func(kind string) string { return name(kind + pairedSentSuffix) }
	const how = "windows alternating, a decoy cluster's 16 cascaded replicas running whenever these are stopped"
	return []comparison{
		{"leader CPU idle with 16 cascaded replicas running vs the same 16 stopped (SIGSTOP), " + how, name(pairedIdleRunning), name(pairedIdleStopped), metricLeaderPct, "≤ 1.1", ""},
		{"leader CPU per put with 16 cascaded replicas running vs the same 16 stopped (SIGSTOP), 100 puts/s, " + how, name(pairedPutsRunning), name(pairedPutsStopped), "leader CPU/10k", "≤ 1.1", ""},
		{"bytes the idle leader sends its peers a second with 16 cascaded replicas running vs stopped, " + how, sent(pairedIdleRunning), sent(pairedIdleStopped), metricPeerBps, "", ""},
		{"bytes the leader sends its peers per put with 16 cascaded replicas running vs stopped, 100 puts/s, " + how, sent(pairedPutsRunning), sent(pairedPutsStopped), metricPeerPerPut, "", ""},
	}
}
