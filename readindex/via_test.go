package readindex

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zaptest"
)

// hubID is the member ID of the first fake hub; the next ones follow.
const hubID = 0x10

// hub is a fake --read-index-via replica: it answers what answer says.
type hub struct {
	srv   *httptest.Server
	asked atomic.Int32
	// auth is the last Authorization header it was sent.
	auth atomic.Value
}

func newHub(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *hub {
	h := &hub{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.asked.Add(1)
		h.auth.Store(r.Header.Get("Authorization"))
		answer(w, r)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// answerAs answers as member of cluster c1 in term 5.
func answerAs(member, index uint64) func(http.ResponseWriter, *http.Request) {
	return answerWith(Answer{Cluster: "c1", Member: idHex(member), Term: 5, Index: index})
}

// answerWith answers a, with the request's nonce unless a names one.
func answerWith(a Answer) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		b := a
		if b.Nonce == "" {
			b.Nonce = r.URL.Query().Get(NonceParam)
		}
		_ = json.NewEncoder(w).Encode(b)
	}
}

// viaFixture is a viaRounds of a replica in cluster c1, term 5, commit
// index 3, with leader contact, whose member list has each hub i as member
// hubID+i; its own rounds are counted and its applied index is moved by
// the test (applied closed: everything is applied).
type viaFixture struct {
	// roundTook is what the replica's own rounds take lately (0: unknown).
	roundTook atomic.Int64
	v         *viaRounds
	clock     *clockwork.FakeClock
	reg       *prometheus.Registry
	own       atomic.Int32
	waited    chan uint64
	applied   chan struct{}
	contact   atomic.Bool
	members   []Peer
}

func newViaFixture(t *testing.T, cfg ViaConfig, hubs ...*hub) *viaFixture {
	fx := &viaFixture{clock: clockwork.NewFakeClock(), reg: prometheus.NewRegistry(), waited: make(chan uint64, 64), applied: make(chan struct{})}
	fx.contact.Store(true)
	for i, h := range hubs {
		cfg.URLs = append(cfg.URLs, h.srv.URL)
		fx.members = append(fx.members, Peer{ID: hubID + uint64(i), ClientURLs: []string{h.srv.URL}})
	}
	if cfg.Timeout == 0 {
		// Requests to the fake hubs are real HTTP, bounded by the real
		// clock: on a loaded machine they must not reach it. A test that
		// needs it to pass sets a short one.
		cfg.Timeout = 10 * time.Second
	}
	local := viaLocal{
		cluster:   "c1",
		members:   func() []Peer { return fx.members },
		term:      func() uint64 { return 5 },
		committed: func() uint64 { return 3 },
		applyWait: func(index uint64) <-chan struct{} { fx.waited <- index; return fx.applied },
		contact:   fx.contact.Load,
		roundTook: func() time.Duration { return time.Duration(fx.roundTook.Load()) },
	}
	fx.v = newViaRounds(zaptest.NewLogger(t), cfg, fx.clock, local, func(context.Context) error { fx.own.Add(1); return nil }, fx.reg)
	return fx
}

// round does one round and requires it to succeed.
func (fx *viaFixture) round(t *testing.T) (own bool) {
	t.Helper()
	own, err := fx.v.round(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return own
}

func (fx *viaFixture) rejections(reason string) float64 {
	return counterValue(nil, fx.v.m.rejections.WithLabelValues(reason))
}

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil && t != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func TestViaRoundWaitsUntilTheHubsIndexIsApplied(t *testing.T) {
	h := newHub(t, answerAs(hubID, 42))
	fx := newViaFixture(t, ViaConfig{}, h)
	type result struct {
		own bool
		err error
	}
	done := make(chan result, 1)
	go func() { own, err := fx.v.round(context.Background()); done <- result{own, err} }()
	if got := recv(t, fx.waited); got != 42 {
		t.Fatalf("waited for index %d, want the hub's 42", got)
	}
	select {
	case r := <-done:
		t.Fatalf("the round ended (%+v) before index 42 was applied here", r)
	default:
	}
	close(fx.applied)
	if r := recv(t, done); r.err != nil || r.own {
		t.Fatalf("round: own %v, %v; want through the hub", r.own, r.err)
	}
	if fx.own.Load() != 0 {
		t.Fatal("an own round was done although the hub answered")
	}
}

// Every answer the replica cannot trust or use falls back to an own round
// and keeps the hub away for the back-off, counted by reason.
func TestViaRoundFallsBackToItsOwnRound(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		answer       func(http.ResponseWriter, *http.Request)
		notMember    bool
		timeout      time.Duration // 0: the fixture's
	}{
		{"hub at no member's client URL", reasonNotMember, answerAs(hubID, 42), true, 0},
		{"another cluster's hub", reasonWrongCluster, answerWith(Answer{Cluster: "c2", Member: idHex(hubID), Term: 5, Index: 42}), false, 0},
		{"hub naming another member", reasonWrongMember, answerAs(hubID+7, 42), false, 0},
		{"hub naming no member (an older hub)", reasonWrongMember, answerWith(Answer{Cluster: "c1", Index: 42}), false, 0},
		{"hub answering another request (its nonce)", reasonWrongNonce, answerWith(Answer{Cluster: "c1", Member: idHex(hubID), Term: 5, Index: 42, Nonce: "0123"}), false, 0},
		{"hub answering without the nonce (an older hub, a cache)", reasonWrongNonce, func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode(Answer{Cluster: "c1", Member: idHex(hubID), Term: 5, Index: 42})
		}, false, 0},
		{"hub in an older term", reasonStaleTerm, answerWith(Answer{Cluster: "c1", Member: idHex(hubID), Term: 4, Index: 42}), false, 0},
		{"hub answering below the replica's commit index", reasonIndexBehind, answerAs(hubID, 2), false, 0},
		{"hub answering index 0", reasonIndexBehind, answerAs(hubID, 0), false, 0},
		{"hub without a round", reasonRefused, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "read index: context deadline exceeded", http.StatusServiceUnavailable)
		}, false, 0},
		{"hub refusing the replica's credentials", reasonUnauthorized, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "read index: user name is empty", http.StatusUnauthorized)
		}, false, 0},
		{"hub that does not answer in time", reasonUnreachable, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, false, 100 * time.Millisecond},
		{"hub answering garbage", reasonMalformed, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{")) }, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub(t, tc.answer)
			fx := newViaFixture(t, ViaConfig{Timeout: tc.timeout}, h)
			close(fx.applied)
			if tc.notMember {
				fx.members = []Peer{{ID: hubID, ClientURLs: []string{"http://127.0.0.1:1"}}}
			}
			if !fx.round(t) || fx.own.Load() != 1 || len(fx.waited) != 0 {
				t.Fatalf("own rounds %d, index waits %d: want the own round only", fx.own.Load(), len(fx.waited))
			}
			if got := fx.rejections(tc.reason); got != 1 {
				t.Fatalf("rejections{reason=%q} = %v, want 1", tc.reason, got)
			}
			if got := counterValue(t, fx.v.m.rounds.WithLabelValues("own")); got != 1 {
				t.Fatalf("own rounds counted %v, want 1", got)
			}
			// Within the backoff, the hub is left alone.
			asked := h.asked.Load()
			if fx.v.useHub() || !fx.round(t) || h.asked.Load() != asked || fx.own.Load() != 2 {
				t.Fatalf("hub asked %d more times, own rounds %d: want 0 and 2", h.asked.Load()-asked, fx.own.Load())
			}
			// After it, the hub is asked again.
			fx.clock.Advance(viaBackoff)
			if !fx.v.useHub() {
				t.Fatal("hub still avoided after the back-off")
			}
			fx.round(t)
			if tc.notMember {
				asked-- // never asked: not a member
			}
			if h.asked.Load() != asked+1 {
				t.Fatalf("hub asked %d times after the backoff, want %d", h.asked.Load(), asked+1)
			}
		})
	}
}

// Cut off from its leader, the replica does not ask its hub (it could not
// tell a stale answer), and does not hold that against the hub.
func TestViaRoundNeedsLeaderContact(t *testing.T) {
	h := newHub(t, answerAs(hubID, 42))
	fx := newViaFixture(t, ViaConfig{}, h)
	close(fx.applied)
	fx.contact.Store(false)
	if fx.v.useHub() || !fx.round(t) || h.asked.Load() != 0 {
		t.Fatalf("hub asked %d times without leader contact, want an own round only", h.asked.Load())
	}
	if fx.rejections(reasonNoContact) != 1 {
		t.Fatalf("no_leader_contact rejections %v, want 1", fx.rejections(reasonNoContact))
	}
	fx.contact.Store(true)
	if fx.round(t) {
		t.Fatal("own round once the leader is heard again")
	}
}

func TestViaRoundTriesTheNextHub(t *testing.T) {
	down := newHub(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusServiceUnavailable) })
	up := newHub(t, answerAs(hubID+1, 7))
	fx := newViaFixture(t, ViaConfig{}, down, up)
	close(fx.applied)
	if own := fx.round(t); own {
		t.Fatal("own round although the second hub answered")
	}
	if got := recv(t, fx.waited); got != 7 || fx.own.Load() != 0 {
		t.Fatalf("index %d, own rounds %d: want the second hub's 7 and no own round", got, fx.own.Load())
	}
}

// Over TLS, a hub's certificate must have been verified.
func TestViaRoundRefusesAnUnverifiedHub(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(answerAs(hubID, 42)))
	t.Cleanup(srv.Close)
	h := &hub{srv: srv}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	fx := newViaFixture(t, ViaConfig{Client: insecure}, h)
	close(fx.applied)
	if !fx.round(t) || fx.rejections(reasonTLS) != 1 {
		t.Fatalf("tls_unverified rejections %v, want an own round and 1", fx.rejections(reasonTLS))
	}
	verified := newViaFixture(t, ViaConfig{Client: srv.Client()}, h)
	close(verified.applied)
	if verified.round(t) {
		t.Fatal("own round although the hub's certificate verified")
	}
}

// With credentials, the replica logs in once, sends its token, and logs in
// again after the hub refused it.
func TestViaRoundSendsItsToken(t *testing.T) {
	var refuse atomic.Bool
	h := newHub(t, func(w http.ResponseWriter, r *http.Request) {
		if refuse.Load() {
			http.Error(w, "read index: invalid auth token", http.StatusUnauthorized)
			return
		}
		answerAs(hubID, 42)(w, r)
	})
	var logins atomic.Int32
	fx := newViaFixture(t, ViaConfig{Token: func(context.Context) (string, error) {
		return "token-" + string(rune('0'+logins.Add(1))), nil
	}}, h)
	close(fx.applied)
	fx.round(t)
	fx.round(t)
	if got := h.auth.Load(); got != "token-1" || logins.Load() != 1 {
		t.Fatalf("hub got %q after %d logins, want token-1 after 1", got, logins.Load())
	}
	refuse.Store(true)
	fx.round(t)
	refuse.Store(false)
	fx.clock.Advance(viaBackoff)
	fx.round(t)
	if got := h.auth.Load(); got != "token-2" || logins.Load() != 2 {
		t.Fatalf("hub got %q after %d logins, want token-2 after 2", got, logins.Load())
	}

	failing := newViaFixture(t, ViaConfig{Token: func(context.Context) (string, error) { return "", errors.New("authentication failed") }}, h)
	if !failing.round(t) || failing.rejections(reasonNoToken) != 1 {
		t.Fatal("a replica that cannot log in must do its own round")
	}
}

// A login that hangs (--join unreachable) is bounded like a hub's answer:
// the read still gets its own round within its deadline, and the hub is
// dropped for the back-off.
func TestViaRoundBoundsAHangingLogin(t *testing.T) {
	h := newHub(t, answerAs(hubID, 42))
	fx := newViaFixture(t, ViaConfig{Timeout: 100 * time.Millisecond, Token: func(ctx context.Context) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}}, h)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	own, err := fx.v.round(ctx)
	if err != nil || !own || fx.own.Load() != 1 {
		t.Fatalf("round = own %v, %v (own rounds %d); want the replica's own round", own, err, fx.own.Load())
	}
	if ctx.Err() != nil || fx.rejections(reasonNoToken) != 1 {
		t.Fatalf("the login ate the read's deadline (%v), or the hub was not dropped (no_token %v)", ctx.Err(), fx.rejections(reasonNoToken))
	}
}
