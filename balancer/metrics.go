package balancer

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	requests   *prometheus.CounterVec
	ejections  *prometheus.CounterVec
	replicas   prometheus.Gauge
	leaderSeen *prometheus.CounterVec
	bounded    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "balancer", Name: "requests_total",
			Help: "Calls sent by balanced clients, by route (read; bounded-read for serializable reads with a staleness budget; voter-read for reads a learner refused or no replica could serve within their budget; write) and endpoint.",
		}, []string{"route", "endpoint"}),
		ejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "balancer", Name: "ejections_total",
			Help: "Replicas taken out of the read rotation, by endpoint and reason (probe: down or staler than the bound; learner-refusal).",
		}, []string{"endpoint", "reason"}),
		replicas: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "understudy", Subsystem: "balancer", Name: "healthy_replicas",
			Help: "Replicas currently in the read rotation.",
		}),
		leaderSeen: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "balancer", Name: "leader_changes_total",
			Help: "Leaders the balancer has switched writes to, by endpoint.",
		}, []string{"endpoint"}),
		bounded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "balancer", Name: "bounded_reads_total",
			Help: "Serializable reads with a staleness budget answered, by where: replica, or voter-none-fits (no replica's reported staleness fitted), voter-replica-failed (the replica could not prove the budget in time), voter-voters-only (policy); voters serve them linearizably.",
		}, []string{"served_by"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.ejections, m.replicas, m.leaderSeen, m.bounded)
	}
	return m
}
