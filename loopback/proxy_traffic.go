package loopback

import (
	"sync/atomic"
	"time"
)

// Traffic is the bytes a proxy forwarded: Up from its clients to the
// target, Down back.
type Traffic struct {
	Up, Down int64
}

// Total is both directions together.
func (t Traffic) Total() int64 { return t.Up + t.Down }

// Sub is t less an earlier reading u.
func (t Traffic) Sub(u Traffic) Traffic { return Traffic{Up: t.Up - u.Up, Down: t.Down - u.Down} }

// Add is t and u together.
func (t Traffic) Add(u Traffic) Traffic { return Traffic{Up: t.Up + u.Up, Down: t.Down + u.Down} }

// trafficCounters count what the proxy forwarded: on every connection, and
// on those a process named by DelayFrom opened.
type trafficCounters struct {
	up, down         atomic.Int64
	upFrom, downFrom atomic.Int64
}

func (c *trafficCounters) add(up, fromDelayed bool, n int) {
	switch {
	case up && fromDelayed:
		c.upFrom.Add(int64(n))
	case fromDelayed:
		c.downFrom.Add(int64(n))
	}
	if up {
		c.up.Add(int64(n))
	} else {
		c.down.Add(int64(n))
	}
}

// Traffic is the bytes forwarded so far on every connection (dropped
// bytes not counted).
func (p *Proxy) Traffic() Traffic {
	return Traffic{Up: p.traffic.up.Load(), Down: p.traffic.down.Load()}
}

// TrafficFrom is the bytes forwarded so far on the connections of the
// processes named by DelayFrom (with any delay, 0 included) at the time:
// with every process of a far region named, what crossed between regions.
func (p *Proxy) TrafficFrom() Traffic {
	return Traffic{Up: p.traffic.upFrom.Load(), Down: p.traffic.downFrom.Load()}
}

// Jitter delays every delayed chunk (Delay, DelayFrom) by up to j more,
// uniformly at random, keeping each direction's chunks in order, until
// Heal. Zero stops it.
func (p *Proxy) Jitter(j time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.jitter = j
}
