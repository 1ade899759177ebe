package membership

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Scripted answers of fakeCluster beside etcd's errors.
var (
	// hang is an attempt that gets no answer: it returns when its
	// deadline passes.
	hang = errors.New("fake: no answer")
	// applyThenHang is an attempt applied whose answer is lost.
	applyThenHang = errors.New("fake: applied, no answer")
)

// fakeCluster is a member list and, per call, the scripted answers in
// order; a call past its script is made and answered. Every call is
// counted: each holds one attempt deadline on the fake clock.
type fakeCluster struct {
	mu      sync.Mutex
	members []*etcdserverpb.Member
	script  map[string][]error
	calls   []string
	// waiting gets the call's name when an attempt waits for its deadline.
	waiting chan string
}

var _ Cluster = (*fakeCluster)(nil)

func newFake(members ...*etcdserverpb.Member) *fakeCluster {
	return &fakeCluster{members: members, script: map[string][]error{}, waiting: make(chan string, 1)}
}

func (f *fakeCluster) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeCluster) made(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == call {
			n++
		}
	}
	return n
}

// answer takes call's next scripted answer; apply, run under the lock,
// makes the change.
func (f *fakeCluster) answer(ctx context.Context, call string, apply func() error) error {
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("fake: a call without a deadline can wait forever")
	}
	f.mu.Lock()
	f.calls = append(f.calls, call)
	var err error
	if s := f.script[call]; len(s) > 0 {
		err, f.script[call] = s[0], s[1:]
	}
	if err == nil || err == applyThenHang {
		if aerr := apply(); aerr != nil {
			err = aerr
		}
	}
	f.mu.Unlock()
	if err == hang || err == applyThenHang {
		f.waiting <- call
		<-ctx.Done()
		return context.DeadlineExceeded
	}
	return err
}

func (f *fakeCluster) index(id uint64) int {
	return slices.IndexFunc(f.members, func(m *etcdserverpb.Member) bool { return m.ID == id })
}

func (f *fakeCluster) MemberList(ctx context.Context, _ ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	var out []*etcdserverpb.Member
	err := f.answer(ctx, "list", func() error { out = slices.Clone(f.members); return nil })
	if err != nil {
		return nil, err
	}
	return &clientv3.MemberListResponse{Members: out}, nil
}

func (f *fakeCluster) MemberAddAsLearner(ctx context.Context, peerURLs []string) (*clientv3.MemberAddResponse, error) {
	var resp clientv3.MemberAddResponse
	err := f.answer(ctx, "add", func() error {
		for _, m := range f.members {
			if slices.ContainsFunc(m.PeerURLs, func(u string) bool { return slices.Contains(peerURLs, u) }) {
				return rpctypes.ErrPeerURLExist // as etcd: any URL of any member
			}
		}
		m := &etcdserverpb.Member{ID: 100, PeerURLs: peerURLs, IsLearner: true}
		f.members = append(f.members, m)
		resp = clientv3.MemberAddResponse{Member: m, Members: slices.Clone(f.members)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &resp, nil
}

func (f *fakeCluster) MemberPromote(ctx context.Context, id uint64) (*clientv3.MemberPromoteResponse, error) {
	var resp clientv3.MemberPromoteResponse
	err := f.answer(ctx, "promote", func() error {
		i := f.index(id)
		switch {
		case i < 0:
			return rpctypes.ErrMemberNotFound
		case !f.members[i].IsLearner:
			return rpctypes.ErrMemberNotLearner
		}
		f.members[i].IsLearner = false
		resp.Members = slices.Clone(f.members)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &resp, nil
}

func (f *fakeCluster) MemberRemove(ctx context.Context, id uint64) (*clientv3.MemberRemoveResponse, error) {
	var resp clientv3.MemberRemoveResponse
	err := f.answer(ctx, "remove", func() error {
		i := f.index(id)
		if i < 0 {
			return rpctypes.ErrMemberNotFound
		}
		f.members = slices.Delete(f.members, i, i+1)
		resp.Members = slices.Clone(f.members)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &resp, nil
}

// waits is a zap core that passes on the backoff of every "asking again"
// line: the changer logs it just before it waits.
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

// rig runs one change on a fake clock.
type rig struct {
	t     *testing.T
	ctx   context.Context
	clock *clockwork.FakeClock
	f     *fakeCluster
	ch    *Changer
	waits waits
}

const testAttempt = time.Minute

func newRig(t *testing.T, f *fakeCluster) *rig {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	clock := clockwork.NewFakeClock()
	w := make(waits, 16)
	cfg := DefaultChangerConfig(f, clock)
	cfg.Attempt = testAttempt
	cfg.Log = zap.New(w)
	ch, err := NewChanger(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, ctx: ctx, clock: clock, f: f, ch: ch, waits: w}
}

type outcome struct {
	res Result
	err error
}

// run starts change on its own goroutine.
func (r *rig) run(change func(context.Context) (Result, error)) <-chan outcome {
	done := make(chan outcome, 1)
	go func() {
		res, err := change(r.ctx)
		done <- outcome{res, err}
	}()
	return done
}

// pass lets the changer's next wait pass and returns its length. Every
// call made holds an attempt deadline that has not passed, and the wait
// is one timer more.
func (r *rig) pass() time.Duration {
	r.t.Helper()
	var d time.Duration
	select {
	case d = <-r.waits:
	case <-r.ctx.Done():
		r.t.Fatal("the changer never waited")
	}
	if d > 0 {
		if err := r.clock.BlockUntilContext(r.ctx, r.f.count()+1); err != nil {
			r.t.Fatalf("waiting for the changer's wait: %v", err)
		}
		r.clock.Advance(d)
	}
	return d
}

// timeOut ends the attempt waiting for its deadline.
func (r *rig) timeOut() {
	r.t.Helper()
	select {
	case <-r.f.waiting:
	case <-r.ctx.Done():
		r.t.Fatal("no attempt waits")
	}
	r.clock.Advance(testAttempt)
}

var (
	v1 = func() *etcdserverpb.Member {
		return &etcdserverpb.Member{ID: 1, Name: "v1", PeerURLs: []string{"http://v1:2380"}}
	}
	r1 = func() *etcdserverpb.Member {
		return &etcdserverpb.Member{ID: 2, Name: "r1", PeerURLs: []string{"http://r1:2380"}, IsLearner: true}
	}
)

// etcd refuses a change as "unhealthy" for 5 s after a voter starts: asked
// again 100 ms later, doubling to 500 ms, each wait logged.
func TestChangerBacksOffWhileTheClusterRefuses(t *testing.T) {
	f := newFake(v1())
	f.script["add"] = slices.Repeat([]error{rpctypes.ErrUnhealthy}, 6)
	r := newRig(t, f)
	done := r.run(func(ctx context.Context) (Result, error) { return r.ch.AddLearner(ctx, []string{"http://r9:2380"}) })
	var got []time.Duration
	for range 6 {
		got = append(got, r.pass())
	}
	o := <-done
	if o.err != nil || o.res.Member.GetID() != 100 || o.res.Attempts != 7 || o.res.Already || len(o.res.Members) != 2 {
		t.Fatalf("AddLearner = %+v, %v; want the learner added at the seventh attempt", o.res, o.err)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Fatalf("waits %v; want %v", got, want)
	}
}

// A remove that gets no answer within its attempt's deadline is asked
// again; "member not found" then says the first was applied: done.
func TestChangerAsksAgainAfterAnAttemptWithoutAnAnswer(t *testing.T) {
	f := newFake(v1(), r1())
	f.script["remove"] = []error{applyThenHang}
	r := newRig(t, f)
	done := r.run(func(ctx context.Context) (Result, error) { return r.ch.Remove(ctx, 2) })
	r.timeOut()
	o := <-done
	if o.err != nil || !o.res.Already || o.res.Attempts != 2 || f.made("remove") != 2 {
		t.Fatalf("Remove = %+v, %v after %d removes; want done, found already removed, at the second", o.res, o.err, f.made("remove"))
	}
}

// A promotion whose answer was lost is asked again: "can only promote a
// learner member" says it was made.
func TestChangerPromotionAnsweredLate(t *testing.T) {
	f := newFake(v1(), r1())
	f.script["promote"] = []error{applyThenHang}
	r := newRig(t, f)
	done := r.run(func(ctx context.Context) (Result, error) { return r.ch.Promote(ctx, 2) })
	r.timeOut()
	if o := <-done; o.err != nil || !o.res.Already || o.res.Attempts != 2 {
		t.Fatalf("Promote = %+v, %v; want done at the second attempt", o.res, o.err)
	}
}

// A learner's removal in doubt is asked again only once the member list
// shows it a learner still: gone is done, a voter (promoted meanwhile) is
// refused and never removed.
func TestChangerRemovesALearnerOnlyWhileItIsOne(t *testing.T) {
	t.Run("still a learner", func(t *testing.T) {
		f := newFake(v1(), r1())
		f.script["remove"] = []error{hang}
		r := newRig(t, f)
		done := r.run(func(ctx context.Context) (Result, error) { return r.ch.RemoveLearner(ctx, 2) })
		r.timeOut()
		if o := <-done; o.err != nil || o.res.Already || f.made("list") != 1 || f.made("remove") != 2 || len(f.members) != 1 {
			t.Fatalf("RemoveLearner = %+v, %v after %v; want removed by the second remove, after a list", o.res, o.err, f.calls)
		}
	})
	t.Run("gone", func(t *testing.T) {
		f := newFake(v1(), r1())
		f.script["remove"] = []error{applyThenHang}
		r := newRig(t, f)
		done := r.run(func(ctx context.Context) (Result, error) { return r.ch.RemoveLearner(ctx, 2) })
		r.timeOut()
		if o := <-done; o.err != nil || !o.res.Already || f.made("remove") != 1 {
			t.Fatalf("RemoveLearner = %+v, %v after %v; want done by the list, one remove", o.res, o.err, f.calls)
		}
	})
	t.Run("promoted meanwhile", func(t *testing.T) {
		f := newFake(v1(), r1())
		f.script["remove"] = []error{hang}
		r := newRig(t, f)
		done := r.run(func(ctx context.Context) (Result, error) {
			return r.ch.RemoveLearner(ctx, 2)
		})
		<-f.waiting
		f.mu.Lock()
		f.members[1].IsLearner = false // a standby took over
		f.mu.Unlock()
		f.waiting <- "remove" // timeOut takes it again
		r.timeOut()
		o := <-done
		var ce *ChangeError
		if !errors.As(o.err, &ce) || ce.Verdict != Refused || !ce.InDoubt || !errors.Is(o.err, ErrRefused) || ce.Member.GetID() != 2 ||
			f.made("remove") != 1 || len(f.members) != 2 || !strings.Contains(o.err.Error(), "is a voter now") {
			t.Fatalf("RemoveLearner = %v after %v; want refused, naming the voter, nothing removed", o.err, f.calls)
		}
	})
}

// An add whose answer was lost is asked again; the second is refused for
// the URLs, and the member list shows the first's learner: done with it.
// An add refused for URLs another member holds names that member.
func TestChangerAddSettledByTheMemberList(t *testing.T) {
	f := newFake(v1())
	f.script["add"] = []error{applyThenHang}
	r := newRig(t, f)
	done := r.run(func(ctx context.Context) (Result, error) { return r.ch.AddLearner(ctx, []string{"http://r9:2380"}) })
	r.timeOut()
	if o := <-done; o.err != nil || !o.res.Already || o.res.Member.GetID() != 100 || len(o.res.Members) != 2 || f.made("add") != 2 {
		t.Fatalf("AddLearner = %+v, %v after %v; want the first add's learner", o.res, o.err, f.calls)
	}

	f = newFake(v1(), r1())
	r = newRig(t, f)
	_, err := r.ch.AddLearner(r.ctx, []string{"http://r1:2380", "http://r1b:2380"})
	var ce *ChangeError
	if !errors.As(err, &ce) || ce.Verdict != Refused || ce.Member.GetID() != 2 || !errors.Is(err, ErrPeerURLsHeld) || !errors.Is(err, rpctypes.ErrPeerURLExist) || !Unchanged(err) {
		t.Fatalf("AddLearner at r1's URL and another: %v; want refused naming r1", err)
	}
	// Refused for URLs nobody lists (an add applied after the list was
	// read, then removed): asked again.
	f = newFake(v1())
	f.script["add"] = []error{rpctypes.ErrPeerURLExist}
	r = newRig(t, f)
	done = r.run(func(ctx context.Context) (Result, error) { return r.ch.AddLearner(ctx, []string{"http://r9:2380"}) })
	r.pass()
	if o := <-done; o.err != nil || o.res.Already || o.res.Member.GetID() != 100 || f.made("add") != 2 || f.made("list") != 1 {
		t.Fatalf("AddLearner refused for URLs nobody lists: %+v, %v after %v; want added by the second add", o.res, o.err, f.calls)
	}
}

// A refusal is not asked again, says etcd refused, and leaves nothing in
// doubt; an answer not understood is not asked again either, and may have
// changed something.
func TestChangerRefusalsAndFailures(t *testing.T) {
	f := newFake(v1(), r1())
	f.script["promote"] = []error{rpctypes.ErrMemberLearnerNotReady}
	r := newRig(t, f)
	_, err := r.ch.Promote(r.ctx, 2)
	if !Unchanged(err) || !errors.Is(err, rpctypes.ErrMemberLearnerNotReady) || !strings.HasPrefix(err.Error(), "etcd refused: ") || f.made("promote") != 1 {
		t.Fatalf("Promote of a learner not ready: %v after %v; want etcd's refusal, once", err, f.calls)
	}
	f.script["remove"] = []error{errors.New("boom")}
	_, err = r.ch.Remove(r.ctx, 2)
	var ce *ChangeError
	if !errors.As(err, &ce) || ce.Verdict != Failed || Unchanged(err) || f.made("remove") != 1 {
		t.Fatalf("Remove answered with an unknown error: %v after %v; want failed, once, not taken as unchanged", err, f.calls)
	}
}

// When ctx ends while a change is to be asked again, the error is ctx's
// and names the last answer and whether the change is in doubt.
func TestChangerStopsWhenCtxEnds(t *testing.T) {
	f := newFake(v1(), r1())
	f.script["remove"] = []error{hang, rpctypes.ErrUnhealthy}
	r := newRig(t, f)
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan error, 1)
	go func() { _, err := r.ch.Remove(ctx, 2); done <- err }()
	r.timeOut()
	<-r.waits // no wait after an attempt that took its whole deadline
	if d := <-r.waits; d != 200*time.Millisecond {
		t.Fatalf("wait %v after the refusal; want 200ms", d)
	}
	cancel()
	err := <-done
	var ce *ChangeError
	if !errors.Is(err, context.Canceled) || !errors.Is(err, rpctypes.ErrUnhealthy) || !errors.As(err, &ce) || ce.Verdict != Retry || !ce.InDoubt ||
		!strings.Contains(err.Error(), "last answer: etcdserver: unhealthy cluster") || !strings.Contains(err.Error(), "may still be applied") || !Retryable(err) {
		t.Fatalf("Remove when ctx ends: %v (%+v); want ctx's end, the last answer, in doubt", err, ce)
	}
}

func TestChangerConfigValidate(t *testing.T) {
	if err := DefaultChangerConfig(newFake(), clockwork.NewFakeClock()).Validate(); err != nil {
		t.Fatalf("the default: %v", err)
	}
	err := ChangerConfig{Attempt: -time.Second}.Validate()
	for _, want := range []string{"Cluster: none given", "Clock: none given", "Attempt -1s: must be above 0", "Backoff.Initial 0s: must be above 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v; want it to say %q", err, want)
		}
	}
	c := DefaultChangerConfig(newFake(), clockwork.NewFakeClock())
	c.Backoff.Max = time.Millisecond
	if _, err := NewChanger(c); err == nil || !strings.Contains(err.Error(), "Backoff.Max 1ms: must be at least Backoff.Initial (100ms)") {
		t.Fatalf("NewChanger with Max below Initial: %v", err)
	}
}
