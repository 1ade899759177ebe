package compare

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/config"
)

const msec = time.Millisecond

// synthetic is a writer putting every 10 ms (sequence i+1 called at 10i ms,
// acknowledged 2 ms later, at revision 100+seq), n puts, no prefill.
func synthetic(n int) *History {
	h := &History{Watches: map[string][]Event{}, WatchErrs: map[string]string{}, Elapsed: time.Duration(10*n) * msec}
	for i := range n {
		seq := int64(i + 1)
		call := time.Duration(10*i) * msec
		h.Writes = append(h.Writes, Write{Seq: seq, Key: "k", Call: call, Return: call + 2*msec, Rev: 100 + seq, Acked: true})
	}
	return h
}

// lastAckedBefore is the position a read sent at t must at least show.
func lastAckedBefore(h *History, t time.Duration) int64 {
	var pos int64
	for _, w := range h.Writes {
		if w.Acked && w.Return < t {
			pos = w.Seq
		}
	}
	return pos
}

// addReads adds a reader on p every 5 ms from 0 to the end, each read taking
// 1 ms and showing what was acknowledged lag before it was sent, from when
// there is such a thing.
func addReads(h *History, p Path, reader int, lag time.Duration) {
	for c := lag + 5*msec; c < h.Elapsed; c += 5 * msec {
		h.Reads = append(h.Reads, Read{Path: p, Reader: reader, Call: c, Return: c + msec, Pos: lastAckedBefore(h, c-lag)})
	}
}

func TestStalenessAgainstAckedHistory(t *testing.T) {
	h := synthetic(200)
	a := newAcked(h)
	// Sent at 1005 ms showing what was acknowledged by 955 ms (seq 96):
	// seq 97 was acknowledged at 962 ms, 43 ms before the read; the latest
	// acknowledged write, seq 101 at revision 201, is 5 revisions ahead.
	ms, revs := a.staleness(1005*msec, 96)
	if ms != 43 || revs != 5 {
		t.Fatalf("staleness of a read at 1005 ms showing seq 96 = %v ms, %d revisions; want 43 ms, 5", ms, revs)
	}
	// A read showing everything acknowledged before it, or more, is fresh.
	for _, pos := range []int64{101, 102} {
		if ms, revs := a.staleness(1005*msec, pos); ms != 0 || revs != 0 {
			t.Fatalf("staleness of a read at 1005 ms showing seq %d = %v ms, %d revisions; want 0", pos, ms, revs)
		}
	}
	// A put in flight when the read was sent (seq 101 returns at 1002 ms)
	// is not missed by a read sent at 1001 ms.
	if ms, _ := a.staleness(1001*msec, 100); ms != 0 {
		t.Fatalf("a read sent before the put was acknowledged counts it as missed: %v ms", ms)
	}
}

func TestStalenessOfAnAmbiguousPutComesFromTheReplicaWatch(t *testing.T) {
	h := synthetic(10)
	h.Writes[4].Acked, h.Writes[4].Rev = false, 0 // seq 5
	a := newAcked(h)
	// Unknown: the revision of the last acknowledged put before it (seq 4).
	if got := a.rev(5); got != 104 {
		t.Fatalf("rev of an unseen ambiguous put = %d, want 104 (the put before it)", got)
	}
	h.Watches["replica"] = []Event{{Seq: 5, Rev: 105}}
	if got := newAcked(h).rev(5); got != 105 {
		t.Fatalf("rev of an ambiguous put the replica's watch saw = %d, want 105", got)
	}
}

func TestVerdicts(t *testing.T) {
	h := synthetic(300)
	addReads(h, PathLeader, 0, 0)
	addReads(h, PathReplicaWeak, 0, 50*msec)
	cfg := config.DefaultCompare()
	a := Analyze(cfg, h, 0, 0)
	leader, weak := a.Paths[0], a.Paths[2]
	if leader.Path != PathLeader || weak.Path != PathReplicaWeak {
		t.Fatalf("paths out of order: %v, %v", leader.Path, weak.Path)
	}
	if leader.Linearizable != VerdictOK || leader.Run.StaleReads != 0 || leader.Run.StalenessMS.Max != 0 {
		t.Fatalf("leader: %+v, want linearizable and never stale", leader)
	}
	if weak.Linearizable != VerdictIllegal {
		t.Fatalf("reads 50 ms behind: porcupine says %s, want illegal", weak.Linearizable)
	}
	// 50 ms behind at one put per 10 ms: between 40 and 50 ms stale,
	// 5 revisions behind.
	if q := weak.Run.StalenessMS; q.P50 < 40 || q.Max > 50 {
		t.Fatalf("weak staleness %+v ms, want within [40, 50]", q)
	}
	if q := weak.Run.StalenessRev; q.P50 != 5 || q.Max != 5 {
		t.Fatalf("weak staleness %+v revisions, want 5", q)
	}
	if weak.Run.MonotonicViolations != 0 {
		t.Fatalf("weak: %d monotonic violations, want 0", weak.Run.MonotonicViolations)
	}
}

func TestMonotonicViolations(t *testing.T) {
	h := synthetic(10)
	for i, pos := range []int64{3, 5, 4, 6, 6} {
		c := time.Duration(10*i) * msec
		h.Reads = append(h.Reads, Read{Path: PathMirror, Reader: 0, Call: c, Return: c + msec, Pos: pos})
	}
	// Another reader going back is not this reader's violation.
	h.Reads = append(h.Reads, Read{Path: PathMirror, Reader: 1, Call: 0, Return: msec, Pos: 1})
	a := Analyze(config.DefaultCompare(), h, 0, 0)
	if got := a.Paths[len(a.Paths)-1].Run.MonotonicViolations; got != 1 {
		t.Fatalf("monotonic violations = %d, want 1 (5 then 4)", got)
	}
}

func TestWatchCheck(t *testing.T) {
	h := synthetic(6)
	h.Prefill = 1
	h.Writes[5].Acked = false // seq 6: ambiguous, may or may not arrive
	got := checkWatch(h, []Event{{Seq: 1}, {Seq: 2}, {Seq: 2}, {Seq: 4}, {Seq: 3}})
	want := WatchCheck{Expected: 4, Delivered: 4, Lost: 1, Duplicated: 1, OutOfOrder: 1}
	if got != want {
		t.Fatalf("checkWatch = %+v, want %+v (seq 5 lost, 2 twice, 3 after 4)", got, want)
	}
	if got := checkWatch(h, []Event{{Seq: 2}, {Seq: 3}, {Seq: 4}, {Seq: 5}}); got.Lost+got.Duplicated+got.OutOfOrder != 0 {
		t.Fatalf("a complete, ordered watch: %+v", got)
	}
}

func TestOutages(t *testing.T) {
	reads := []Read{
		{Call: 0, Return: 1 * msec},
		{Call: 100 * msec, Return: 3100 * msec, Err: "timeout"},
		{Call: 200 * msec, Return: 3200 * msec, Err: "timeout"},
		{Call: 300 * msec, Return: 4000 * msec}, // waited for the path to come back
		{Call: 5000 * msec, Return: 5001 * msec, Err: "unavailable"},
	}
	got := outages(reads, 6000*msec)
	want := []interval{{100 * msec, 4000 * msec}, {5000 * msec, 6000 * msec}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("outages = %v, want %v", got, want)
	}
	if d := got[0].overlap(0, 1000*msec); d != 900*msec {
		t.Fatalf("overlap with the first second = %v, want 900ms", d)
	}
}

func TestTornReads(t *testing.T) {
	h := synthetic(12)
	h.Prefill = 4 // four keys: key i holds i+1, i+5, i+9
	a := newAcked(h)
	if a.torn(10, []int64{9, 10, 7, 8}) {
		t.Fatal("the state at seq 10 called torn")
	}
	if !a.torn(10, []int64{9, 10, 3, 8}) {
		t.Fatal("key 2 at seq 3 though seq 7 was acknowledged: not called torn")
	}
	h.Writes[6].Acked = false // seq 7 ambiguous: it may never have been applied
	if newAcked(h).torn(10, []int64{9, 10, 3, 8}) {
		t.Fatal("key 2 missing an ambiguous put called torn")
	}
}

// A replica that reports a staleness bound smaller than what its read
// missed is caught; one whose bound covers the miss, or that reports none,
// is not.
func TestReportedBoundViolations(t *testing.T) {
	h := synthetic(200)
	addReads(h, PathReplicaWeak, 0, 50*msec) // every read misses 43–48 ms of writes
	for i := range h.Reads {
		h.Reads[i].Bound, h.Reads[i].Reported = 100*msec, true
	}
	honest := len(h.Reads)
	addReads(h, PathReplicaWeak, 1, 50*msec)
	lying := len(h.Reads) - honest
	for i := honest; i < len(h.Reads); i++ {
		h.Reads[i].Bound, h.Reads[i].Reported = 20*msec, true
	}
	addReads(h, PathReplicaStrong, 2, 50*msec) // no header: not counted
	a := Analyze(config.DefaultCompare(), h, 0, 0)
	for _, p := range a.Paths {
		switch p.Path {
		case PathReplicaWeak:
			if p.ReportedBounds != honest+lying || p.ReportedBoundViolations != lying {
				t.Errorf("replica-weak: %d violations of %d reported bounds, want %d of %d (every read of the reader that reports 20 ms while 43+ ms stale)",
					p.ReportedBoundViolations, p.ReportedBounds, lying, honest+lying)
			}
		default:
			if p.ReportedBounds != 0 || p.ReportedBoundViolations != 0 {
				t.Errorf("%s: %d violations of %d reported bounds, want none: its reads reported no bound", p.Path, p.ReportedBoundViolations, p.ReportedBounds)
			}
		}
	}
	var tbl strings.Builder
	if err := a.Table(&tbl); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d / %d", lying, honest+lying); !strings.Contains(tbl.String(), want) {
		t.Errorf("the table does not show %q in the reported bound column:\n%s", want, tbl.String())
	}
}
