package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// isoTimestamp is etcd's log timestamp (logutil.DefaultZapLoggerConfig's
// EncodeTime: "2006-01-02T15:04:05.000000Z0700"), the one format of every
// line a replica or a mirror logs, its embedded members' included.
var isoTimestamp = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d{4})$`)

// etcd's start-up warnings about a member's settings that a replica's
// member, or a cascaded replica's private store, has by design; none may
// reach the replica's log. A learner replica's member has no client
// listener; the store is a single member with auth off, whose request
// limit (1 GiB) and quota (16 GiB) fit a copy of the source.
var (
	notForALearner = []string{"not recommended for production"}
	notForAStore   = append(slices.Clone(notForALearner),
		"exceeded recommended request limit", "quota exceeds the maximum value", "simple token is not cryptographically signed")
)

// A clean stop (SIGTERM) of a learner replica (with --remove-on-exit and
// without), a cascaded replica and a mirror: each exits 0, logs exactly one "stopped" line naming what
// stopped, and no error-level line or stack trace (etcd's "setting up
// serving from embedded etcd failed" was logged on every stop); every line
// either logs carries etcd's ISO 8601 timestamp (understudy's own lines had
// epoch floats); and none of etcd's start-up warnings about settings a
// replica chose on purpose (a cascaded store's 1 GiB requests and 16 GiB
// quota, its single member) reach the log.
func TestCleanStopLogsOneStoppedLineAndNoError(t *testing.T) {
	beside(t)
	p := startMirrorPairOf(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := p.s.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	r := harness.StartReplica(t, p.src, harness.ReplicaConfig{Name: "r1"})
	// One that leaves the cluster on its way out: the member's removal and
	// its data's are part of its clean stop.
	leaving := harness.StartReplica(t, p.src, harness.ReplicaConfig{Name: "r2", Extra: []string{"--remove-on-exit"}})
	cr := harness.StartReplica(t, p.src, harness.ReplicaConfig{Name: "c1", Upstream: []string{r.ClientURL}})
	m := p.start(t, "--name", "m1")
	if err := m.WaitLog(ctx, "full sync done; streaming"); err != nil {
		t.Fatal(err)
	}
	// Every process has done some work: a write through the replica, read
	// back through the cascaded replica and found in the destination.
	put, err := client(t, r.ClientURL).Put(ctx, "k", "through-r1")
	if err != nil {
		t.Fatal(err)
	}
	readers := map[string]*clientv3.Client{cr.ClientURL: client(t, cr.ClientURL), p.dst.Endpoints()[0]: p.d}
	harness.WaitFor(t, time.Minute, "the write in the cascaded replica and the destination", func() (bool, error) {
		for url, cli := range readers {
			got, err := cli.Get(ctx, "k")
			if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "through-r1" {
				return false, fmt.Errorf("%s: %v (%v), want through-r1 (revision %d)", url, got, err, put.Header.Revision)
			}
		}
		return true, nil
	})

	// The cascaded replica before its upstream, so that what it logs is a
	// stop and not an upstream lost.
	for _, s := range []struct {
		proc        *harness.Proc
		stopped     string
		notApplying []string
	}{
		{cr.Proc, "cascaded replica stopped", notForAStore},
		{m, "mirror stopped", nil},
		{r.Proc, "replica stopped", notForALearner},
		{leaving.Proc, "replica stopped", notForALearner},
	} {
		if err := syscall.Kill(s.proc.PID(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		code, err := s.proc.Wait(ctx)
		if err != nil || code != 0 {
			t.Fatalf("%s after SIGTERM: exit %d (%v), want 0", s.proc.Name(), code, err)
		}
		checkStopLog(t, s.proc.Name(), s.proc.Log(), s.stopped, s.notApplying)
	}
}

// checkStopLog checks the log of one clean run: JSON lines only (the
// harness's own "###" markers aside), each with an ISO 8601 "ts", none at
// error level or above, none with a stack trace, none of the warnings
// notApplying, and exactly one line whose message says "stopped": stopped.
func checkStopLog(t *testing.T, name, log, stopped string, notApplying []string) {
	t.Helper()
	var stops []string
	for i, line := range strings.Split(strings.TrimRight(log, "\n"), "\n") {
		if strings.HasPrefix(line, "### loopback:") {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Errorf("%s log line %d is not a JSON log line (%v): %s", name, i+1, err, line)
			continue
		}
		if ts, _ := e["ts"].(string); !isoTimestamp.MatchString(ts) {
			t.Errorf("%s log line %d: timestamp %v is not etcd's ISO 8601: %s", name, i+1, e["ts"], line)
		}
		switch e["level"] {
		case "debug", "info", "warn":
		default:
			t.Errorf("%s log line %d at level %v on a clean run: %s", name, i+1, e["level"], line)
		}
		if _, ok := e["stacktrace"]; ok {
			t.Errorf("%s log line %d has a stack trace: %s", name, i+1, line)
		}
		for _, w := range notApplying {
			if strings.Contains(line, w) {
				t.Errorf("%s log line %d is a warning that does not apply to it (%q): %s", name, i+1, w, line)
			}
		}
		if msg, _ := e["msg"].(string); strings.Contains(msg, "stopped") {
			stops = append(stops, line)
		}
	}
	if len(stops) != 1 || !strings.Contains(stops[0], fmt.Sprintf(`"msg":%q`, stopped)) {
		t.Errorf("%s logged %d lines saying stopped, want exactly one %q:\n%s", name, len(stops), stopped, strings.Join(stops, "\n"))
	}
}
