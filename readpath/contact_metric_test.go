package readpath

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/client/pkg/v3/types"
)

// The adapter reads rafthttp's counter for the member asked about, by the
// label rafthttp gives it (the member ID as types.ID writes it).
func TestMetricContactReadsTheSendersReceivedBytes(t *testing.T) {
	for _, help := range []string{"The total number of bytes received from peers.", "another etcd's help"} {
		reg := prometheus.NewRegistry()
		received := prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "etcd", Subsystem: "network", Name: "peer_received_bytes_total", Help: help,
		}, []string{"From"})
		reg.MustRegister(received)
		received.WithLabelValues(types.ID(0xa1).String()).Add(100)
		received.WithLabelValues(types.ID(0xb2).String()).Add(7)
		c := newMetricContact(reg)
		if (c.vec != nil) != (help == "The total number of bytes received from peers.") {
			t.Errorf("help %q: collector found %v", help, c.vec != nil)
		}
		checkContact(t, c)
	}
	c := newMetricContact(prometheus.NewRegistry())
	if c.vec != nil {
		t.Errorf("a collector found on a registry without one")
	}
	if got := c.ReceivedFrom(0xa1); got != 0 {
		t.Errorf("ReceivedFrom with no such metric = %v, want 0", got)
	}
}

func checkContact(t *testing.T, c metricContact) {
	t.Helper()
	if got := c.ReceivedFrom(0xa1); got != 100 {
		t.Errorf("ReceivedFrom(a1) = %v, want 100", got)
	}
	if got := c.ReceivedFrom(0xb2); got != 7 {
		t.Errorf("ReceivedFrom(b2) = %v, want 7", got)
	}
	if got := c.ReceivedFrom(0xc3); got != 0 {
		t.Errorf("ReceivedFrom(c3), a member nothing came from, = %v, want 0", got)
	}
}

// On the default registry, where etcd's rafthttp registers its metrics,
// the counter is found by its collector: its help text is v3.7.3's.
func TestMetricContactFindsEtcdsCounter(t *testing.T) {
	if c := newMetricContact(prometheus.DefaultGatherer); c.vec == nil {
		t.Fatal("etcd's etcd_network_peer_received_bytes_total not found on the default registry: every sample gathers the whole registry (its help text changed?)")
	}
}
