package readpath

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/wire"
)

// askedCtx is a request's context that asks for the answer header.
var askedCtx = metadata.NewIncomingContext(context.Background(), metadata.Pairs(wire.FreshnessKey, "1"))

// The header comes when the request asks (FreshnessKey, or a probe's
// ProbeKey) or always is set, and not otherwise.
func TestAnswerHeaderOnRequest(t *testing.T) {
	mk := func(always bool) *answerHeader {
		return &answerHeader{always: always, age: func() time.Duration { return time.Second },
			hasLeader: func() bool { return true }, rev: func() int64 { return 7 }}
	}
	probe := metadata.NewIncomingContext(context.Background(), metadata.Pairs(wire.ProbeKey, "1"))
	other := metadata.NewIncomingContext(context.Background(), metadata.Pairs("understudy-max-staleness", "1s"))
	for _, tc := range []struct {
		name   string
		always bool
		ctx    context.Context
		want   bool
	}{
		{"not asked", false, context.Background(), false},
		{"other metadata only", false, other, false},
		{"asked", false, askedCtx, true},
		{"a probe", false, probe, true},
		{"always, not asked", true, context.Background(), true},
	} {
		if got := mk(tc.always).begin(tc.ctx, modeWeak).h != nil; got != tc.want {
			t.Errorf("%s: header %v, want %v", tc.name, got, tc.want)
		}
	}
	var off *answerHeader // --freshness-headers=off
	if off.begin(askedCtx, modeWeak).h != nil {
		t.Error("off: a header although off")
	}
}

func TestAnswerHeader(t *testing.T) {
	leader := true
	a := &answerHeader{
		age:       func() time.Duration { return 1500 * time.Millisecond },
		hasLeader: func() bool { return leader },
		rev:       func() int64 { return 42 },
	}
	for _, tc := range []struct {
		mode, bound, leader string
		hasLeader           bool
	}{
		{modeStrong, "0s", "true", true},
		{modeForwarded, "0s", "true", true},
		{modeWeak, "1.5s", "true", true},
		{modeBounded, "1.5s", "false", false},
	} {
		leader = tc.hasLeader
		md := a.begin(askedCtx, tc.mode).header(0)
		want := map[string]string{wire.ReadModeKey: tc.mode, wire.StalenessBoundKey: tc.bound, wire.KnownLeaderKey: tc.leader, wire.AppliedRevisionKey: "42"}
		if len(md) != len(want) {
			t.Errorf("%s: header %v, want exactly %v", tc.mode, md, want)
		}
		for k, v := range want {
			if got := md.Get(k); len(got) != 1 || got[0] != v {
				t.Errorf("%s: %s = %v, want %q", tc.mode, k, got, v)
			}
		}
	}
}

// The bound is taken when the answer begins, before the read: a round that
// completes while the read runs proves nothing about what the read saw.
func TestAnswerBoundIsTakenBeforeTheRead(t *testing.T) {
	age := 900 * time.Millisecond
	a := &answerHeader{age: func() time.Duration { return age }, hasLeader: func() bool { return true }, rev: func() int64 { return 1 }}
	ans := a.begin(askedCtx, modeWeak)
	age = time.Millisecond // a round completed during the read
	if got := ans.header(5).Get(wire.StalenessBoundKey); len(got) != 1 || got[0] != "1s" {
		t.Fatalf("bound %v, want the 900ms taken at begin, rounded up to 1s", got)
	}
}

// The revision is the answer's own when it carries one, the store's
// otherwise; a header whose four values hold is reused, and any change in
// one of them builds a new one.
func TestAnswerHeaderFollowsItsValues(t *testing.T) {
	store, age, leader := int64(7), 3*time.Millisecond, true
	a := &answerHeader{age: func() time.Duration { return age }, hasLeader: func() bool { return leader }, rev: func() int64 { return store }}
	check := func(step string, rev int64, wantRev, wantBound, wantLeader string) {
		t.Helper()
		md := a.begin(askedCtx, modeWeak).header(rev)
		for k, want := range map[string]string{wire.AppliedRevisionKey: wantRev, wire.StalenessBoundKey: wantBound, wire.KnownLeaderKey: wantLeader, wire.ReadModeKey: modeWeak} {
			if got := md.Get(k); len(got) != 1 || got[0] != want {
				t.Fatalf("%s: %s = %v, want %q", step, k, got, want)
			}
		}
	}
	check("store's revision", 0, "7", "3ms", "true")
	first := a.begin(askedCtx, modeWeak).header(0)
	if again := a.begin(askedCtx, modeWeak).header(0); &again[wire.ReadModeKey][0] != &first[wire.ReadModeKey][0] {
		t.Errorf("the same four values built a new header")
	}
	check("answer's revision", 9, "9", "3ms", "true")
	store = 8
	check("store moved", 0, "8", "3ms", "true")
	age = 17 * time.Millisecond
	check("bound moved", 0, "8", "20ms", "true")
	leader = false
	check("leader lost", 0, "8", "20ms", "false")
	if strong := a.begin(askedCtx, modeStrong).header(0); strong.Get(wire.ReadModeKey)[0] != modeStrong || strong.Get(wire.StalenessBoundKey)[0] != "0s" {
		t.Errorf("strong answer after weak ones: %v", strong)
	}
}

// The bound is rounded up, never down: a replica must not claim more
// freshness than it can prove.
func TestBoundTextRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{-time.Millisecond, "0s"},
		{time.Nanosecond, "1ms"},
		{time.Millisecond, "1ms"},
		{10 * time.Millisecond, "10ms"},
		{10*time.Millisecond + 1, "12ms"},
		{37*time.Millisecond + 1, "40ms"},
		{50 * time.Millisecond, "50ms"},
		{1500*time.Millisecond + 200*time.Microsecond, "2s"},
		{time.Hour, "1h6m40s"},
		{100*time.Hour + 1, "100h0m1s"},
		{math.MaxInt64, "2562047h47m16.854775807s"},
	} {
		got := boundText(tc.d)
		if got != tc.want {
			t.Errorf("boundText(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// For any bound, the text parses to a duration no smaller, and at most a
// third larger than the bound in whole milliseconds (far past the ladder's
// hour, less than a second larger).
func TestBoundTextIsAnHonestCeilingWithinAThird(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		d := time.Duration(r.Int64N(int64(2 * time.Hour)))
		switch r.IntN(3) {
		case 0:
			d = time.Duration(r.Int64N(int64(200 * time.Millisecond)))
		case 1:
			d = math.MaxInt64 - time.Duration(r.Int64N(int64(time.Hour)))
		}
		got := boundText(d)
		p, err := time.ParseDuration(got)
		if err != nil || p < d {
			t.Fatalf("boundText(%v) = %q parses to %v, %v: less than the bound", d, got, p, err)
		}
		if d > 2*time.Hour {
			if p-d >= time.Second {
				t.Fatalf("boundText(%v) = %q: a second or more above the bound", d, got)
			}
			continue
		}
		if ms := d.Truncate(time.Millisecond) + time.Millisecond; 3*p > 4*ms {
			t.Fatalf("boundText(%v) = %q: more than a third above %v", d, got, ms)
		}
	}
}

// Between two rounds at the default 50ms interval (and a slow one, to
// 100ms), a bound takes few texts: each connection's HPACK table (4,096
// bytes, about 60 such entries) holds them all.
func TestBoundTextTakesFewValuesBetweenRounds(t *testing.T) {
	seen := map[string]bool{}
	for d := time.Duration(0); d <= 100*time.Millisecond; d += 50 * time.Microsecond {
		seen[boundText(d)] = true
	}
	if len(seen) > 22 {
		t.Errorf("%d texts for bounds up to 100ms: %v", len(seen), seen)
	}
}
