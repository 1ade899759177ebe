package membership

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/conn"
	"github.com/understudy-kv/understudy/promotion"
)

// leaderVars is what etcd's /debug/vars holds for a leader (raft's
// Status.MarshalJSON), among other variables.
const leaderVars = `{"cmdline":["etcd"],"raft.status":{"id":"8e9e05c52164694d","term":3,"vote":"8e9e05c52164694d","commit":42,"lead":"8e9e05c52164694d","raftState":"StateLeader","applied":42,"progress":{"8e9e05c52164694d":{"match":42,"next":43,"state":"StateReplicate"},"a1":{"match":40,"next":41,"state":"StateProbe"}},"leadtransferee":"0"}}`

func TestParseRaftStatus(t *testing.T) {
	st, err := ParseRaftStatus([]byte(leaderVars), "test")
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader != 0x8e9e05c52164694d || st.Commit != 42 || st.Progress[0xa1].State != "StateProbe" || st.Progress[0xa1].Match != 40 {
		t.Fatalf("parsed %+v", st)
	}
	// The expvar alone, as a member reads its own.
	alone := leaderVars[strings.Index(leaderVars, `{"id"`) : len(leaderVars)-1]
	if st2, err := ParseRaftStatus([]byte(alone), "self"); err != nil || st2.Commit != 42 {
		t.Fatalf("expvar alone: %+v, %v", st2, err)
	}
	follower := strings.Replace(leaderVars, "StateLeader", "StateFollower", 1)
	if _, err := ParseRaftStatus([]byte(follower), "m2"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a follower's status: %v, want ErrNotLeader", err)
	}
	for _, bad := range []string{`{}`, `{"raft.status":{"id":"zz","raftState":"StateLeader"}}`, `not json`} {
		if _, err := ParseRaftStatus([]byte(bad), "x"); err == nil {
			t.Errorf("ParseRaftStatus(%q) accepted", bad)
		}
	}
}

func TestLeaderRaftStatusAndPeerAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/debug/vars":
			w.Write([]byte(leaderVars))
		case "/members":
			w.Header().Set("X-Etcd-Cluster-ID", "c1")
			w.Write([]byte("[]"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	st, err := LeaderRaftStatus(ctx, srv.Client(), srv.URL)
	if err != nil || st.Commit != 42 {
		t.Fatalf("LeaderRaftStatus: %+v, %v", st, err)
	}
	if err := PeerAnswers(ctx, srv.Client(), srv.URL, "c1"); err != nil {
		t.Fatalf("PeerAnswers of this cluster's member: %v", err)
	}
	if err := PeerAnswers(ctx, srv.Client(), srv.URL, "c2"); err == nil || !strings.Contains(err.Error(), `not "c2"`) {
		t.Fatalf("PeerAnswers for another cluster: %v", err)
	}
	srv.Close()
	if err := PeerAnswers(ctx, srv.Client(), srv.URL, "c1"); err == nil {
		t.Fatal("a closed peer URL answered")
	}
}

func TestFindAndBehind(t *testing.T) {
	sts := []*Member{{Name: "r1", ID: "a1"}, {Name: "m1", ID: "b2"}}
	if s, err := Find(sts, "A1"); err != nil || s.Name != "r1" {
		t.Fatalf("Find by ID: %v, %v", s, err)
	}
	if _, err := Find(sts, "r9"); !errors.Is(err, ErrNoMember) {
		t.Fatalf("Find of no member: %v", err)
	}
	if got := Behind(970, 1000); !strings.Contains(got, "30 entries behind, 97.0% of the log, enough for etcd's own check") {
		t.Fatalf("Behind(970, 1000) = %q", got)
	}
	if got := Behind(500, 1000); strings.Contains(got, "enough") {
		t.Fatalf("Behind(500, 1000) = %q", got)
	}
}

func TestRefusals(t *testing.T) {
	no, yes := false, true
	sts := []*Member{
		{Name: "m1", ID: "1", id: 1, Reachable: true, IsLeader: true},
		{Name: "r1", ID: "2", id: 2, IsLearner: true, Reachable: true, Promotable: &no, Why: "it is 500 entries behind"},
		{Name: "r2", ID: "3", id: 3, IsLearner: true, Error: "connection refused"},
		{Name: "r3", ID: "4", id: 4, IsLearner: true, Reachable: true, Promotable: &yes},
	}
	for target, want := range map[string]string{
		"m1": "is already a voter",
		"r1": "refusing r1 (2): it is 500 entries behind",
		"r2": "refusing r2 (3): it does not answer",
	} {
		// cli is nil: a refusal must come before any call.
		if _, err := Promote(context.Background(), nil, nil, nil, sts, target, false); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("promote %s: %v, want a refusal with %q", target, err, want)
		}
	}
	if _, err := Leave(context.Background(), nil, nil, sts, "m1"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "is a voter") {
		t.Errorf("leave of a voter: %v", err)
	}
}

func TestConnValidate(t *testing.T) {
	for _, c := range []struct {
		conn conn.Flags
		want string
	}{
		{conn.Flags{}, "--endpoints: give at least one"},
		{conn.Flags{Endpoints: []string{"127.0.0.1:2379"}}, `--endpoints "127.0.0.1:2379"`},
		{conn.Flags{Endpoints: []string{"http://a:1"}, Credentials: conn.Credentials{Cert: "c"}}, "--cert and --key"},
	} {
		if err := c.conn.Validate(""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.conn, err, c.want)
		}
	}
}

func TestWriteFailover(t *testing.T) {
	var b strings.Builder
	WriteFailover(&b, nil, time.Now())
	if b.Len() != 0 {
		t.Fatalf("no failover printed %q", b.String())
	}
	since := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	WriteFailover(&b, &promotion.Record{Dead: 0xa, DeadName: "m2", By: 0xb, ByName: "s1", Step: promotion.StepRemove, Since: since}, since.Add(90*time.Second))
	if want := "failover under way for 1m30s: m2 (a) replaced by s1 (b), step remove\n"; b.String() != want {
		t.Fatalf("printed %q, want %q", b.String(), want)
	}
}
