package logging

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/soheilhy/cmux"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// closedAccept is what an accept loop returns once its listener is closed.
var closedAccept = &net.OpError{Op: "accept", Net: "tcp", Err: net.ErrClosed}

// The rules, one line at a time: each line's level and stack trace as a
// member of kind logs it, before etcd's Close began and after.
func TestRuleCoreLevels(t *testing.T) {
	const serveFailed = "setting up serving from embedded etcd failed."
	type line struct {
		msg   string
		level zapcore.Level
		err   error
	}
	cases := []struct {
		name      string
		kind      Kind
		noClients bool
		closing   bool
		in        line
		want      zapcore.Level
	}{
		{"closed listener on close", Learner, true, true, line{serveFailed, zapcore.ErrorLevel, closedAccept}, zapcore.InfoLevel},
		{"closed listener on a store's close", Store, true, true, line{serveFailed, zapcore.ErrorLevel, closedAccept}, zapcore.InfoLevel},
		{"closed http server on close", Learner, true, true, line{serveFailed, zapcore.ErrorLevel, http.ErrServerClosed}, zapcore.InfoLevel},
		{"closed cmux listener on close", Learner, true, true, line{serveFailed, zapcore.ErrorLevel, cmux.ErrListenerClosed}, zapcore.InfoLevel},
		{"closed listener while not closing", Learner, true, false, line{serveFailed, zapcore.ErrorLevel, closedAccept}, zapcore.ErrorLevel},
		{"another serve error on close", Learner, true, true, line{serveFailed, zapcore.ErrorLevel, syscall.EADDRINUSE}, zapcore.ErrorLevel},
		{"peer link lost on close", Learner, true, true, line{"lost TCP streaming connection with remote peer", zapcore.WarnLevel, errors.New("context canceled")}, zapcore.InfoLevel},
		{"peer link lost while running", Learner, true, false, line{"lost TCP streaming connection with remote peer", zapcore.WarnLevel, errors.New("EOF")}, zapcore.WarnLevel},
		{"peer inactive while running", Learner, true, false, line{"peer became inactive (message send to peer failed)", zapcore.WarnLevel, nil}, zapcore.WarnLevel},
		{"unknown peer on close", Learner, true, true, line{"failed to find remote peer in cluster", zapcore.WarnLevel, nil}, zapcore.InfoLevel},
		{"no term yet", Learner, true, false, line{"failed to update storage version", zapcore.ErrorLevel,
			errors.New("cannot detect storage schema version: missing term information")}, zapcore.InfoLevel},
		{"storage version failing otherwise", Learner, true, false, line{"failed to update storage version", zapcore.ErrorLevel,
			errors.New("cannot create migration plan: boom")}, zapcore.ErrorLevel},
		{"single port, no client listener", Learner, true, false, line{"Running http and grpc server on single port. This is not recommended for production.", zapcore.WarnLevel, nil}, zapcore.DebugLevel},
		{"single port, client listener", Learner, false, false, line{"Running http and grpc server on single port. This is not recommended for production.", zapcore.WarnLevel, nil}, zapcore.WarnLevel},
		{"request limit of a store", Store, true, false, line{"exceeded recommended request limit", zapcore.WarnLevel, nil}, zapcore.DebugLevel},
		{"request limit of a learner", Learner, true, false, line{"exceeded recommended request limit", zapcore.WarnLevel, nil}, zapcore.WarnLevel},
		{"quota of a store", Store, true, false, line{"quota exceeds the maximum value", zapcore.WarnLevel, nil}, zapcore.DebugLevel},
		{"quota of a learner", Learner, true, false, line{"quota exceeds the maximum value", zapcore.WarnLevel, nil}, zapcore.WarnLevel},
		{"simple token of a store", Store, true, false, line{"simple token is not cryptographically signed", zapcore.WarnLevel, nil}, zapcore.DebugLevel},
		{"simple token of a learner", Learner, true, false, line{"simple token is not cryptographically signed", zapcore.WarnLevel, nil}, zapcore.WarnLevel},
		{"cluster version cancelled on close", Store, true, true, line{"failed to update cluster version", zapcore.WarnLevel, errors.New("etcdserver: request cancelled")}, zapcore.InfoLevel},
		{"cluster version failing while running", Store, true, false, line{"failed to update cluster version", zapcore.WarnLevel, errors.New("etcdserver: request timed out")}, zapcore.WarnLevel},
		{"anything else", Learner, true, true, line{"raft log corrupted", zapcore.ErrorLevel, closedAccept}, zapcore.ErrorLevel},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obs, logs := observer.New(zapcore.DebugLevel)
			lg := zap.New(newRuleCore(obs, c.kind, c.noClients), zap.AddStacktrace(zapcore.ErrorLevel))
			// A logger derived before the close began, as etcd's
			// packages keep theirs, sees it too.
			child := lg.With(zap.String("local-member-id", "1"))
			if c.closing {
				lg.Info(closingMsg)
			}
			var fields []zap.Field
			if c.in.err != nil {
				fields = append(fields, zap.Error(c.in.err))
			}
			if ce := child.Check(c.in.level, c.in.msg); ce != nil {
				ce.Write(fields...)
			}
			got := logs.FilterMessage(c.in.msg).AllUntimed()
			if len(got) != 1 {
				t.Fatalf("%d lines %q logged, want 1", len(got), c.in.msg)
			}
			if got[0].Level != c.want {
				t.Errorf("%q logged at %v, want %v", c.in.msg, got[0].Level, c.want)
			}
			if wantStack := c.want >= zapcore.ErrorLevel; (got[0].Stack != "") != wantStack {
				t.Errorf("%q at %v: stack trace %v, want %v", c.in.msg, got[0].Level, got[0].Stack != "", wantStack)
			}
			if len(got[0].Context) != len(fields)+1 {
				t.Errorf("%q logged with fields %v, want the line's own and the logger's", c.in.msg, got[0].Context)
			}
		})
	}
}

// A member's lines below its level are not written, demoted or not.
func TestRuleCoreKeepsTheMembersLevel(t *testing.T) {
	obs, logs := observer.New(zapcore.WarnLevel)
	lg := zap.New(newRuleCore(obs, Store, true))
	lg.Info(closingMsg)
	lg.Warn("exceeded recommended request limit")
	lg.Error("setting up serving from embedded etcd failed.", zap.Error(closedAccept))
	lg.Info("an info line")
	lg.Warn("a warning")
	if got := logs.AllUntimed(); len(got) != 1 || got[0].Message != "a warning" {
		t.Fatalf("a member at warn level wrote %v, want only its warning", got)
	}
}

// A real member, configured as a cascaded replica's store is (one member,
// no client listener, a 1 GiB request limit, a 16 GiB quota, auth off),
// started and closed: with Member's logger, its log at warn level is
// empty; etcd's own logger says, for the same member, what Member's rules
// are about (a control: each rule still has a line to apply to).
func TestMemberStoreStartsAndClosesQuietly(t *testing.T) {
	dir := t.TempDir()
	// First: etcd says its quota warning once per process.
	quiet := runMember(t, filepath.Join(dir, "quiet"), true)
	if len(quiet) != 0 {
		t.Errorf("with Member's logger, a store's start and close logged at warn level or above:\n%s", strings.Join(quiet, "\n"))
	}
	loud := strings.Join(runMember(t, filepath.Join(dir, "stock"), false), "\n")
	for _, want := range []string{`"level":"error"`, "setting up serving from embedded etcd failed", "use of closed network connection",
		"not recommended for production", "exceeded recommended request limit", "simple token is not cryptographically signed"} {
		if !strings.Contains(loud, want) {
			t.Errorf("etcd's own logger no longer logs %q for a store's start and close: is its rule still needed?\n%s", want, loud)
		}
	}
}

// runMember starts a store-like member in dir, closes it, and returns
// what it logged at warn level and above.
func runMember(t *testing.T, dir string, member bool) []string {
	t.Helper()
	peer, _ := url.Parse("http://127.0.0.1:0")
	log := dir + ".log"
	ec := embed.NewConfig()
	ec.Name, ec.Dir = "store", dir
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = nil, nil
	ec.InitialCluster = "store=" + peer.String()
	ec.UnsafeNoFsync = true
	ec.MaxRequestBytes = 1 << 30
	ec.QuotaBackendBytes = 1 << 34
	ec.LogLevel = "warn"
	ec.LogOutputs = []string{log}
	if member {
		Member(ec, Store)
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		t.Fatal(err)
	case <-time.After(time.Minute):
		e.Close()
		t.Fatal("embedded etcd not ready within a minute")
	}
	// Closed as soon as it is ready, while its start-up tasks may still
	// run (the hardest case).
	e.Close()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct{ Level string }
		if l != "" && (json.Unmarshal([]byte(l), &e) != nil || e.Level != "info" && e.Level != "debug") {
			lines = append(lines, l)
		}
	}
	return lines
}
