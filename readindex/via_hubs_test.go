package readindex

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

func TestViaBackoffDoublesWhileTheHubFailsAndResetsOnAGoodAnswer(t *testing.T) {
	var good atomic.Bool
	h := newHub(t, func(w http.ResponseWriter, r *http.Request) {
		if good.Load() {
			answerAs(hubID, 42)(w, r)
			return
		}
		http.Error(w, "no", http.StatusServiceUnavailable)
	})
	fx := newViaFixture(t, ViaConfig{}, h)
	close(fx.applied)
	for _, backoff := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		fx.round(t)
		fx.clock.Advance(backoff - time.Millisecond)
		if fx.v.useHub() {
			t.Fatalf("hub used again before its back-off of %v", backoff)
		}
		fx.clock.Advance(time.Millisecond)
		if !fx.v.useHub() {
			t.Fatalf("hub still avoided after its back-off of %v", backoff)
		}
	}
	good.Store(true)
	if fx.round(t) {
		t.Fatal("own round although the hub answered")
	}
	good.Store(false)
	fx.round(t)
	fx.clock.Advance(viaBackoff)
	if !fx.v.useHub() {
		t.Fatal("after a good answer, the back-off did not start over")
	}
}

// A hub answering an index the replica does not reach within the timeout
// costs one timeout, then the replica does its own round and keeps away.
func TestViaRoundFallsBackWhenTheHubsIndexIsNotReached(t *testing.T) {
	h := newHub(t, answerAs(hubID, 1<<60))
	fx := newViaFixture(t, ViaConfig{Timeout: 10 * time.Second}, h)
	type result struct {
		own bool
		err error
	}
	done := make(chan result, 1)
	go func() { own, err := fx.v.round(context.Background()); done <- result{own, err} }()
	recv(t, fx.waited)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fx.clock.BlockUntilContext(ctx, 1); err != nil { // the catch-up timer
		t.Fatal(err)
	}
	fx.clock.Advance(10*time.Second - time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("gave up on the hub's index (%+v) before the timeout", r)
	default:
	}
	fx.clock.Advance(time.Millisecond)
	if r := recv(t, done); r.err != nil || !r.own || fx.own.Load() != 1 {
		t.Fatalf("round: own %v, %v, own rounds %d; want one own round", r.own, r.err, fx.own.Load())
	}
	if fx.rejections(reasonCatchUp) != 1 || fx.v.useHub() {
		t.Fatalf("catch_up rejections %v, hub usable %v: want 1 and avoided", fx.rejections(reasonCatchUp), fx.v.useHub())
	}
}

// slowHubFixture is a replica with a 20s --read-index-via-timeout and one
// hub whose answers take *delay of the fixture's clock, index applied.
func slowHubFixture(t *testing.T) (*viaFixture, *atomic.Int64) {
	var fx *viaFixture
	delay := new(atomic.Int64)
	h := newHub(t, func(w http.ResponseWriter, r *http.Request) {
		fx.clock.Advance(time.Duration(delay.Load()))
		answerAs(hubID, 42)(w, r)
	})
	fx = newViaFixture(t, ViaConfig{Timeout: 20 * time.Second}, h)
	close(fx.applied)
	return fx, delay
}

// A hub whose answers take more than half the timeout is used, but after
// slowStrikes of them in a row it is dropped.
func TestViaDropsAConsistentlySlowHub(t *testing.T) {
	fx, delay := slowHubFixture(t)
	delay.Store(int64(15 * time.Second))
	for i := range slowStrikes - 1 {
		if fx.round(t) {
			t.Fatalf("slow answer %d not used", i+1)
		}
	}
	// A fast answer between slow ones clears the strikes.
	delay.Store(int64(10 * time.Second))
	fx.round(t)
	delay.Store(int64(15 * time.Second))
	for i := range slowStrikes {
		if fx.round(t) {
			t.Fatalf("slow answer %d not used", i+1)
		}
		if dropped := !fx.v.useHub(); dropped != (i == slowStrikes-1) {
			t.Fatalf("after slow answer %d in a row: dropped %v", i+1, dropped)
		}
	}
	if fx.rejections(reasonSlow) != 1 || !fx.round(t) {
		t.Fatalf("slow rejections %v; want 1 and an own round next", fx.rejections(reasonSlow))
	}
}

// A hub across a WAN answers in a round trip at best: the timeout follows
// the replica's own round time (viaRTTFactor of it) when that is longer
// than --read-index-via-timeout, so answers that take less than half of
// that are not slow, and the timeout bounds the wait for the hub's index.
func TestViaTimeoutFollowsTheReplicasOwnRoundTime(t *testing.T) {
	fx, delay := slowHubFixture(t)
	fx.roundTook.Store(int64(10 * time.Second)) // a 40s timeout
	if got := fx.v.timeout(); got != 40*time.Second {
		t.Fatalf("timeout %v with own rounds of 10s and --read-index-via-timeout 20s, want 40s", got)
	}
	delay.Store(int64(15 * time.Second)) // slow for 20s, not for 40s
	for i := range 2 * slowStrikes {
		if fx.round(t) || !fx.v.useHub() {
			t.Fatalf("answer %d in 15s with a 40s timeout: not used, or the hub dropped", i+1)
		}
	}
	delay.Store(int64(21 * time.Second))
	for range slowStrikes {
		fx.round(t)
	}
	if fx.v.useHub() {
		t.Fatal("three answers past half the 40s timeout in a row: the hub is still used")
	}
	fx.roundTook.Store(int64(time.Second)) // 4s < --read-index-via-timeout
	if got := fx.v.timeout(); got != 20*time.Second {
		t.Fatalf("timeout %v with own rounds of 1s, want --read-index-via-timeout's 20s", got)
	}
}

func TestMemberAtMatchesAdvertisedClientURLs(t *testing.T) {
	ms := []Peer{{ID: 1, ClientURLs: []string{"http://10.0.0.1:2379"}}, {ID: 2, ClientURLs: []string{"https://Replica-2:2479/", "http://replica-2"}}}
	for _, tc := range []struct {
		url  string
		want uint64
	}{
		{"http://10.0.0.1:2379", 1},
		{"http://10.0.0.1:2379/", 1},
		{"https://replica-2:2479", 2},
		{"http://replica-2:80", 2},
		{"http://10.0.0.1:2479", 0},
		{"https://10.0.0.1:2379", 0},
		{"http://10.0.0.1:2379/prefix", 0},
		{"10.0.0.1:2379", 0},
	} {
		m, ok := memberAt(ms, tc.url)
		if got := map[bool]uint64{true: m.ID}[ok]; got != tc.want {
			t.Errorf("memberAt(%q) = %d, want %d", tc.url, got, tc.want)
		}
	}
}

// Own round times are followed erring long: a longer round at once, a
// shorter one by an eighth of the difference.
func TestRoundTimeErrsLong(t *testing.T) {
	var r RoundTime
	if r.Get() != 0 {
		t.Fatalf("no round yet: %v", r.Get())
	}
	for _, step := range []struct{ d, want time.Duration }{
		{160 * time.Millisecond, 160 * time.Millisecond},
		{80 * time.Millisecond, 150 * time.Millisecond},
		{400 * time.Millisecond, 400 * time.Millisecond},
	} {
		r.Observe(step.d)
		if got := r.Get(); got != step.want {
			t.Fatalf("after a round of %v: %v, want %v", step.d, got, step.want)
		}
	}
}
