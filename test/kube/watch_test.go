//go:build kube

package kube

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

const (
	// watchUpdates is how many updates the watch must show, in order.
	watchUpdates = 40
	// updateTimeout bounds one update, retried while a killed server's
	// connections fail or the voters elect a leader.
	updateTimeout = time.Minute
	// eventPrefix starts every line the watching kubectl prints.
	eventPrefix = "EV "
)

// watchEvent is one line of the watching kubectl's output.
type watchEvent struct {
	typ string
	rv  int64
	n   string // the ConfigMap's data.n
}

// watchAcrossRestarts opens a kubectl watch on one ConfigMap, updates it
// watchUpdates times while each server in turn is killed (SIGKILL) and
// restarted, deletes it, and checks that the watch saw every
// update exactly once, in order, then the delete, without ending.
func watchAcrossRestarts(t *testing.T, k *kubectl, servers []*server) {
	k.must(t, configMap("watched", "", map[string]string{"n": "0"}), "create", "-f", "-")
	w := harness.Start(t, harness.ProcConfig{Name: "kubectl-watch", Bin: k.bin, Env: k.env(), Args: k.args(
		"get", "configmaps", "-n", ns, "--field-selector", "metadata.name=watched",
		"--watch-only", "--output-watch-events",
		"-o", `jsonpath={"`+eventPrefix+`"}{.type}{" "}{.object.metadata.resourceVersion}{" "}{.object.data.n}{"\n"}`,
	)})
	// kubectl lists, then watches from the list's resourceVersion: once an
	// update made after the watch started shows, the watch is open.
	probe := 0
	harness.WaitFor(t, time.Minute, "the watch shows an update", func() (bool, error) {
		if w.Exited() {
			t.Fatalf("kubectl watch exited")
		}
		probe++
		if _, err := k.run("", "patch", "configmap", "watched", "-n", ns, "--type", "merge", "-p", `{"data":{"probe":"`+strconv.Itoa(probe)+`"}}`); err != nil {
			return false, err
		}
		return len(events(t, w)) > 0, nil
	})

	// Before update i: kill or restart a server.
	// Before update 10j+5, kill server j; before 10j+10, restart it: one at
	// a time, every server in turn, so whichever server a watch stream of
	// the apiserver is on, one of the kills hits it (a stream only moves
	// when its server dies).
	killedWatchers := 0
	schedule := map[int]func(){}
	for j, s := range servers {
		schedule[10*j+5] = func() { killedWatchers += kill(t, s) }
		schedule[10*j+10] = func() { restart(t, s) }
	}
	if watchUpdates < 10*len(servers)+5 {
		t.Fatalf("%d updates are too few to kill and restart %d servers among them", watchUpdates, len(servers))
	}
	retries := 0
	for i := 1; i <= watchUpdates; i++ {
		if f := schedule[i]; f != nil {
			f()
		}
		retries += update(t, k, i)
	}
	if killedWatchers == 0 {
		t.Fatalf("the killed servers served no etcd watcher: the kills did not test the apiserver's watch")
	}
	k.must(t, "", "delete", "configmap", "watched", "-n", ns)
	harness.WaitFor(t, time.Minute, "the watch shows the delete", func() (bool, error) {
		evs := events(t, w)
		return len(evs) > 0 && evs[len(evs)-1].typ == "DELETED", fmt.Errorf("%d events so far", len(evs))
	})
	if w.Exited() {
		t.Fatalf("kubectl watch ended: the apiserver closed it")
	}
	evs := events(t, w)
	checkEvents(t, evs)
	t.Logf("watch: %d events (%d probes, %d updates, the delete), in order, none lost or repeated; %d update attempts failed and were retried while servers were down",
		len(evs), len(evs)-watchUpdates-1, watchUpdates, retries)
}

// checkEvents checks that after the probes (n=0) come MODIFIED n=1..
// watchUpdates, then DELETED, with increasing resourceVersions.
func checkEvents(t *testing.T, evs []watchEvent) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if evs[i].rv <= evs[i-1].rv {
			t.Fatalf("watch event %d %+v: resourceVersion not after event %d %+v\nall: %+v", i, evs[i], i-1, evs[i-1], evs)
		}
	}
	rest := evs
	for len(rest) > 0 && rest[0].typ == "MODIFIED" && rest[0].n == "0" {
		rest = rest[1:]
	}
	var want []watchEvent
	for i := 1; i <= watchUpdates; i++ {
		want = append(want, watchEvent{typ: "MODIFIED", n: strconv.Itoa(i)})
	}
	want = append(want, watchEvent{typ: "DELETED", n: strconv.Itoa(watchUpdates)})
	if len(rest) != len(want) {
		t.Fatalf("watch: %d events after the probes, want %d (MODIFIED n=1..%d, DELETED): %+v", len(rest), len(want), watchUpdates, rest)
	}
	for i := range want {
		if rest[i].typ != want[i].typ || rest[i].n != want[i].n {
			t.Fatalf("watch event %d after the probes: %s n=%s, want %s n=%s\nall: %+v", i, rest[i].typ, rest[i].n, want[i].typ, want[i].n, rest)
		}
	}
}

// events parses what the watching kubectl printed so far.
func events(t *testing.T, w *harness.Proc) []watchEvent {
	t.Helper()
	var evs []watchEvent
	sc := bufio.NewScanner(strings.NewReader(w.Log()))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), eventPrefix)
		if !ok {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("watch output line %q: want type, resourceVersion, n", sc.Text())
		}
		rv, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("watch output line %q: %v", sc.Text(), err)
		}
		ev := watchEvent{typ: f[0], rv: rv}
		if len(f) > 2 {
			ev.n = f[2]
		}
		evs = append(evs, ev)
	}
	return evs
}

// update sets data.n to i, retrying while the write fails (a merge patch
// that sets the same value twice changes nothing the second time), and
// returns how many attempts failed.
func update(t *testing.T, k *kubectl, i int) int {
	t.Helper()
	failed := 0
	harness.WaitFor(t, updateTimeout, fmt.Sprintf("update %d", i), func() (bool, error) {
		_, err := k.run("", "patch", "configmap", "watched", "-n", ns, "--type", "merge", "-p", `{"data":{"n":"`+strconv.Itoa(i)+`"}}`)
		if err != nil {
			failed++
			t.Logf("update %d failed, retrying: %v", i, firstLine(err.Error()))
		}
		return err == nil, err
	})
	return failed
}

// kill SIGKILLs s and returns how many etcd watchers it served.
func kill(t *testing.T, s *server) int {
	t.Helper()
	url := s.url
	if s.metricsURL != nil {
		url = s.metricsURL(t)
	}
	n, err := watchers(url)
	if err != nil {
		t.Fatalf("before killing %s: %v", s.name, err)
	}
	if s.stop != nil {
		t.Logf("stop %s, serving %d etcd watchers", s.name, n)
		s.stop(t)
		return n
	}
	t.Logf("kill -9 %s (pid %d), serving %d etcd watchers", s.name, s.proc.PID(), n)
	s.proc.Kill()
	return n
}

func restart(t *testing.T, s *server) {
	t.Helper()
	start := time.Now()
	if s.proc != nil {
		s.proc.Restart(t)
	}
	s.serving(t)
	t.Logf("%s restarted, serving again in %v", s.name, time.Since(start).Round(time.Millisecond))
}

// watchers reads etcd_debugging_mvcc_watcher_total from a server's
// /metrics: how many watchers its store serves.
func watchers(url string) (int, error) {
	m, err := harness.Scrape(context.Background(), url+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	n, err := m.Value("etcd_debugging_mvcc_watcher_total")
	return int(n), err
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
