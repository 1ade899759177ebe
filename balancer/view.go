package balancer

import (
	"math"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/wire"
)

// endpoint is one member's client URL with what the picker needs to know
// about it. It keeps its identity across refreshes, so its counters do too.
type endpoint struct {
	url  string
	addr string // host:port, as gRPC dials it

	// Read by the picker on every call.
	ejected  atomic.Bool
	inflight atomic.Int64
	ewmaNs   atomic.Uint64 // float64 bits: recent latency, nanoseconds
	// fresh is the replica's last reported staleness bound
	// (wire.StalenessBoundKey), from a probe or any answer; nil if none.
	fresh atomic.Pointer[freshReport]
	// tightFailed is when a probe with the tightest budget last failed,
	// in Unix ns (see probeReplica); 0 if never.
	tightFailed atomic.Int64
}

// freshReport is a staleness bound a replica reported in an answer to a
// call that started at at: its state was then at most bound old.
type freshReport struct {
	bound time.Duration
	at    time.Time
}

// learn records the staleness bound in an answer's header, for a call that
// started at start (before the replica measured it, so that the age added
// later never falls short).
func (e *endpoint) learn(hdr metadata.MD, start time.Time) {
	vs := hdr.Get(wire.StalenessBoundKey)
	if len(vs) == 0 {
		return
	}
	d, err := time.ParseDuration(vs[0])
	if err != nil || d < 0 {
		return
	}
	next := &freshReport{bound: d, at: start}
	for {
		old := e.fresh.Load()
		if old != nil && old.at.After(start) {
			return // a later call has told more
		}
		if e.fresh.CompareAndSwap(old, next) {
			return
		}
	}
}

// staleness is how stale the replica may be at now, by its last report:
// the bound it reported plus the time since; the largest duration if it
// never reported one.
func (e *endpoint) staleness(now time.Time) time.Duration {
	r := e.fresh.Load()
	if r == nil {
		return math.MaxInt64
	}
	return r.bound + max(now.Sub(r.at), 0)
}

// observe folds one call's latency into the endpoint's moving average.
func (e *endpoint) observe(d time.Duration) {
	const alpha = 0.2
	for {
		old := e.ewmaNs.Load()
		prev := math.Float64frombits(old)
		next := float64(d)
		if prev != 0 {
			next = alpha*float64(d) + (1-alpha)*prev
		}
		if e.ewmaNs.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}

func (e *endpoint) latency() float64 { return math.Float64frombits(e.ewmaNs.Load()) }

// member is what discovery learned about one member.
type member struct {
	id      uint64
	name    string
	learner bool
	zone    string
	ep      *endpoint
}

// view is the Balancer's picture of the cluster. The discovery loop writes
// it; gRPC's balancer reads snapshots of it when it builds a picker.
type view struct {
	mu      sync.Mutex
	members map[string]*member // by address
	leader  string             // address; "" if unknown
	version uint64             // bumped on every change
}

func newView() *view { return &view{members: map[string]*member{}} }

// addrOf turns a client URL into the host:port gRPC dials.
func addrOf(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return p.Host
	}
	return u
}

// setMembers replaces the membership, keeping the endpoints (and their
// counters and ejections) of members that stay. Each member is listed under
// its first client URL; a member with none is not reachable by clients.
func (v *view) setMembers(ms []member, urls []string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	next := make(map[string]*member, len(ms))
	changed := len(ms) != len(v.members)
	for i := range ms {
		m := ms[i]
		addr := addrOf(urls[i])
		if old, ok := v.members[addr]; ok {
			m.ep, m.zone = old.ep, old.zone
			changed = changed || old.id != m.id || old.learner != m.learner || old.name != m.name
		} else {
			m.ep = &endpoint{url: urls[i], addr: addr}
			changed = true
		}
		next[addr] = &m
	}
	v.members = next
	if changed {
		v.version++
	}
	return changed
}

// setLeader records the leader's address.
func (v *view) setLeader(addr string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.leader == addr {
		return false
	}
	v.leader = addr
	v.version++
	return true
}

// setZone records a replica's zone, as its probe told it.
func (v *view) setZone(addr, zone string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	m, ok := v.members[addr]
	if !ok || m.zone == zone {
		return false
	}
	m.zone = zone
	v.version++
	return true
}

// urls lists every member's client URL, sorted.
func (v *view) urls() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]string, 0, len(v.members))
	for _, m := range v.members {
		out = append(out, m.ep.url)
	}
	slices.Sort(out)
	return out
}

// snapshot copies the view for a picker.
func (v *view) snapshot() (leader string, members map[string]member) {
	v.mu.Lock()
	defer v.mu.Unlock()
	members = make(map[string]member, len(v.members))
	for a, m := range v.members {
		members[a] = *m
	}
	return v.leader, members
}

// learners lists the replicas' members.
func (v *view) learners() []member {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []member
	for _, m := range v.members {
		if m.learner {
			out = append(out, *m)
		}
	}
	return out
}

// byID finds a member's address by ID.
func (v *view) byID(id uint64) (string, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for a, m := range v.members {
		if m.id == id {
			return a, true
		}
	}
	return "", false
}

// versionNow returns the member URLs, sorted, with the view's version.
func (v *view) versionNow() ([]string, uint64) {
	v.mu.Lock()
	version := v.version
	v.mu.Unlock()
	return v.urls(), version
}
