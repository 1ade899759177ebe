package core

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

var m = Mapping{Prefix: "/s/", DestPrefix: "/d/"}

func put(rev int64, key string) *mvccpb.Event {
	return &mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(fmt.Sprint(rev)), ModRevision: rev}}
}

func del(rev int64, key string) *mvccpb.Event {
	return &mvccpb.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
}

// show is a plan as text: one line per transaction, its changes
// ("+key" put, "-key" delete, "~key" a foreign version's delete), then
// "@from-revision" and the whole revisions it completes.
func show(txns []Txn) string {
	var lines []string
	for _, t := range txns {
		var cs []string
		for _, c := range t.Changes {
			switch {
			case c.Put != nil:
				cs = append(cs, "+"+c.Key)
			case c.Foreign:
				cs = append(cs, "~"+c.Key)
			default:
				cs = append(cs, "-"+c.Key)
			}
		}
		lines = append(lines, fmt.Sprintf("%s @%d-%d x%d", strings.Join(cs, " "), t.Checkpoint.From, t.Checkpoint.Revision, t.Revisions))
	}
	return strings.Join(lines, "\n")
}

func TestPlan(t *testing.T) {
	cp := Checkpoint{Phase: PhaseStream, Revision: 4, From: 3, SourceClusterID: "src"}
	for _, c := range []struct {
		name    string
		events  []*mvccpb.Event
		limit   int
		foreign Versions
		want    string
	}{
		{"nothing", nil, 10, nil, ""},
		{"one revision", []*mvccpb.Event{put(5, "/s/a"), del(5, "/s/b")}, 10, nil,
			"+/d/a -/d/b @5-5 x1"},
		{"a backlog: whole revisions together", []*mvccpb.Event{put(5, "/s/a"), put(6, "/s/b"), del(7, "/s/c")}, 10, nil,
			"+/d/a +/d/b -/d/c @5-7 x3"},
		{"the limit starts the next transaction at a revision's start", []*mvccpb.Event{put(5, "/s/a"), put(5, "/s/b"), put(6, "/s/c"), put(6, "/s/d"), put(7, "/s/e")}, 3, nil,
			"+/d/a +/d/b @5-5 x1\n+/d/c +/d/d +/d/e @6-7 x2"},
		{"exactly the limit", []*mvccpb.Event{put(5, "/s/a"), put(6, "/s/b"), put(7, "/s/c")}, 3, nil,
			"+/d/a +/d/b +/d/c @5-7 x3"},
		{"a key changed again starts the next transaction", []*mvccpb.Event{put(5, "/s/a"), put(6, "/s/b"), del(7, "/s/a"), put(8, "/s/c")}, 10, nil,
			"+/d/a +/d/b @5-6 x2\n-/d/a +/d/c @7-8 x2"},
		{"a revision over the limit goes in parts, only the last moves the checkpoint",
			[]*mvccpb.Event{put(5, "/s/z"), put(6, "/s/a"), put(6, "/s/b"), put(6, "/s/c"), put(6, "/s/d"), put(6, "/s/e"), put(6, "/s/f"), put(6, "/s/g"), put(7, "/s/h")}, 3, nil,
			"+/d/z @5-5 x1\n+/d/a +/d/b +/d/c @5-5 x0\n+/d/d +/d/e +/d/f @5-5 x0\n+/d/g +/d/h @6-7 x2"},
		{"a revision over the limit first in the batch", []*mvccpb.Event{put(5, "/s/a"), put(5, "/s/b"), put(5, "/s/c")}, 2, nil,
			"+/d/a +/d/b @3-4 x0\n+/d/c @5-5 x1"},
		{"reserved keys count but are not copied", []*mvccpb.Event{put(5, ReservedPrefix+"x"), put(6, "/s/a")}, 10, nil,
			"+/d/a @5-6 x2"},
		{"a revision of reserved keys only moves the checkpoint", []*mvccpb.Event{put(5, ReservedPrefix+"x")}, 10, nil,
			" @5-5 x1"},
		{"a reserved key does not split on a repeated name", []*mvccpb.Event{put(5, ReservedPrefix+"x"), put(6, ReservedPrefix+"x")}, 10, nil,
			" @5-6 x2"},
		{"a version another mirror wrote deletes this mirror's copy", []*mvccpb.Event{put(5, "/s/a"), put(5, "/s/b")}, 10, Versions{{"/s/b", 5}: true},
			"+/d/a ~/d/b @5-5 x1"},
		{"only that version", []*mvccpb.Event{put(5, "/s/b"), put(6, "/s/b")}, 10, Versions{{"/s/b", 5}: true},
			"~/d/b @5-5 x1\n+/d/b @6-6 x1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Plan(cp, c.events, Budget{Ops: c.limit}, m, c.foreign)
			if s := show(got); s != c.want {
				t.Fatalf("plan:\n%s\nwant:\n%s", s, c.want)
			}
			for _, txn := range got {
				if txn.Checkpoint.SourceClusterID != "src" {
					t.Fatalf("checkpoint %+v lost the mirror's identity", txn.Checkpoint)
				}
				if txn.Revisions > 0 && txn.Checkpoint.Phase != PhaseStream {
					t.Fatalf("checkpoint %+v: phase %q, want %q", txn.Checkpoint, txn.Checkpoint.Phase, PhaseStream)
				}
			}
		})
	}
}

// TestPlanInvariants checks, over random backlogs and budgets, what every
// plan must keep: the changes in the source's order and none lost, at most
// the budget's changes and bytes per transaction (but for a lone change
// larger than it), no destination key twice in one, revisions whole
// unless one alone exceeds the budget, and checkpoints that chain.
func TestPlanInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		var events []*mvccpb.Event
		rev := int64(10)
		for range r.IntN(40) {
			rev += 1 + int64(r.IntN(2))
			inRev := map[string]bool{} // etcd sends a key at most once per revision
			for range 1 + r.IntN(6) {
				k := fmt.Sprintf("/s/%d", r.IntN(12))
				if inRev[k] {
					continue
				}
				inRev[k] = true
				if r.IntN(4) == 0 {
					events = append(events, del(rev, k))
				} else {
					ev := put(rev, k)
					ev.Kv.Value = make([]byte, r.IntN(3000))
					events = append(events, ev)
				}
			}
		}
		b := Budget{Ops: 1 + r.IntN(8)}
		if r.IntN(2) == 0 {
			b.Bytes = 1000 + r.IntN(8000)
		}
		checkPlan(t, i, events, b, Plan(Checkpoint{Phase: PhaseStream, Revision: 10}, events, b, m, nil))
	}
}

func checkPlan(t *testing.T, i int, events []*mvccpb.Event, b Budget, txns []Txn) {
	t.Helper()
	fail := func(format string, a ...any) {
		t.Helper()
		t.Fatalf("case %d, budget %+v: %s\nplan:\n%s", i, b, fmt.Sprintf(format, a...), show(txns))
	}
	var flat []Change
	prev := int64(10)
	revs := 0
	for j, txn := range txns {
		if len(txn.Changes) > b.Ops {
			fail("transaction %d holds %d changes", j, len(txn.Changes))
		}
		bytes := 0
		for _, c := range txn.Changes {
			bytes += ChangeBytes(c)
		}
		if b.Bytes > 0 && bytes > b.Bytes && len(txn.Changes) > 1 {
			fail("transaction %d holds %d bytes in %d changes", j, bytes, len(txn.Changes))
		}
		seen := map[string]bool{}
		for _, c := range txn.Changes {
			if seen[c.Key] {
				fail("transaction %d changes %s twice", j, c.Key)
			}
			seen[c.Key] = true
		}
		flat = append(flat, txn.Changes...)
		cp := txn.Checkpoint
		switch {
		case txn.Revisions == 0 && cp.Revision != prev:
			fail("part %d moved the checkpoint to %d", j, cp.Revision)
		case txn.Revisions > 0 && cp.From != prev+1:
			fail("transaction %d: from %d after %d", j, cp.From, prev)
		case txn.Revisions > 0:
			// Whole revisions: the next event after it is of a later one.
			n := len(flat)
			if n < len(events) && events[n].Kv.ModRevision == cp.Revision {
				fail("transaction %d ends inside revision %d", j, cp.Revision)
			}
			if n > 0 && events[n-1].Kv.ModRevision != cp.Revision {
				fail("transaction %d: checkpoint %d, last event of revision %d", j, cp.Revision, events[n-1].Kv.ModRevision)
			}
			prev = cp.Revision
		}
		revs += txn.Revisions
	}
	if len(flat) != len(events) {
		fail("%d changes for %d events", len(flat), len(events))
	}
	distinct := 0
	for k, ev := range events {
		if flat[k].Key != m.Map(ev.Kv.Key) || (flat[k].Put == nil) != (ev.Type == mvccpb.DELETE) {
			fail("change %d is %+v, event %v %s", k, flat[k], ev.Type, ev.Kv.Key)
		}
		if k == 0 || events[k-1].Kv.ModRevision != ev.Kv.ModRevision {
			distinct++
		}
	}
	if revs != distinct {
		fail("%d revisions completed, %d in the events", revs, distinct)
	}
	if len(events) > 0 && prev != events[len(events)-1].Kv.ModRevision {
		fail("the last checkpoint is %d, the last event's revision %d", prev, events[len(events)-1].Kv.ModRevision)
	}
}

func TestPageChanges(t *testing.T) {
	kv := func(key, val string, lease int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte(key), Value: []byte(val), Lease: lease, ModRevision: 7}
	}
	kvs := []*mvccpb.KeyValue{kv("/s/same", "v", 0), kv("/s/differs", "v", 0), kv("/s/missing", "v", 0),
		kv(ReservedPrefix+"x", "", 0), kv("/s/theirs-gone", "v", 0), kv("/s/theirs-here", "v", 0), kv("/s/leased", "v", 3)}
	have := map[string]Copy{
		"/d/same":        {KV: kv("/d/same", "v", 0), Own: kv("", "", 0)},
		"/d/differs":     {KV: kv("/d/differs", "w", 0), Own: kv("", "", 0)},
		"/d/theirs-here": {KV: kv("/d/theirs-here", "v", 0), Own: kv("", "", 0)},
		"/d/leased":      {KV: kv("/d/leased", "v", 9), Own: kv("", "", 9)},
	}
	foreign := Versions{{"/s/theirs-gone", 7}: true, {"/s/theirs-here", 7}: true}
	wantLease := func(kv *mvccpb.KeyValue) int64 { return kv.Lease * 3 }
	names := func(cs []SyncChange) string {
		var out []string
		for _, c := range cs {
			out = append(out, show([]Txn{{Changes: []Change{c.Change}}})[:len(c.Key)+1]+"<"+c.Src)
		}
		return strings.Join(out, " ")
	}
	got, same := PageChanges(kvs, have, foreign, true, m, wantLease)
	if s := names(got); s != "+/d/differs</s/differs +/d/missing</s/missing ~/d/theirs-here</s/theirs-here" || same != 3 {
		t.Fatalf("compared: %s, %d same; want the differing, missing and foreign-but-present keys, 3 same", s, same)
	}
	got, same = PageChanges(kvs, nil, foreign, false, m, wantLease)
	if len(got) != 6 || same != 0 || got[4].Foreign != true || got[6-1].Put == nil {
		t.Fatalf("first sync: %s, %d same; want every key but the reserved one written", names(got), same)
	}
}

func TestPlanPage(t *testing.T) {
	sc := func(keys ...string) []SyncChange {
		var out []SyncChange
		for _, k := range keys {
			out = append(out, SyncChange{Src: "/s/" + k, Change: Change{Key: "/d/" + k}})
		}
		return out
	}
	cp := Checkpoint{Phase: PhaseSync, Revision: 40, SyncedThrough: "/s/0"}
	through := func(txns []Txn) string {
		var out []string
		for _, t := range txns {
			out = append(out, fmt.Sprintf("%d>%s", len(t.Changes), t.Checkpoint.SyncedThrough))
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		changes []SyncChange
		last    string
		want    string
	}{
		{sc("a", "b", "c", "d", "e"), "/s/e", "2>/s/b 2>/s/d 1>/s/e"},
		{sc("a", "b"), "/s/z", "2>/s/b 0>/s/z"}, // the page's last keys unchanged
		{nil, "/s/z", "0>/s/z"},
		{sc("a", "b"), "/s/b", "2>/s/b"},
	} {
		got := PlanPage(cp, c.changes, c.last, Budget{Ops: 2})
		if s := through(got); s != c.want {
			t.Errorf("page %v through %s: %s, want %s", c.changes, c.last, s, c.want)
		}
		for _, txn := range got {
			if txn.Checkpoint.Revision != 40 || txn.Checkpoint.Phase != PhaseSync || txn.Revisions != 0 {
				t.Errorf("a sync page moved the checkpoint: %+v", txn)
			}
		}
	}
}

func TestGoneAndChunks(t *testing.T) {
	gone := Gone([]string{"/d/a", "/d/b", "/d/c"}, map[string]bool{"/d/b": true})
	if len(gone) != 2 || gone[0].Key != "/d/a" || gone[1].Key != "/d/c" || gone[0].Put != nil {
		t.Fatalf("Gone = %+v, want deletes of /d/a and /d/c", gone)
	}
	var got [][]int
	for c := range Chunks([]int{1, 2, 3, 4, 5}, 2) {
		got = append(got, c)
		if len(got) == 2 {
			break // the iterator stops when told
		}
	}
	if fmt.Sprint(got) != "[[1 2] [3 4]]" {
		t.Fatalf("Chunks = %v", got)
	}
}

func TestMapping(t *testing.T) {
	if got := m.Map([]byte("/s/a/b")); got != "/d/a/b" {
		t.Errorf("Map = %q", got)
	}
	if got := m.Unmap([]byte("/d/a/b")); got != "/s/a/b" {
		t.Errorf("Unmap = %q", got)
	}
	if !Reserved([]byte(ReservedPrefix+"m/checkpoint")) || Reserved([]byte("/s/a")) {
		t.Error("Reserved is wrong")
	}
}

// Large values: transactions stay within the budget's bytes — etcd refuses
// a request over its --max-request-bytes — a revision too large for one
// goes in parts, and a change larger than the budget goes alone.
func TestPlanBoundsBytes(t *testing.T) {
	big := func(ev *mvccpb.Event, n int) *mvccpb.Event { ev.Kv.Value = make([]byte, n); return ev }
	events := []*mvccpb.Event{
		big(put(11, "/s/a"), 400), big(put(12, "/s/b"), 400), big(put(13, "/s/c"), 400),
		big(put(14, "/s/d"), 400), big(put(14, "/s/e"), 400), big(put(14, "/s/f"), 400),
		big(put(15, "/s/g"), 5000),
	}
	b := Budget{Ops: 100, Bytes: 2500}
	got := Plan(Checkpoint{Phase: PhaseStream, Revision: 10}, events, b, m, nil)
	want := "+/d/a +/d/b @11-12 x2 | +/d/c @13-13 x1 | +/d/d +/d/e @13-13 x0 | +/d/f @14-14 x1 | +/d/g @15-15 x1"
	if s := strings.TrimSpace(strings.ReplaceAll(show(got), "\n", " | ")); s != want {
		t.Fatalf("plan:\n%s\nwant %s", s, want)
	}
	checkPlan(t, 0, events, b, got)
	var sizes [][]int
	for c := range ChunksBy([]int{3, 3, 3, 9, 1, 1}, Budget{Ops: 3, Bytes: 6}, func(n int) int { return n }) {
		sizes = append(sizes, c)
	}
	if fmt.Sprint(sizes) != "[[3 3] [3] [9] [1 1]]" {
		t.Fatalf("ChunksBy: %v", sizes)
	}
	for c := range ChunksBy([]int{1, 1}, Budget{Ops: 1}, func(n int) int { return n }) {
		if len(c) != 1 {
			t.Fatalf("ChunksBy with one op a chunk: %v", c)
		}
		break // a caller that stops early
	}
	if n := KVBytes(&mvccpb.KeyValue{Key: []byte("k"), Value: make([]byte, 10)}); n != changeOverhead+8+20 {
		t.Fatalf("KVBytes = %d", n)
	}
}
