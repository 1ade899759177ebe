package readindex

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap/zaptest"
)

// A background round answered from an upstream's last round (Proof.Aged)
// moves AsOf to its start less that round's age, and serves no strong
// read: not even one that took its number before it began (WaitRound reads
// the next round's number, then registers; the round may begin between).
func TestAgedBackgroundRoundServesNoStrongRead(t *testing.T) {
	clock := clockwork.NewFakeClock()
	type call struct {
		accept time.Duration
		done   chan error
	}
	calls := make(chan call, 4)
	round := proverOf(func(_ context.Context, req ProofRequest) (Proof, error) {
		c := call{accept: req.AcceptAged, done: make(chan error)}
		calls <- c
		err := <-c.done
		// Aged in every round: only an ageable one takes it.
		return Proof{Aged: true, Age: 5 * time.Second}, err
	})
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Second, 0, time.Minute, round, nil)
	f.periodNs.Store(int64(30 * time.Second)) // quiet: rounds every 30 s

	clock.Advance(time.Minute)
	r := f.begin(true, false, true)
	if !r.background {
		t.Fatal("a round no read waits for is not background")
	}
	ran := make(chan struct{})
	go func() { f.run(context.Background(), r); close(ran) }()
	c := recv(t, calls)
	if c.accept != 30*time.Second {
		t.Fatalf("ProofRequest.AcceptAged = %v, want the period in force, 30s", c.accept)
	}
	// The read of the race: it took round r's number before r began.
	read := make(chan error, 1)
	go func() { read <- f.waitRound(context.Background(), r.n) }()
	waitUntil(t, func() bool { return f.Waiting() == 1 })
	clock.Advance(40 * time.Millisecond)
	send(t, c.done, nil)
	recv(t, ran)
	if got, want := f.AsOf(), r.start.Add(-5*time.Second); !got.Equal(want) {
		t.Fatalf("AsOf = %v, want the round's start less the proof's age, %v", got, want)
	}
	// The read registers for the next round rather than read by this one.
	waitUntil(t, func() bool {
		select {
		case err := <-read:
			t.Fatalf("a strong read was served by an aged round (err %v)", err)
		default:
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.mu.pending == 1
	})
	if got := f.ProofLag(); got != 5*time.Second {
		t.Fatalf("ProofLag = %v after an aged round, want 5s", got)
	}
	// The next round has a read waiting: not background, nothing aged.
	next := f.begin(false, false, true)
	go f.run(context.Background(), next)
	c = recv(t, calls)
	if c.accept != 0 {
		t.Fatalf("ProofRequest.AcceptAged = %v in a round a read waits for, want 0", c.accept)
	}
	send(t, c.done, nil)
	if err := recv(t, read); err != nil {
		t.Fatalf("the read after an own round: %v", err)
	}
	if got := f.AsOf(); !got.Equal(next.start) {
		t.Fatalf("AsOf = %v, want the own round's start %v (an aged proof is ignored in a round a read waits for)", got, next.start)
	}
	if got := f.ProofLag(); got != 0 {
		t.Fatalf("ProofLag = %v after an own round, want 0", got)
	}
}

// A bounded read that comes while an ageable round is under way does not
// wait for it (its proof may predate the read's need): it registers for the
// next round at once, which must be own.
func TestBoundedReadIsNotCoveredByAnAgeableRound(t *testing.T) {
	clock := clockwork.NewFakeClock()
	release := make(chan struct{})
	round := proverOf(func(context.Context, ProofRequest) (Proof, error) {
		<-release
		return Proof{Aged: true, Age: 5 * time.Second}, nil
	})
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Second, 0, time.Minute, round, nil)
	f.periodNs.Store(int64(30 * time.Second))
	r := f.begin(true, false, true)
	if !r.ageable {
		t.Fatal("a quiet background round is not ageable")
	}
	ran := make(chan struct{})
	go func() { f.run(context.Background(), r); close(ran) }()
	ctx, cancel := context.WithCancel(context.Background())
	read := make(chan error, 1)
	go func() { read <- f.WaitFresh(ctx, r.start) }()
	// Registered while the ageable round is still under way.
	waitUntil(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.mu.pending == 1 && f.mu.ownWanted })
	close(release)
	recv(t, ran)
	if got, want := f.AsOf(), r.start.Add(-5*time.Second); !got.Equal(want) {
		t.Fatalf("AsOf = %v, want %v", got, want)
	}
	select {
	case err := <-read:
		t.Fatalf("a bounded read needing the round's start was served by its aged proof (err %v)", err)
	default:
	}
	cancel()
	if err := recv(t, read); err == nil {
		t.Fatal("served with no own round")
	}
}

// A round that only replicas' upkeep waits for (ForUpkeep: a cascaded
// replica's background round asked of this one) is background, so that
// the upstream this one asks takes it as upkeep too and stays quiet; but
// not ageable, since a read waits for its proof. A client's read waiting
// beside makes the round a client's.
func TestUpkeepReadsKeepTheirRoundBackground(t *testing.T) {
	clock := clockwork.NewFakeClock()
	reqs := make(chan ProofRequest, 4)
	round := proverOf(func(_ context.Context, req ProofRequest) (Proof, error) {
		reqs <- req
		// Aged in every round: only an ageable one takes it.
		return Proof{Aged: true, Age: 5 * time.Second}, nil
	})
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Second, 0, time.Minute, round, nil)
	f.periodNs.Store(int64(30 * time.Second)) // quiet: rounds every 30 s
	clock.Advance(time.Minute)

	upkeep := make(chan error, 1)
	go func() { upkeep <- f.WaitFresh(ForUpkeep(context.Background()), clock.Now()) }()
	waitUntil(t, func() bool { return f.Waiting() == 1 })
	r := f.begin(false, false, true)
	if !r.background || r.ageable {
		t.Fatalf("a round only a replica's upkeep waits for: background %v, ageable %v; want background, not ageable", r.background, r.ageable)
	}
	f.run(context.Background(), r)
	if req := recv(t, reqs); !req.Background || req.AcceptAged != 0 {
		t.Fatalf("its ProofRequest %+v, want Background and no AcceptAged", req)
	}
	if err := recv(t, upkeep); err != nil {
		t.Fatalf("the upkeep read after its round: %v", err)
	}
	if got := f.AsOf(); !got.Equal(r.start) {
		t.Fatalf("AsOf = %v, want the round's start %v (no aged proof in a round a read waits for)", got, r.start)
	}

	// A client's strong read and a replica's upkeep wait: a client's round.
	clock.Advance(time.Minute)
	client := make(chan error, 1)
	go func() { client <- f.WaitRound(context.Background()) }()
	go func() { upkeep <- f.WaitFresh(ForUpkeep(context.Background()), clock.Now()) }()
	waitUntil(t, func() bool { return f.Waiting() == 2 })
	r = f.begin(false, false, true)
	if r.background || r.ageable {
		t.Fatalf("a round a client's read waits for: background %v, ageable %v; want neither", r.background, r.ageable)
	}
	f.run(context.Background(), r)
	if req := recv(t, reqs); req.Background {
		t.Fatalf("its ProofRequest %+v, want no Background", req)
	}
	for _, ch := range []chan error{client, upkeep} {
		if err := recv(t, ch); err != nil {
			t.Fatal(err)
		}
	}
}

// proverOf is a Prover of f.
type proverOf func(ctx context.Context, req ProofRequest) (Proof, error)

func (p proverOf) Prove(ctx context.Context, req ProofRequest) (Proof, error) { return p(ctx, req) }
