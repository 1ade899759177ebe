package readpath

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap/zaptest"
)

// hub is a fake --read-index-via replica: it answers what answer says.
type hub struct {
	srv   *httptest.Server
	asked atomic.Int32
}

func newHub(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *hub {
	h := &hub{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.asked.Add(1)
		answer(w, r)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func answerIndex(cluster string, index uint64) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(readIndexAnswer{Cluster: cluster, Index: index})
	}
}

// viaFixture is a viaRounds whose own rounds are counted and whose applied
// index is moved by the test.
type viaFixture struct {
	v       *viaRounds
	clock   *clockwork.FakeClock
	own     atomic.Int32
	waitFor chan uint64
	applied chan struct{}
}

func newViaFixture(t *testing.T, urls ...string) *viaFixture {
	fx := &viaFixture{clock: clockwork.NewFakeClock(), waitFor: make(chan uint64, 1), applied: make(chan struct{})}
	fx.v = newViaRounds(zaptest.NewLogger(t), ViaConfig{URLs: urls, Timeout: 100 * time.Millisecond}, fx.clock, "c1",
		func(context.Context) error { fx.own.Add(1); return nil },
		func(index uint64) <-chan struct{} { fx.waitFor <- index; return fx.applied }, nil)
	return fx
}

func TestViaRoundWaitsUntilTheHubsIndexIsApplied(t *testing.T) {
	h := newHub(t, answerIndex("c1", 42))
	fx := newViaFixture(t, h.srv.URL)
	done := make(chan error, 1)
	go func() { done <- fx.v.round(context.Background()) }()
	if got := recv(t, fx.waitFor); got != 42 {
		t.Fatalf("waited for index %d, want the hub's 42", got)
	}
	select {
	case err := <-done:
		t.Fatalf("the round ended (%v) before index 42 was applied here", err)
	case <-time.After(50 * time.Millisecond): // a negative check: nothing may happen
	}
	close(fx.applied)
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	if fx.own.Load() != 0 {
		t.Fatal("an own round was done although the hub answered")
	}
}

func TestViaRoundFallsBackToItsOwnRound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(http.ResponseWriter, *http.Request)
	}{
		{"another cluster's hub", answerIndex("c2", 42)},
		{"hub without a round", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "read index: context deadline exceeded", http.StatusServiceUnavailable)
		}},
		{"hub that does not answer in time", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
		{"hub answering index 0", answerIndex("c1", 0)},
		{"hub answering garbage", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub(t, tc.answer)
			fx := newViaFixture(t, h.srv.URL)
			if err := fx.v.round(context.Background()); err != nil {
				t.Fatal(err)
			}
			if fx.own.Load() != 1 || len(fx.waitFor) != 0 {
				t.Fatalf("own rounds %d, index waits %d: want the own round only", fx.own.Load(), len(fx.waitFor))
			}
			// Within the backoff, the hub is left alone.
			if err := fx.v.round(context.Background()); err != nil {
				t.Fatal(err)
			}
			if h.asked.Load() != 1 || fx.own.Load() != 2 {
				t.Fatalf("hub asked %d times, own rounds %d: want 1 and 2", h.asked.Load(), fx.own.Load())
			}
			// After it, the hub is asked again.
			fx.clock.Advance(viaBackoff)
			_ = fx.v.round(context.Background())
			if h.asked.Load() != 2 {
				t.Fatalf("hub asked %d times after the backoff, want 2", h.asked.Load())
			}
		})
	}
}

func TestViaRoundTriesTheNextHub(t *testing.T) {
	down := newHub(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusServiceUnavailable) })
	up := newHub(t, answerIndex("c1", 7))
	fx := newViaFixture(t, down.srv.URL, up.srv.URL)
	close(fx.applied)
	if err := fx.v.round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, fx.waitFor); got != 7 || fx.own.Load() != 0 {
		t.Fatalf("index %d, own rounds %d: want the second hub's 7 and no own round", got, fx.own.Load())
	}
}

// The hub's side: an answer only after a round that started after the
// request came, with the applied index of then.
func TestReadIndexHandlerAnswersAfterARoundThatStartedAfterTheRequest(t *testing.T) {
	clock := clockwork.NewFakeClock()
	fr := newFakeRounds()
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Hour, 0, time.Minute, fr.round, nil)
	runLoop(t, f)
	var applied atomic.Uint64
	applied.Store(10)
	srv := httptest.NewServer(readIndexHandler(f, func() string { return "c1" }, applied.Load, time.Minute))
	t.Cleanup(srv.Close)

	type result struct {
		a   readIndexAnswer
		err error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get(srv.URL + PathReadIndex)
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		var a readIndexAnswer
		got <- result{a, json.NewDecoder(resp.Body).Decode(&a)}
	}()
	recv(t, fr.started) // the request asked for a round
	select {
	case r := <-got:
		t.Fatalf("answered %+v before its round completed", r)
	default:
	}
	applied.Store(12) // the round's read index is applied
	send(t, fr.results, nil)
	r := recv(t, got)
	if r.err != nil || r.a.Index != 12 || r.a.Cluster != "c1" {
		t.Fatalf("answer %+v (%v), want index 12 of cluster c1", r.a, r.err)
	}
}
