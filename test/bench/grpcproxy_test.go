package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestWatchShapesWatchEveryKeyAlike: in both shapes every key is watched
// by as many watchers, perPut of them, so that a put's expected events are
// perPut whichever key it writes.
func TestWatchShapesWatchEveryKeyAlike(t *testing.T) {
	const n = 3000
	for _, s := range proxyShapes {
		hits := make([]int, proxyKeys)
		for i := range n {
			cr := s.request(i).GetCreateRequest()
			if cr == nil {
				t.Fatalf("%s: watcher %d: not a create request", s.name, i)
			}
			for k := range proxyKeys {
				key := proxyKey(k)
				in := key == string(cr.Key)
				if len(cr.RangeEnd) > 0 {
					in = key >= string(cr.Key) && key < string(cr.RangeEnd)
					if want := clientv3.GetPrefixRangeEnd(string(cr.Key)); string(cr.RangeEnd) != want {
						t.Fatalf("%s: watcher %d: range end %q, want the prefix's %q", s.name, i, cr.RangeEnd, want)
					}
				}
				if in {
					hits[k]++
				}
			}
		}
		for k, h := range hits {
			if h != s.perPut(n) {
				t.Fatalf("%s: key %s has %d watchers, want perPut = %d", s.name, proxyKey(k), h, s.perPut(n))
			}
		}
	}
	if got := len(map[string]bool{proxyKey(0): true, proxyKey(proxyKeys - 1): true, proxyKey(proxyKeys): true}); got != 2 {
		t.Errorf("proxyKey does not wrap at %d keys: %d distinct of 0, %d, %d", proxyKeys, got, proxyKeys-1, proxyKeys)
	}
}

func TestDeliveryFromTheAcknowledgement(t *testing.T) {
	acked := map[int64]int64{10: 1000, 11: 2000}
	lookup := func(rev int64) (int64, bool) { at, ok := acked[rev]; return at, ok }
	lats, unacked := delivery([][]arrival{{{10, 1500}, {11, 1900}}, {{12, 3000}, {10, 4000}}}, lookup)
	// The event of 11 came before its put's answer: 0, not negative.
	if want := []time.Duration{0, 500, 3000}; !slices.Equal(lats, want) {
		t.Errorf("delivery = %v, want %v (sorted, clamped at 0)", lats, want)
	}
	if unacked != 1 {
		t.Errorf("unacked = %d, want 1 (revision 12 was never acknowledged)", unacked)
	}
}

func TestAckLogKeepsTheLatestRevision(t *testing.T) {
	a := newAckLog()
	for _, rev := range []int64{5, 7, 6} {
		a.ack(rev, rev*100)
	}
	if got := a.last.Load(); got != 7 {
		t.Errorf("last = %d, want 7 (acknowledgements out of order)", got)
	}
	if at, ok := a.acked(6); !ok || at != 600 {
		t.Errorf("acked(6) = %d, %v; want 600, true", at, ok)
	}
	if _, ok := a.acked(8); ok {
		t.Errorf("acked(8): a revision never acknowledged")
	}
}

func TestRevisionTallyJudgesAnswersAgainstTheLastAcknowledgedPut(t *testing.T) {
	acked := func(rev int64) (int64, bool) {
		if rev == 101 {
			return time.Unix(0, 0).Add(time.Second).UnixNano(), true
		}
		return 0, false
	}
	var tl revisionTally
	sent := time.Unix(0, 0).Add(3 * time.Second)
	tl.add(100, 100, sent, acked) // exact
	tl.add(100, 105, sent, acked) // newer than needed: a later put
	tl.add(105, 100, sent, acked) // misses 101..105; 101 acknowledged 2 s before the read
	tl.add(103, 90, sent, acked)  // misses 91..103; 91's acknowledgement unknown
	f := tl.figures()
	for name, want := range map[string]float64{figAnswers: 4, figBehind: 2, figMaxBehind: 13, figStaleMax: 2000} {
		if f[name] != want {
			t.Errorf("%s = %v, want %v (all: %v)", name, f[name], want, f)
		}
	}
}

func TestParseWatchers(t *testing.T) {
	if ns, err := parseWatchers(""); err != nil || ns != nil {
		t.Errorf(`parseWatchers("") = %v, %v; want nil, nil (the mode's)`, ns, err)
	}
	if ns, err := parseWatchers("10000, 100000"); err != nil || !slices.Equal(ns, []int{10000, 100000}) {
		t.Errorf("parseWatchers = %v, %v", ns, err)
	}
	for _, bad := range []string{"1500", "0", "-1000", "10k", "1000,"} {
		if _, err := parseWatchers(bad); err == nil || !strings.Contains(err.Error(), "--proxy-watchers") {
			t.Errorf("parseWatchers(%q) = %v; want an error naming --proxy-watchers", bad, err)
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 100000: "100,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestHostBusy(t *testing.T) {
	before, after := hostTicks{total: 1000, idle: 800}, hostTicks{total: 1200, idle: 850}
	if got := after.busySince(before); got != 75 {
		t.Errorf("busySince = %v, want 75 (150 of 200 ticks busy)", got)
	}
	if _, err := readHost(); err != nil {
		t.Errorf("readHost: %v", err)
	}
}

// TestGRPCProxySectionIsWritten: the scenario's rows, from windows as its
// rounds give them, make its section and its ratios, with every cell
// filled and no format verb left unmatched.
func TestGRPCProxySectionIsWritten(t *testing.T) {
	p := quickParams()
	p.proxyWatchers = []int{10000}
	g := &proxyRig{p: p, fresh: map[string]float64{frontProxy: 30, frontLearner: 60, frontCascaded: 55}}
	const rounds = 3
	var rows []Row
	wa := watchArms()
	wins := make([][]proxyWindow, len(wa))
	for i, arm := range wa {
		for k := range rounds {
			w := proxyWindow{puts: Result{Ops: 300, Seconds: 3, CPU: map[string]float64{"leader": 0.4 + 0.01*float64(k)}},
				cpu: map[string]float64{"leader": 0.4 + 0.01*float64(k), "self": 0.2, frontProxy: 0.1, frontLearner: 0.3, frontCascaded: 0.2}, busy: 40, sent: 330000}
			if arm.front != "" {
				w.cpu[arm.front] += 0.1 * float64(1+k)
				w.rss = 100 + float64(k)
				w.lats = []time.Duration{time.Millisecond, 2 * time.Millisecond, time.Duration(3+i) * time.Millisecond}
				w.expected = 3
				w.opened = time.Second
			}
			wins[i] = append(wins[i], w)
		}
	}
	rows = append(rows, g.watchRows(10000, wa, wins)...)
	ra := readArms()
	rwins := make([][]readWindow, len(ra))
	for i, arm := range ra {
		for k := range rounds {
			rw := readWindow{tally: &revisionTally{}}
			rw.proxyWindow = proxyWindow{puts: Result{Ops: 300, Seconds: 3}, cpu: map[string]float64{"leader": 0.4 + 0.02*float64(k+i)}, busy: 30}
			if arm.front != "" {
				rw.reads = Result{Ops: 900, Seconds: 3, Throughput: 300, P50: time.Millisecond, P99: 3 * time.Millisecond}
				rw.tally.add(10, 10, time.Now(), func(int64) (int64, bool) { return 0, false })
			}
			rwins[i] = append(rwins[i], rw)
		}
	}
	rows = append(rows, g.readRows(ra, rwins)...)
	rows = append(rows, Row{Scenario: grpcProxyID, Name: checkAuth, Figures: map[string]float64{frontVoter: 1, frontProxy: 0, frontCascaded: 1}})

	md := report{Mode: "quick", Machine: map[string]string{}, Rows: rows}.markdown()
	for _, want := range []string{
		"## grpc-proxy beside the read tier",
		"| 10,000 | 100 prefixes | a cascaded replica |",
		"| linearizable | grpc-proxy |",
		"| with auth on, a serializable read of a key its user may not read is refused after another user read it (etcd #22065) | yes | **no** | yes |",
		"| front RSS per 10,000 watchers, 10,000 watchers over 1,000 keys, a cascaded replica vs grpc-proxy |",
		"| leader CPU per linearizable read through a cascaded replica vs through grpc-proxy (each less the puts alone) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report does not hold %q", want)
		}
	}
	if bytes.Contains([]byte(md), []byte("%!")) {
		i := strings.Index(md, "%!")
		t.Errorf("a format verb without its argument: …%s…", md[max(0, i-80):min(len(md), i+40)])
	}
	for _, r := range rows {
		if r.Scenario != grpcProxyID {
			t.Errorf("row %q of scenario %q", r.Name, r.Scenario)
		}
		if len(r.Windows) != rounds && !strings.HasPrefix(r.Name, "check: ") {
			t.Errorf("row %q has %d windows, want one a round (%d)", r.Name, len(r.Windows), rounds)
		}
	}
	// Every ratio of the scenario is written from these rows.
	byName := map[string]Row{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	for _, c := range grpcProxyComparisons() {
		if strings.Contains(c.row, " watchers over ") && !strings.HasPrefix(c.row, "10,000 ") {
			continue // another count's
		}
		for _, name := range []string{c.row, c.partner} {
			if _, ok := byName[name]; !ok {
				t.Errorf("comparison %q names row %q, which the scenario does not write", c.what, name)
			}
		}
		if _, ok := c.ratio(byName); !ok {
			t.Errorf("comparison %q: no ratio from these rows", c.what)
		}
	}
}
