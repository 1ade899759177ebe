package readindex

import (
	"fmt"
	"testing"
	"time"
)

// The round scheduler, case by case: the background period, whether a
// background round is due, when the next round starts, and its kind.
func TestSchedule(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	// base: 100 ms interval, 1 s idle, 30 s quiet; the last own round ended
	// at t0, the last client request came at t0, no read waits.
	base := func() schedState {
		return schedState{now: t0, interval: 100 * time.Millisecond, idleInterval: time.Second, quietInterval: 30 * time.Second,
			active: t0, ownEnded: t0, background: true, idle: true, minGap: 5 * time.Millisecond}
	}
	for _, tc := range []struct {
		name string
		s    func(s *schedState)
		want string
	}{
		{"idle: the next background round a second after the last", func(s *schedState) { s.now = at(300 * time.Millisecond) },
			"period 1s; wake " + at(time.Second).Format("15:04:05.000")},
		{"idle period over: an own background round", func(s *schedState) { s.now = at(time.Second) },
			"period 1s; due; start own background"},
		{"tight bounded reads lately: the interval", func(s *schedState) { s.now, s.demand = at(100*time.Millisecond), at(50*time.Millisecond) },
			"period 100ms; due; start own background"},
		{"bounded reads longer ago than idleAfter: idle again", func(s *schedState) { s.now, s.demand = at(6*time.Second), t0 },
			"period 1s; due; start own background"},
		{"no request for the quiet interval: quiet, and its background round may be aged", func(s *schedState) { s.now = at(30 * time.Second) },
			"period 30s quiet; due; start own background ageable"},
		{"quiet, a replica's upkeep waits (a bounded read, ForUpkeep): own, background, not aged", func(s *schedState) {
			s.now, s.ownEnded, s.pending, s.peak, s.oldest, s.idle, s.ownWanted = at(40*time.Second), at(30*time.Second), 1, 1, at(40*time.Second), false, true
		}, "period 30s quiet; start own background"},
		{"a quiet replica with a round due only later", func(s *schedState) { s.now, s.ownEnded = at(40*time.Second), at(30*time.Second) },
			"period 30s quiet; wake " + at(60*time.Second).Format("15:04:05.000")},
		{"a quiet interval not above the others is never used", func(s *schedState) { s.now, s.quietInterval = at(2*time.Minute), time.Second },
			"period 1s; due; start own background"},
		{"an own round under way: nothing is due", func(s *schedState) { s.now, s.ownBusy = at(5*time.Second), true },
			"period 1s"},
		{"a strong read waits: a round at once, for it", func(s *schedState) {
			s.now, s.pending, s.peak, s.oldest, s.background, s.idle = at(10*time.Millisecond), 1, 1, at(10*time.Millisecond), false, false
		}, "period 1s; start own"},
		{"a strong read waits with hubs usable: through a hub", func(s *schedState) {
			s.now, s.pending, s.peak, s.oldest, s.background, s.idle, s.via, s.hubUsable, s.hubMax = at(10*time.Millisecond), 1, 1, at(10*time.Millisecond), false, false, true, true, 2
		}, "period 1s; start hub slot"},
		{"a bounded read waits: own, even with hubs", func(s *schedState) {
			s.now, s.pending, s.peak, s.oldest, s.background, s.idle, s.via, s.hubUsable, s.ownWanted = at(10*time.Millisecond), 1, 1, at(10*time.Millisecond), false, false, true, true, true
		}, "period 1s; start own"},
		{"hubs but none usable: through via, falling back, no slot", func(s *schedState) {
			s.now, s.pending, s.peak, s.oldest, s.background, s.idle, s.via = at(10*time.Millisecond), 1, 1, at(10*time.Millisecond), false, false, true
		}, "period 1s; start hub"},
		{"a background round due with hubs: own", func(s *schedState) { s.now, s.via, s.hubUsable = at(time.Second), true, true },
			"period 1s; due; start own background"},
		{"a read waits, but the last round started under minGap ago", func(s *schedState) {
			s.now, s.lastStart, s.pending, s.peak, s.oldest, s.background, s.idle = at(2*time.Millisecond), t0, 1, 1, at(2*time.Millisecond), false, false
		}, "period 1s; wake " + at(5*time.Millisecond).Format("15:04:05.000")},
		{"a read waits after a failed round: the retry gap", func(s *schedState) {
			s.now, s.failedAt, s.pending, s.peak, s.oldest, s.background, s.idle = at(time.Millisecond), t0, 1, 1, at(time.Millisecond), false, false
		}, "period 1s; wake " + at(roundRetryGap).Format("15:04:05.000")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.s(&s)
			if got := describeSchedule(schedule(s)); got != tc.want {
				t.Errorf("schedule: %s\n                want %s", got, tc.want)
			}
		})
	}
}

// A round's kind is decided again when it begins, by the reads waiting
// then: a client's read that registered after the decision makes it no
// background round, any read makes it no aged one, and a bounded read
// makes it own.
func TestKindOfWhenTheRoundBegins(t *testing.T) {
	for _, tc := range []struct {
		s              schedState
		wantOwn, quiet bool
		want           roundKind
	}{
		{schedState{background: true, idle: true}, true, true, roundKind{background: true, ageable: true}},
		{schedState{background: false}, true, true, roundKind{}},
		// Only replicas' upkeep waits: background, but its proof must be
		// as of its start.
		{schedState{background: true, ownWanted: true}, false, true, roundKind{background: true}},
		{schedState{background: true, idle: true, via: true, hubUsable: true}, false, true, roundKind{viaHub: true, hubSlot: true, background: true}},
		{schedState{via: true, hubUsable: true, ownWanted: true}, false, false, roundKind{}},
		{schedState{via: true}, false, false, roundKind{viaHub: true}},
	} {
		if got := kindOf(tc.s, tc.wantOwn, tc.quiet); got != tc.want {
			t.Errorf("kindOf(%+v, wantOwn %v, quiet %v) = %+v, want %+v", tc.s, tc.wantOwn, tc.quiet, got, tc.want)
		}
	}
}

func describeSchedule(d schedDecision) string {
	s := fmt.Sprintf("period %v", d.period)
	if d.quiet {
		s += " quiet"
	}
	if d.due {
		s += "; due"
	}
	if d.start {
		s += "; start"
		switch {
		case d.kind.hubSlot:
			s += " hub slot"
		case d.kind.viaHub:
			s += " hub"
		default:
			s += " own"
		}
		if d.kind.background {
			s += " background"
		}
		if d.kind.ageable {
			s += " ageable"
		}
	}
	if !d.wake.IsZero() {
		s += "; wake " + d.wake.Format("15:04:05.000")
	}
	return s
}
