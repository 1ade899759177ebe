package readindex

import (
	"net"
	"net/url"
	"strings"
	"time"
)

// Which hubs a replica asks, and for how long it keeps away from one. A hub
// costs the replica's strong reads its answer's latency, and a hub whose
// index the replica cannot reach costs them the whole wait: so a hub is
// dropped for a back-off after one answer the replica could not use (an
// error, a refused answer, an index not reached within the timeout), or
// after slowStrikes answers in a row that took more than half the timeout.
// The back-off doubles with every drop in a row, from viaBackoff to
// maxViaBackoff; a good answer resets it.
//
// hubHealth is the pure core: it is told outcomes and times, and decides;
// viaRounds owns it, under its lock.

// viaBackoff is how long a replica does its own rounds after its hub
// failed it once.
const viaBackoff = time.Second

// maxViaBackoff bounds the back-off of a hub that keeps failing.
const maxViaBackoff = 32 * time.Second

// slowStrikes is how many slow answers in a row drop a hub.
const slowStrikes = 3

type hubHealth struct {
	hubs map[string]*hubState
}

type hubState struct {
	avoidUntil time.Time
	// drops counts drops since the last good answer; slow counts slow
	// answers in a row.
	drops, slow int
}

func newHubHealth() *hubHealth {
	return &hubHealth{hubs: map[string]*hubState{}}
}

func (h *hubHealth) state(hub string) *hubState {
	s, ok := h.hubs[hub]
	if !ok {
		s = &hubState{}
		h.hubs[hub] = s
	}
	return s
}

// usable reports whether the replica may ask hub at now.
func (h *hubHealth) usable(hub string, now time.Time) bool {
	s, ok := h.hubs[hub]
	return !ok || !now.Before(s.avoidUntil)
}

// avoided is the number of hubs in a back-off at now.
func (h *hubHealth) avoided(now time.Time) int {
	n := 0
	for _, s := range h.hubs {
		if now.Before(s.avoidUntil) {
			n++
		}
	}
	return n
}

// failed drops hub at now and returns for how long.
func (h *hubHealth) failed(hub string, now time.Time) time.Duration {
	s := h.state(hub)
	s.drops++
	s.slow = 0
	d := viaBackoff << min(s.drops-1, 5)
	d = min(d, maxViaBackoff)
	s.avoidUntil = now.Add(d)
	return d
}

// answered records an answer the replica used, which took latency with
// the timeout then in force (viaRounds.timeout): slower than half of it is
// slow. It returns the back-off if that answer was the slowStrikes-th slow
// one in a row (then the hub is dropped), else 0.
func (h *hubHealth) answered(hub string, now time.Time, latency, timeout time.Duration) time.Duration {
	s := h.state(hub)
	if latency <= timeout/2 {
		s.drops, s.slow = 0, 0
		return 0
	}
	if s.slow++; s.slow < slowStrikes {
		return 0
	}
	return h.failed(hub, now)
}

// memberAt finds the member that advertises hub as a client URL.
func memberAt(members []Peer, hub string) (Peer, bool) {
	want, ok := normalURL(hub)
	if !ok {
		return Peer{}, false
	}
	for _, m := range members {
		for _, u := range m.ClientURLs {
			if got, ok := normalURL(u); ok && got == want {
				return m, true
			}
		}
	}
	return Peer{}, false
}

// normalURL is scheme://host:port of u, lower case, with the scheme's
// default port made explicit; false if u is not such a URL.
func normalURL(u string) (string, bool) {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" || strings.Trim(p.Path, "/") != "" {
		return "", false
	}
	scheme, host, port := strings.ToLower(p.Scheme), strings.ToLower(p.Hostname()), p.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		default:
			return "", false
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port), true
}
