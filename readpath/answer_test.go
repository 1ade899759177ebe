package readpath

import (
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
