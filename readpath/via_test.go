package readpath

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap/zaptest"

	"github.com/understudy-kv/understudy/readindex"
)

// hubID is the member ID of the hub in these tests.
const hubID = 0x10

// fakeRounds lets a test decide when each ReadIndex round completes and how.
type fakeRounds struct {
	started chan struct{}
	results chan error
}

func newFakeRounds() *fakeRounds {
	return &fakeRounds{started: make(chan struct{}, 16), results: make(chan error)}
}

func (f *fakeRounds) round(ctx context.Context) error {
	f.started <- struct{}{}
	select {
	case err := <-f.results:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runLoop runs f's loop until the test ends.
func runLoop(t *testing.T, f *readindex.Freshness) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// recv receives from ch, failing the test if nothing comes within 10s.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing received within 10s")
		panic("unreachable")
	}
}

// send sends v on ch, failing the test if nobody takes it within 10s.
func send[T any](t *testing.T, ch chan<- T, v T) {
	t.Helper()
	select {
	case ch <- v:
	case <-time.After(10 * time.Second):
		t.Fatal("nobody received within 10s")
	}
}

// The hub's side: an answer only after a round that started after the
// request came, with the applied index of then.
func TestReadIndexHandlerAnswersAfterARoundThatStartedAfterTheRequest(t *testing.T) {
	clock := clockwork.NewFakeClock()
	fr := newFakeRounds()
	f := readindex.NewFreshness(zaptest.NewLogger(t), clock, time.Hour, 0, time.Minute, readindex.ProverFunc(fr.round), nil)
	runLoop(t, f)
	var applied atomic.Uint64
	applied.Store(10)
	answer := func(nonce string) readindex.Answer {
		return readindex.NewAnswer(0xc1, hubID, 5, applied.Load(), nonce)
	}
	srv := httptest.NewServer(readIndexHandler(f, answer, nil, time.Minute))
	t.Cleanup(srv.Close)

	type result struct {
		a   readindex.Answer
		err error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get(srv.URL + readindex.Path + "?" + readindex.NonceParam + "=n1")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		var a readindex.Answer
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
	if r.err != nil || r.a != (readindex.Answer{Cluster: "c1", Member: "10", Term: 5, Index: 12, Nonce: "n1"}) {
		t.Fatalf("answer %+v (%v), want index 12 of member %x of cluster c1 in term 5, to nonce n1", r.a, r.err, hubID)
	}
}

// A caller that authorize refuses gets 401 and costs no round.
func TestReadIndexHandlerRefusesWhomAuthorizeRefuses(t *testing.T) {
	fr := newFakeRounds()
	f := readindex.NewFreshness(zaptest.NewLogger(t), clockwork.NewFakeClock(), time.Hour, 0, time.Minute, readindex.ProverFunc(fr.round), nil)
	runLoop(t, f)
	var checked atomic.Int32
	srv := httptest.NewServer(readIndexHandler(f, func(nonce string) readindex.Answer { return readindex.NewAnswer(0xc1, hubID, 5, 1, nonce) },
		func(*http.Request) error { checked.Add(1); return errors.New("user name is empty") }, time.Minute))
	t.Cleanup(srv.Close)
	got := make(chan int, 1)
	go func() {
		resp, err := http.Get(srv.URL + readindex.Path)
		if err != nil {
			got <- 0
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	// Auth is checked after the round, as etcd checks a linearizable
	// Range's: a login acknowledged through another member before the
	// request is applied here by then.
	recv(t, fr.started)
	if checked.Load() != 0 {
		t.Fatal("auth checked before the round completed")
	}
	send(t, fr.results, nil)
	if code := recv(t, got); code != http.StatusUnauthorized || checked.Load() != 1 {
		t.Fatalf("status %d after %d checks: want 401 after 1", code, checked.Load())
	}
}
