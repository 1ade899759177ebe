package readpath

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/client/pkg/v3/types"
)

// The adapter reads rafthttp's counter for the member asked about, by the
// label rafthttp gives it (the member ID as types.ID writes it).
func TestMetricContactReadsTheSendersReceivedBytes(t *testing.T) {
	reg := prometheus.NewRegistry()
	received := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "etcd", Subsystem: "network", Name: "peer_received_bytes_total", Help: "as rafthttp's",
	}, []string{"From"})
	reg.MustRegister(received)
	received.WithLabelValues(types.ID(0xa1).String()).Add(100)
	received.WithLabelValues(types.ID(0xb2).String()).Add(7)

	c := metricContact{reg}
	if got := c.ReceivedFrom(0xa1); got != 100 {
		t.Errorf("ReceivedFrom(a1) = %v, want 100", got)
	}
	if got := c.ReceivedFrom(0xb2); got != 7 {
		t.Errorf("ReceivedFrom(b2) = %v, want 7", got)
	}
	if got := c.ReceivedFrom(0xc3); got != 0 {
		t.Errorf("ReceivedFrom(c3), a member nothing came from, = %v, want 0", got)
	}
	if got := (metricContact{prometheus.NewRegistry()}).ReceivedFrom(0xa1); got != 0 {
		t.Errorf("ReceivedFrom with no such metric = %v, want 0", got)
	}
}
