package balancer

import (
	"math/rand/v2"
	"sync/atomic"
	"time"

	grpcbalancer "google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// pickEndpoint is a ready connection to one member.
type pickEndpoint struct {
	sc   grpcbalancer.SubConn
	ep   *endpoint
	zone string
}

// picker routes each call by the route its context carries: reads to a
// healthy replica by the read policy, writes to the leader.
type picker struct {
	owner    *Balancer
	rr       *atomic.Uint64
	leader   int // index in voters; -1 if unknown or not ready
	voters   []pickEndpoint
	replicas []pickEndpoint
	// connecting: some connection is still opening, so a later picker
	// may have more ready endpoints.
	connecting bool
}

func (p *picker) Pick(info grpcbalancer.PickInfo) (grpcbalancer.PickResult, error) {
	c := callOf(info.Ctx)
	r := c.r
	var pe *pickEndpoint
	switch r {
	case routeBoundedRead:
		pe = p.pickFitting(c.budget, p.owner.clock.Now())
		if pe == nil {
			// Fail fast, not wait for a new picker: the interceptor sends
			// the read to a voter.
			return grpcbalancer.PickResult{}, status.Error(codes.Unavailable, "balancer: no replica within the read's staleness budget")
		}
	case routeRead:
		if p.owner.cfg.Policy != VotersOnly {
			pe = p.pickReplica()
		}
		if pe == nil {
			pe = p.inTurn(p.voters)
		}
	case routeVoterRead:
		pe = p.inTurn(p.voters)
		if pe == nil && p.connecting {
			// Wait for the next picker: a voter may be ready in it (a
			// client's first calls come while its connections open).
			return grpcbalancer.PickResult{}, grpcbalancer.ErrNoSubConnAvailable
		}
		if pe == nil {
			return grpcbalancer.PickResult{}, status.Error(codes.Unavailable, "balancer: the read must go to a voter (a learner refused it, or no replica fits its staleness budget) and no voter is reachable")
		}
	default:
		if p.leader >= 0 {
			pe = &p.voters[p.leader]
		} else {
			pe = p.inTurn(p.voters) // a follower forwards to the leader
		}
	}
	if pe == nil {
		// Last resort: a replica forwards writes and serves reads itself.
		pe = p.inTurn(p.replicas)
	}
	if pe == nil {
		return grpcbalancer.PickResult{}, grpcbalancer.ErrNoSubConnAvailable
	}
	ep := pe.ep
	c.picked = ep
	ep.inflight.Add(1)
	clock := p.owner.clock
	start := clock.Now()
	return grpcbalancer.PickResult{SubConn: pe.sc, Done: func(di grpcbalancer.DoneInfo) {
		ep.inflight.Add(-1)
		if di.Err == nil {
			ep.observe(clock.Since(start))
		}
		p.owner.finished(r, ep, di.Err)
	}}, nil
}

// inTurn takes the endpoints in turn.
func (p *picker) inTurn(eps []pickEndpoint) *pickEndpoint {
	if len(eps) == 0 {
		return nil
	}
	return &eps[p.rr.Add(1)%uint64(len(eps))]
}

// pickReplica applies the read policy to the healthy replicas; nil if none.
func (p *picker) pickReplica() *pickEndpoint {
	healthy := make([]*pickEndpoint, 0, len(p.replicas))
	for i := range p.replicas {
		if !p.replicas[i].ep.ejected.Load() {
			healthy = append(healthy, &p.replicas[i])
		}
	}
	return p.byPolicy(healthy)
}

// pickFitting picks among the healthy replicas whose staleness, as last
// reported and aged since, is within budget at now: those of the client's
// zone (Config.Zone) first, if any fits, then by the read policy. nil if
// none fits.
func (p *picker) pickFitting(budget time.Duration, now time.Time) *pickEndpoint {
	var fit, local []*pickEndpoint
	for i := range p.replicas {
		pe := &p.replicas[i]
		if pe.ep.ejected.Load() || pe.ep.staleness(now) > budget {
			continue
		}
		fit = append(fit, pe)
		if p.owner.cfg.Zone != "" && pe.zone == p.owner.cfg.Zone {
			local = append(local, pe)
		}
	}
	if len(local) > 0 {
		return p.byPolicy(local)
	}
	return p.byPolicy(fit)
}

// byPolicy applies the read policy to candidates; nil if there are none.
func (p *picker) byPolicy(healthy []*pickEndpoint) *pickEndpoint {
	if len(healthy) == 0 {
		return nil
	}
	turn := p.rr.Add(1)
	switch p.owner.cfg.Policy {
	case LeastOutstanding:
		return leastOutstanding(healthy, turn)
	case LatencyWeighted:
		return latencyWeighted(healthy)
	case ZoneAffinity:
		var local []*pickEndpoint
		for _, pe := range healthy {
			if pe.zone == p.owner.cfg.Zone {
				local = append(local, pe)
			}
		}
		if len(local) > 0 {
			return leastOutstanding(local, turn)
		}
		return leastOutstanding(healthy, turn)
	}
	return healthy[turn%uint64(len(healthy))]
}

// leastOutstanding takes the endpoint with the fewest calls in flight,
// starting the scan at turn so that ties rotate.
func leastOutstanding(eps []*pickEndpoint, turn uint64) *pickEndpoint {
	n := uint64(len(eps))
	best := eps[turn%n]
	for i := uint64(1); i < n; i++ {
		pe := eps[(turn+i)%n]
		if pe.ep.inflight.Load() < best.ep.inflight.Load() {
			best = pe
		}
	}
	return best
}

// latencyWeighted draws two endpoints and takes the one with the lower
// recent latency times calls in flight ("power of two choices"): fast
// replicas get more, slow ones still get some, so their figures stay
// current. An endpoint not yet measured wins, to be measured.
func latencyWeighted(eps []*pickEndpoint) *pickEndpoint {
	if len(eps) == 1 {
		return eps[0]
	}
	i := rand.IntN(len(eps))
	j := rand.IntN(len(eps) - 1)
	if j >= i {
		j++
	}
	a, b := eps[i], eps[j]
	if cost(b) < cost(a) {
		return b
	}
	return a
}

func cost(pe *pickEndpoint) float64 {
	return pe.ep.latency() * float64(pe.ep.inflight.Load()+1)
}
