package learner

import (
	"context"
	"errors"
	"fmt"
	"github.com/jonboulle/clockwork"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.uber.org/zap/zaptest"
)

// etcd's refusal while a voter has not applied the latest add (what
// embed.StartEtcd returns for it).
var errCountUnequal = errors.New("error validating peerURLs {ClusterID:1 Members:[...]}: member count is unequal")

// The refusals MembersNotAgreed knows are etcd's own, as its
// ValidateClusterAndAssignIDs words them: a member list with another count,
// and one with as many members at other peer URLs (one replica left, another
// joined).
func TestMembersNotAgreedKnowsEtcdsRefusals(t *testing.T) {
	lg := zaptest.NewLogger(t)
	cluster := func(initial string) *membership.RaftCluster {
		t.Helper()
		urls, err := types.NewURLsMap(initial)
		if err != nil {
			t.Fatal(err)
		}
		c, err := membership.NewClusterFromURLsMap(lg, "token", urls)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	local := "v1=http://127.0.0.1:2380,r1=http://127.0.0.1:2480,r2=http://127.0.0.1:2580"
	for name, existing := range map[string]string{
		"an add not applied": "v1=http://127.0.0.1:2380,r1=http://127.0.0.1:2480",
		"a leave and a join": "v1=http://127.0.0.1:2380,r1=http://127.0.0.1:2480,r3=http://127.0.0.1:2680",
	} {
		err := membership.ValidateClusterAndAssignIDs(lg, cluster(local), cluster(existing))
		if !MembersNotAgreed(err) {
			t.Errorf("%s: etcd says %v, which MembersNotAgreed does not know", name, err)
		}
	}
	if err := membership.ValidateClusterAndAssignIDs(lg, cluster(local), cluster(local)); err != nil || MembersNotAgreed(errors.New("listen tcp: address already in use")) {
		t.Errorf("agreeing lists: %v; or another error taken for a refusal", err)
	}
}

// A start that a voter's stale member list refused is made again, with the
// member list read anew: a replica added right after this one is in it.
func TestStartAgainWhileVotersHaveNotAppliedTheAdd(t *testing.T) {
	self := &etcdserverpb.Member{ID: 100, PeerURLs: []string{"http://p1"}, IsLearner: true}
	f := &fakeCluster{members: []*etcdserverpb.Member{voter(), self}}
	j := Joined{ID: 100, InitialCluster: initialCluster(f.members, 100, "r1"), Added: true}
	// Another replica is added while this one starts.
	f.members = append(f.members, &etcdserverpb.Member{ID: 200, PeerURLs: []string{"http://p2"}, IsLearner: true})
	var tried []string
	got, err := Start(context.Background(), zaptest.NewLogger(t), clockwork.NewRealClock(), f, j, "r1", func(ic string) (string, error) {
		tried = append(tried, ic)
		if len(tried) < 3 {
			return "", errCountUnequal
		}
		return "started", nil
	})
	if err != nil || got != "started" {
		t.Fatalf("Start = %q, %v; want started", got, err)
	}
	if len(tried) != 3 || tried[0] != "v1=http://v1:2380,r1=http://p1" || tried[2] != "v1=http://v1:2380,r1=http://p1,c8=http://p2" {
		t.Fatalf("initial clusters tried: %q; want the join's, then the member list's with the replica added since", tried)
	}
}

// Any other failure is returned at once, and so is the refusal once ctx
// ends, saying what never agreed.
func TestStartGivesUp(t *testing.T) {
	f := &fakeCluster{members: []*etcdserverpb.Member{voter(), {ID: 100, PeerURLs: []string{"http://p1"}, IsLearner: true}}}
	j := Joined{ID: 100, InitialCluster: initialCluster(f.members, 100, "r1")}
	other := errors.New("listen tcp: address already in use")
	tries := 0
	_, err := Start(context.Background(), zaptest.NewLogger(t), clockwork.NewRealClock(), f, j, "r1", func(string) (int, error) { tries++; return 0, other })
	if !errors.Is(err, other) || tries != 1 {
		t.Fatalf("Start = %v after %d tries; want %v after 1", err, tries, other)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	_, err = Start(ctx, zaptest.NewLogger(t), clockwork.NewRealClock(), f, j, "r1", func(string) (int, error) { return 0, errCountUnequal })
	if !MembersNotAgreed(err) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "never agreed") {
		t.Fatalf("Start = %v; want etcd's refusal, the deadline and what never agreed", err)
	}
	// The learner's entry removed meanwhile: no start again.
	f.members = f.members[:1]
	tries = 0
	_, err = Start(context.Background(), zaptest.NewLogger(t), clockwork.NewRealClock(), f, j, "r1", func(string) (int, error) { tries++; return 0, errCountUnequal })
	if err == nil || tries != 1 || !strings.Contains(err.Error(), "no longer listed") {
		t.Fatalf("Start = %v after %d tries; want the entry gone after 1", err, tries)
	}
}

// etcd's refusal when no member answered on its peer URL (bootstrap's
// words): with TLS, a voter refuses a new pod whose name does not resolve
// yet. The start is made again until one answers, and once ctx ends the
// error says what to check.
func TestStartAgainWhileNoPeerAnswers(t *testing.T) {
	unanswered := fmt.Errorf("cannot fetch cluster info from peer urls: %w", errors.New("could not retrieve cluster information from the given URLs"))
	if !PeersUnanswered(unanswered) || PeersUnanswered(errCountUnequal) || MembersNotAgreed(unanswered) {
		t.Fatalf("PeersUnanswered does not tell etcd's refusal from the others")
	}
	f := &fakeCluster{members: []*etcdserverpb.Member{voter(), {ID: 100, PeerURLs: []string{"http://p1"}, IsLearner: true}}}
	j := Joined{ID: 100, InitialCluster: initialCluster(f.members, 100, "r1")}
	tries := 0
	got, err := Start(context.Background(), zaptest.NewLogger(t), clockwork.NewRealClock(), f, j, "r1", func(string) (string, error) {
		if tries++; tries < 3 {
			return "", unanswered
		}
		return "started", nil
	})
	if err != nil || got != "started" || tries != 3 {
		t.Fatalf("Start = %q, %v after %d tries; want started after 3", got, err, tries)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	_, err = Start(ctx, zaptest.NewLogger(t), clockwork.NewRealClock(), f, j, "r1", func(string) (int, error) { return 0, unanswered })
	if !PeersUnanswered(err) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "ever answered") || !strings.Contains(err.Error(), j.InitialCluster) {
		t.Fatalf("Start = %v; want etcd's refusal, the deadline and what to check", err)
	}
}
