package readpath

import (
	"strconv"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/wire"
)

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
		md := a.header(tc.mode)
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

// The bound is rounded up to the millisecond, never down: a replica must
// not claim more freshness than it can prove.
func TestBoundTextRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{-time.Millisecond, "0s"},
		{time.Nanosecond, "1ms"},
		{time.Millisecond, "1ms"},
		{37*time.Millisecond + 1, "38ms"},
		{1500*time.Millisecond + 200*time.Microsecond, "1.501s"},
		{time.Hour, "1h0m0s"},
	} {
		got := boundText(tc.d)
		if got != tc.want {
			t.Errorf("boundText(%v) = %q, want %q", tc.d, got, tc.want)
		}
		if p, err := time.ParseDuration(got); err != nil || p < tc.d {
			t.Errorf("boundText(%v) = %q parses to %v, %v: less than the bound", tc.d, got, p, err)
		}
	}
}

// The revision's text follows the store, though formatted once per
// revision.
func TestAnswerHeaderRevisionFollowsTheStore(t *testing.T) {
	rev := int64(7)
	a := &answerHeader{age: func() time.Duration { return 0 }, hasLeader: func() bool { return true }, rev: func() int64 { return rev }}
	for _, r := range []int64{7, 7, 8, 1000, 1000, 9} {
		rev = r
		if got := a.header(modeWeak).Get(wire.AppliedRevisionKey); len(got) != 1 || got[0] != strconv.FormatInt(r, 10) {
			t.Fatalf("revision %d: header says %v", r, got)
		}
	}
}
