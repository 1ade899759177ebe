package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDeliveredDelaysAndAdded: a front's delays run from each put's
// acknowledgement, events that never came are counted apart rather than
// taken as zero, and what a tier adds is its arrival less the tier
// above's, put by put, only where both saw the put.
func TestDeliveredDelaysAndAdded(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			if m < 0 {
				out = append(out, time.Time{})
				continue
			}
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	d := delivered{
		acked: at(0, 10, 20, 30),
		at: [][]time.Time{
			at(1, 12, 25, 31),  // tier 1
			at(4, 13, -1, 40),  // tier 2: the third event never came
			at(3, 20, 30, 41)}, // tier 3: its first event before tier 2's
	}
	ds, missed := d.delays(1)
	if want := []time.Duration{3 * time.Millisecond, 4 * time.Millisecond, 10 * time.Millisecond}; !slices.Equal(ds, want) || missed != 1 {
		t.Errorf("tier 2 delays %v, %d missed; want %v, 1 missed", ds, missed, want)
	}
	if got, want := d.added(1, 0), []time.Duration{time.Millisecond, 3 * time.Millisecond, 9 * time.Millisecond}; !slices.Equal(got, want) {
		t.Errorf("tier 2 added %v, want %v (the put it missed left out)", got, want)
	}
	if got, want := d.added(2, 1), []time.Duration{0, time.Millisecond, 7 * time.Millisecond}; !slices.Equal(got, want) {
		t.Errorf("tier 3 added %v, want %v (an earlier arrival counts as none)", got, want)
	}
}

// TestTierRowsPoolRounds: the tiers scenario's rows pool every round's
// delays, count missing events as errors, and give each round's p50 and
// p99 in the note.
func TestTierRowsPoolRounds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	round := func(delay []time.Duration) delivered {
		d := delivered{at: make([][]time.Time, len(tierNames))}
		for k := range delay {
			d.acked = append(d.acked, t0.Add(time.Duration(k)*time.Second))
		}
		for i := range tierNames {
			for k, dl := range delay {
				d.at[i] = append(d.at[i], d.acked[k].Add(time.Duration(i)*dl))
			}
		}
		return d
	}
	p := params{tierPuts: 2, tierRate: 1}
	runs := []delivered{round([]time.Duration{time.Millisecond, 3 * time.Millisecond}), round([]time.Duration{5 * time.Millisecond, 7 * time.Millisecond})}
	runs[1].at[3][1] = time.Time{}
	rows := tierRows(p, runs)
	byName := map[string]Row{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	tier3 := byName[tierNames[3]]
	if tier3.Ops != 3 || tier3.Errors != 1 || tier3.P50 != 9*time.Millisecond || tier3.Seconds != 4 {
		t.Errorf("tier 3: %d events, %d missed, p50 %v, %v s; want 3, 1, 9ms, 4 s", tier3.Ops, tier3.Errors, tier3.P50, tier3.Seconds)
	}
	added := byName[tierAdded[2]]
	if added.Ops != 4 || added.P50 != 3*time.Millisecond || added.P99 != 5*time.Millisecond {
		t.Errorf("added at tier 2: %d, p50 %v, p99 %v; want 4, 3ms, 5ms", added.Ops, added.P50, added.P99)
	}
	if !strings.Contains(added.Note, "p50 per round 1.00, 5.00 ms") {
		t.Errorf("added at tier 2's note gives no p50 per round: %s", added.Note)
	}
	if _, ok := byName[""]; ok {
		t.Errorf("a row without a name (tier 0 adds nothing): %v", rows)
	}
}
