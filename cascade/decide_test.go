package cascade

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The follow loop's decisions, scenario by scenario: each line is the
// action the core must take next, then (for a follow) the outcome fed
// back. "follow N" expects upstream N; "wait D" a wait of D; "bootstrap E"
// a bootstrap whose error says E.
func TestFollowCore(t *testing.T) {
	lost := outcome{kind: outcomeLost, err: errors.New("dead")}
	lostAfter := outcome{kind: outcomeLost, followed: true, err: errors.New("watch closed")}
	compacted := outcome{kind: outcomeCompacted, err: errors.New("compacted to 90")}
	other := outcome{kind: outcomeOtherHistory, err: &historyError{upstream: "u", how: "test"}}
	diverged := outcome{kind: outcomeDiverged, err: fmt.Errorf("%w: test", ErrDiverged)}
	type step struct {
		want string  // "follow 1", "wait 250ms", "bootstrap <substring>"
		out  outcome // fed back after a follow
		need int64   // the store's next revision after it (0: unchanged)
	}
	for _, tc := range []struct {
		name  string
		n     int
		first int
		steps []step
	}{
		{"starts at the snapshot's upstream and goes round", 3, 1, []step{
			{want: "follow 1", out: lostAfter}, {want: "follow 2", out: lostAfter}, {want: "follow 0", out: lostAfter}, {want: "follow 1", out: lostAfter},
		}},
		{"a turn of lost upstreams waits, longer each turn, up to the most", 2, 0, []step{
			{want: "follow 0", out: lost}, {want: "follow 1", out: lost}, {want: "wait 250ms"},
			{want: "follow 0", out: lost}, {want: "follow 1", out: lost}, {want: "wait 500ms"},
			{want: "follow 0", out: lost}, {want: "follow 1", out: lost}, {want: "wait 1s"},
			{want: "follow 0", out: lost}, {want: "follow 1", out: lost}, {want: "wait 2s"},
			{want: "follow 0", out: lost}, {want: "follow 1", out: lost}, {want: "wait 2s"},
		}},
		{"one that delivers ends the waits", 2, 0, []step{
			{want: "follow 0", out: lost}, {want: "follow 1", out: lost}, {want: "wait 250ms"},
			{want: "follow 0", out: lost}, {want: "follow 1", out: lost}, {want: "wait 500ms"},
			{want: "follow 0", out: lostAfter}, {want: "follow 1", out: lost}, {want: "follow 0", out: lost}, {want: "follow 1", out: lost}, {want: "wait 250ms"},
		}},
		{"a single upstream lost is waited for", 1, 0, []step{
			{want: "follow 0", out: lostAfter}, {want: "follow 0", out: lost}, {want: "wait 250ms"}, {want: "follow 0", out: lost}, {want: "wait 500ms"},
		}},
		{"compacted past the store while the other fails fast: bootstrap within the turn", 2, 0, []step{
			{want: "follow 0", out: compacted}, {want: "follow 1", out: lost}, {want: "bootstrap compacted to 90"},
		}},
		{"compacted past the store while the other holds the history: the other is followed", 2, 0, []step{
			{want: "follow 0", out: compacted}, {want: "follow 1", out: lostAfter, need: 120},
			{want: "follow 0", out: lostAfter}, {want: "follow 1", out: lostAfter},
		}},
		{"compacted, and the other followed but delivered nothing new: no bootstrap, no wait", 2, 0, []step{
			{want: "follow 0", out: compacted}, {want: "follow 1", out: lostAfter},
			{want: "follow 0", out: compacted}, {want: "follow 1", out: lost}, {want: "bootstrap compacted"},
		}},
		{"created, then compacted: not followed, so no endless turns", 1, 0, []step{
			{want: "follow 0", out: outcome{kind: outcomeCompacted, followed: true, err: errors.New("compacted to 90")}}, {want: "bootstrap compacted to 90"},
		}},
		{"every upstream compacted: bootstrap", 3, 0, []step{
			{want: "follow 0", out: compacted}, {want: "follow 1", out: compacted}, {want: "follow 2", out: compacted}, {want: "bootstrap " + ErrBehind.Error()},
		}},
		{"a compaction told before the store advanced does not count after", 2, 0, []step{
			{want: "follow 0", out: compacted}, {want: "follow 1", out: lost, need: 150},
			{want: "follow 0", out: lost}, {want: "wait 250ms"},
		}},
		{"another history: bootstrap at once, whatever the others", 3, 0, []step{
			{want: "follow 0", out: other}, {want: "bootstrap another history"},
		}},
		{"a divergence: bootstrap at once", 2, 1, []step{
			{want: "follow 1", out: lostAfter}, {want: "follow 0", out: diverged}, {want: "bootstrap diverged"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			urls := make([]string, tc.n)
			for i := range urls {
				urls[i] = fmt.Sprintf("http://u%d", i)
			}
			c := newFollowCore(urls, tc.first, 250*time.Millisecond, 2*time.Second)
			need := int64(100)
			c.need = need
			for i, st := range tc.steps {
				a := c.step()
				got := describeAction(a)
				if !strings.HasPrefix(st.want, "bootstrap ") && got != st.want || strings.HasPrefix(st.want, "bootstrap ") && (a.kind != actBootstrap || !strings.Contains(a.err.Error(), strings.TrimPrefix(st.want, "bootstrap "))) {
					t.Fatalf("step %d: %s, want %s", i, got, st.want)
				}
				if a.kind == actFollow {
					if st.need != 0 {
						need = st.need
					}
					c.done(a.upstream, st.out, need)
				}
			}
		})
	}
}

func describeAction(a action) string {
	switch a.kind {
	case actFollow:
		return fmt.Sprintf("follow %d", a.upstream)
	case actWait:
		return fmt.Sprintf("wait %v", a.wait)
	}
	return fmt.Sprintf("bootstrap %v", a.err)
}

// Invariants on any sequence of outcomes: a follow names an upstream not
// tried yet in its turn; a wait comes only after a turn in which every
// upstream was tried and none delivered, and none compacted; a bootstrap
// for compaction only after a turn in which every upstream was tried,
// none delivered, and one compacted; nothing follows a bootstrap.
func TestFollowCoreInvariants(t *testing.T) {
	kinds := []outcome{
		{kind: outcomeLost}, {kind: outcomeLost, followed: true}, {kind: outcomeCompacted}, {kind: outcomeLost},
	}
	for seed := range 500 {
		n := 1 + seed%4
		urls := make([]string, n)
		c := newFollowCore(urls, seed%n, time.Millisecond, 8*time.Millisecond)
		need := int64(10)
		c.need = need
		turn := map[int]outcome{}
		x := uint64(seed)*2654435761 + 1
		for range 60 {
			a := c.step()
			switch a.kind {
			case actFollow:
				if len(turn) == n {
					turn = map[int]outcome{} // a new turn began at once (one had delivered)
				}
				if _, ok := turn[a.upstream]; ok {
					t.Fatalf("seed %d: upstream %d followed twice in a turn (%v)", seed, a.upstream, turn)
				}
				x = x*6364136223846793005 + 1442695040888963407
				o := kinds[(x>>33)%uint64(len(kinds))]
				if (x>>40)%7 == 0 {
					need++
				}
				if need != c.need {
					turn = map[int]outcome{}
				}
				turn[a.upstream] = o
				c.done(a.upstream, o, need)
			case actWait:
				if len(turn) != n {
					t.Fatalf("seed %d: a wait after %d of %d upstreams tried", seed, len(turn), n)
				}
				for _, o := range turn {
					if o.followed || o.kind == outcomeCompacted {
						t.Fatalf("seed %d: a wait after a turn with %+v", seed, o)
					}
				}
				turn = map[int]outcome{}
			case actBootstrap:
				compacted := false
				for _, o := range turn {
					compacted = compacted || o.kind == outcomeCompacted
				}
				if len(turn) != n || !compacted || !errors.Is(a.err, ErrBehind) {
					t.Fatalf("seed %d: bootstrap %v after turn %v", seed, a.err, turn)
				}
				if b := c.step(); b.kind != actBootstrap {
					t.Fatalf("seed %d: %v after a bootstrap", seed, describeAction(b))
				}
				goto next
			}
		}
	next:
	}
}

// stalled says what each upstream came to while none is followed.
func TestFollowCoreStalled(t *testing.T) {
	c := newFollowCore([]string{"http://a", "http://b"}, 0, time.Second, time.Second)
	if err := c.stalled(false); err == nil || !strings.Contains(err.Error(), "yet") {
		t.Errorf("before any: %v", err)
	}
	c.done(c.step().upstream, outcome{kind: outcomeLost, err: errors.New("no answer within 2s")}, 0)
	c.done(c.step().upstream, outcome{kind: outcomeCompacted, err: errors.New("compacted to 9")}, 0)
	err := c.stalled(false)
	if err == nil || !strings.Contains(err.Error(), "http://a: no answer within 2s") || !strings.Contains(err.Error(), "compacted to 9") {
		t.Errorf("stalled: %v", err)
	}
	if err := c.stalled(true); err != nil {
		t.Errorf("following: %v", err)
	}
}
