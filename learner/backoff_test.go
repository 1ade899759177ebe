package learner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// backoffs are the "backoff" fields of the retry lines logged.
func backoffs(logs *observer.ObservedLogs) []time.Duration {
	var out []time.Duration
	for _, e := range logs.All() {
		if d, ok := e.ContextMap()["backoff"].(time.Duration); ok {
			out = append(out, d)
		}
	}
	return out
}

// advanceEach lets n waits on clock pass, one after the other.
func advanceEach(t *testing.T, ctx context.Context, clock *clockwork.FakeClock, n int, d time.Duration) {
	t.Helper()
	for range n {
		if err := clock.BlockUntilContext(ctx, 1); err != nil {
			t.Fatalf("waiting for the retry's wait: %v", err)
		}
		clock.Advance(d)
	}
}

// waits is a zap core that passes on the backoff of every retry line:
// the join logs it just before it waits.
type waits chan time.Duration

func (w waits) Enabled(zapcore.Level) bool        { return true }
func (w waits) With([]zapcore.Field) zapcore.Core { return w }
func (w waits) Sync() error                       { return nil }
func (w waits) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, w)
}
func (w waits) Write(_ zapcore.Entry, fields []zapcore.Field) error {
	for _, f := range fields {
		if f.Key == "backoff" {
			w <- time.Duration(f.Integer)
		}
	}
	return nil
}

// The cluster's "unhealthy" refusal is retried after 100ms, doubling up to
// 500ms, each wait logged; and when ctx ends during a wait, the error says so
// and names the last answer.
func TestJoinBacksOffWhileTheClusterRefuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	refusals := slices.Repeat([]error{rpctypes.ErrUnhealthy}, 6)
	f := &fakeCluster{members: []*etcdserverpb.Member{voter()}, addErrs: append(refusals, nil)}
	w := make(waits, len(refusals))
	clock := clockwork.NewFakeClock()
	type result struct {
		j   Joined
		err error
	}
	done := make(chan result, 1)
	go func() {
		j, err := Join(ctx, zap.New(w), clock, f, testSelf)
		done <- result{j, err}
	}()
	var got []time.Duration
	for range refusals {
		d := <-w
		got = append(got, d)
		// Each add holds its attempt's deadline (10 s, never reached
		// here); the wait is one timer more.
		if err := clock.BlockUntilContext(ctx, f.adds+1); err != nil {
			t.Fatalf("waiting for the join's wait: %v", err)
		}
		clock.Advance(d)
	}
	r := <-done
	if r.err != nil || r.j.ID != 100 || f.adds != 7 {
		t.Fatalf("join = %+v, %v after %d adds; want the seventh add", r.j, r.err, f.adds)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Fatalf("waits logged %v; want %v", got, want)
	}

	f = &fakeCluster{members: []*etcdserverpb.Member{voter()}, addErrs: []error{rpctypes.ErrUnhealthy}}
	gone, stop := context.WithCancel(ctx)
	go func() {
		_, err := Join(gone, zap.New(w), clock, f, testSelf)
		done <- result{err: err}
	}()
	<-w
	stop()
	if r := <-done; !errors.Is(r.err, context.Canceled) || !contains(r.err, "last answer: etcdserver: unhealthy cluster") {
		t.Fatalf("join = %v; want ctx's end and the last answer", r.err)
	}
}

// A start refused while the voters' member lists disagree is made again
// after 100ms, then 200ms, ..., each wait logged.
func TestStartBacksOffWhileTheMemberListsDisagree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := &fakeCluster{members: []*etcdserverpb.Member{voter(), {ID: 100, PeerURLs: []string{"http://p1"}, IsLearner: true}}}
	j := Joined{ID: 100, InitialCluster: initialCluster(f.members, 100, "r1"), Added: true}
	core, logs := observer.New(zap.InfoLevel)
	clock := clockwork.NewFakeClock()
	tries := 0
	done := make(chan error, 1)
	go func() {
		_, err := startMember(ctx, zap.New(core), clock, f, j, "r1", func(string) (int, error) {
			if tries++; tries <= 3 {
				return 0, errCountUnequal
			}
			return 1, nil
		})
		done <- err
	}()
	advanceEach(t, ctx, clock, 3, startBackoffMax)
	if err := <-done; err != nil || tries != 4 {
		t.Fatalf("startMember = %v after %d tries; want a start at the fourth", err, tries)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	if got := backoffs(logs); !slices.Equal(got, want) {
		t.Fatalf("waits logged %v; want %v", got, want)
	}
}

// The catch-up is observed at once, then at every interval, until caught
// up; each observation is reported.
func TestWaitCaughtUpPollsEveryInterval(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock := clockwork.NewFakeClock()
	reported := make(chan Progress, 3)
	applied := []uint64{10, 50, 100}
	done := make(chan error, 1)
	go func() {
		n := 0
		_, err := waitCaughtUp(ctx, zap.NewNop(), clock, time.Second, func(context.Context) (Progress, error) {
			n++
			return Progress{LeaderCommit: 100, Applied: applied[n-1]}, nil
		}, func(p Progress) { reported <- p })
		done <- err
	}()
	for i, a := range applied {
		if p := <-reported; p.Applied != a {
			t.Fatalf("observation %d: applied %d; want %d", i, p.Applied, a)
		}
		if i < len(applied)-1 {
			clock.Advance(time.Second) // the next poll
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("waitCaughtUp = %v; want caught up at the third observation", err)
	}
}

func contains(err error, s string) bool {
	return err != nil && strings.Contains(err.Error(), s)
}
