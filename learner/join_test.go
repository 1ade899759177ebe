package learner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jonboulle/clockwork"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/understudy-kv/understudy/membership"
)

// fakeCluster is a member list and the answers to adds, in order.
type fakeCluster struct {
	members []*etcdserverpb.Member
	addErrs []error
	adds    int
	removed []uint64
}

var _ membership.Cluster = (*fakeCluster)(nil)

func (f *fakeCluster) MemberList(context.Context, ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	return &clientv3.MemberListResponse{Header: &etcdserverpb.ResponseHeader{ClusterId: 9}, Members: f.members}, nil
}

func (f *fakeCluster) MemberAddAsLearner(ctx context.Context, peerURLs []string) (*clientv3.MemberAddResponse, error) {
	f.adds++
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("fakeCluster: a member add without a deadline can wait forever")
	}
	if len(f.addErrs) > 0 {
		err := f.addErrs[0]
		f.addErrs = f.addErrs[1:]
		if err != nil {
			return nil, err
		}
	}
	m := &etcdserverpb.Member{ID: 100, PeerURLs: peerURLs, IsLearner: true}
	f.members = append(f.members, m)
	return &clientv3.MemberAddResponse{Member: m, Members: f.members}, nil
}

func (f *fakeCluster) MemberPromote(context.Context, uint64) (*clientv3.MemberPromoteResponse, error) {
	return nil, errors.New("fakeCluster: a join promotes nothing")
}

func (f *fakeCluster) MemberRemove(ctx context.Context, id uint64) (*clientv3.MemberRemoveResponse, error) {
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("fakeCluster: a member remove without a deadline can wait forever")
	}
	f.removed = append(f.removed, id)
	f.members = slices.DeleteFunc(f.members, func(m *etcdserverpb.Member) bool { return m.ID == id })
	return &clientv3.MemberRemoveResponse{}, nil
}

var testSelf = Self{Name: "r1", PeerURLs: []string{"http://p1"}, DataDir: "/data/r1", Join: []string{"http://v1:2379"}}

func voter() *etcdserverpb.Member {
	return &etcdserverpb.Member{ID: 1, Name: "v1", PeerURLs: []string{"http://v1:2380"}}
}

func TestJoinTakesOverAnEntryThatNeverStarted(t *testing.T) {
	f := &fakeCluster{members: []*etcdserverpb.Member{voter(), {ID: 7, PeerURLs: []string{"http://p1"}, IsLearner: true}}}
	j, err := Join(context.Background(), zaptest.NewLogger(t), clockwork.NewRealClock(), f, testSelf)
	if err != nil || j.ID != 7 || f.adds != 0 {
		t.Fatalf("Join = %+v, %v after %d adds; want member 7 taken over", j, err, f.adds)
	}
	if j.InitialCluster != "v1=http://v1:2380,r1=http://p1" {
		t.Fatalf("initial cluster %q", j.InitialCluster)
	}
}

func TestJoinPeerURLsOfAStartedMemberSayWhatToRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		mem  *etcdserverpb.Member
		says string
	}{
		{"this replica's", &etcdserverpb.Member{ID: 7, Name: "r1", PeerURLs: []string{"http://p1"}, IsLearner: true}, "`replica leave --endpoints http://v1:2379 r1`"},
		{"another learner's", &etcdserverpb.Member{ID: 7, Name: "r9", PeerURLs: []string{"http://p1"}, IsLearner: true}, "`replica leave --endpoints http://v1:2379 7`"},
		{"a voter's", &etcdserverpb.Member{ID: 7, Name: "v2", PeerURLs: []string{"http://p1"}}, "member remove 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCluster{members: []*etcdserverpb.Member{voter(), tc.mem}}
			_, err := Join(context.Background(), zaptest.NewLogger(t), clockwork.NewRealClock(), f, testSelf)
			if !errors.Is(err, ErrPeerURLsTaken) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "/data/r1") {
				t.Fatalf("err %v; want %v saying %q and the data dir", err, ErrPeerURLsTaken, tc.says)
			}
		})
	}
	// Some of the URLs only: etcd refuses the add; the error names who.
	self := testSelf
	self.PeerURLs = []string{"http://p1", "http://p2"}
	f := &fakeCluster{members: []*etcdserverpb.Member{voter(), {ID: 7, Name: "r9", PeerURLs: []string{"http://p2"}, IsLearner: true}},
		addErrs: []error{rpctypes.ErrPeerURLExist}}
	if _, err := Join(context.Background(), zaptest.NewLogger(t), clockwork.NewRealClock(), f, self); !errors.Is(err, ErrPeerURLsTaken) || !strings.Contains(err.Error(), `"r9"`) {
		t.Fatalf("err %v; want %v naming r9", err, ErrPeerURLsTaken)
	}
}

func TestJoinLearnerLimitNamesEntriesThatNeverStarted(t *testing.T) {
	f := &fakeCluster{members: []*etcdserverpb.Member{voter(), {ID: 0xab, PeerURLs: []string{"http://p9"}, IsLearner: true}},
		addErrs: []error{rpctypes.ErrTooManyLearners}}
	_, err := Join(context.Background(), zaptest.NewLogger(t), clockwork.NewRealClock(), f, testSelf)
	for _, want := range []string{"--max-learners", "ab at http://p9", "replica leave --endpoints http://v1:2379"} {
		if !errors.Is(err, ErrTooManyLearners) || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v does not say %q", err, want)
		}
	}
	f = &fakeCluster{members: []*etcdserverpb.Member{voter()}, addErrs: []error{rpctypes.ErrTooManyLearners}}
	if _, err := Join(context.Background(), zaptest.NewLogger(t), clockwork.NewRealClock(), f, testSelf); !errors.Is(err, ErrTooManyLearners) || strings.Contains(err.Error(), "never started") {
		t.Fatalf("err %v; want the limit alone", err)
	}
}

func TestJoinRetriesAnIDRemovedThisSecond(t *testing.T) {
	f := &fakeCluster{members: []*etcdserverpb.Member{voter()}, addErrs: []error{rpctypes.ErrMemberNotFound, nil}}
	j, err := Join(context.Background(), zaptest.NewLogger(t), clockwork.NewRealClock(), f, testSelf)
	if err != nil || j.ID != 100 || f.adds != 2 {
		t.Fatalf("Join = %+v, %v after %d adds; want the second add", j, err, f.adds)
	}
}

// A replica whose data was lost (a StatefulSet pod whose volume was deleted
// with it) finds its own learner entry; with --replace-own-learner it
// removes that entry and joins anew, and it never removes a voter or
// another replica's entry.
func TestJoinReplacesItsOwnLearnerOnlyWhenAsked(t *testing.T) {
	own := func() *etcdserverpb.Member {
		return &etcdserverpb.Member{ID: 7, Name: "r1", PeerURLs: []string{"http://p1"}, IsLearner: true}
	}
	self := testSelf
	self.ReplaceOwnLearner = true
	f := &fakeCluster{members: []*etcdserverpb.Member{voter(), own()}}
	j, err := Join(context.Background(), zaptest.NewLogger(t), clockwork.NewRealClock(), f, self)
	if err != nil || j.ID != 100 || !slices.Equal(f.removed, []uint64{7}) || f.adds != 1 {
		t.Fatalf("Join = %+v, %v, removed %x, %d adds; want 7 removed and a new learner added", j, err, f.removed, f.adds)
	}

	f = &fakeCluster{members: []*etcdserverpb.Member{voter(), own()}}
	_, err = Join(context.Background(), zaptest.NewLogger(t), clockwork.NewRealClock(), f, testSelf)
	if !errors.Is(err, ErrPeerURLsTaken) || !strings.Contains(err.Error(), "--replace-own-learner") || len(f.removed) != 0 {
		t.Fatalf("without the flag: err %v, removed %x; want refused, naming --replace-own-learner, nothing removed", err, f.removed)
	}

	for _, tc := range []struct {
		name string
		mem  *etcdserverpb.Member
	}{
		{"a voter under its name", &etcdserverpb.Member{ID: 7, Name: "r1", PeerURLs: []string{"http://p1"}}},
		{"another learner at its URLs", &etcdserverpb.Member{ID: 7, Name: "r9", PeerURLs: []string{"http://p1"}, IsLearner: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCluster{members: []*etcdserverpb.Member{voter(), tc.mem}}
			_, err := Join(context.Background(), zaptest.NewLogger(t), clockwork.NewRealClock(), f, self)
			if !errors.Is(err, ErrPeerURLsTaken) || len(f.removed) != 0 || f.adds != 0 {
				t.Fatalf("err %v, removed %x, %d adds; want refused and nothing changed", err, f.removed, f.adds)
			}
		})
	}
}

// raft drops a membership change proposed while another is pending (two
// replicas joining at once), and etcd waits for the dropped one until the
// request ends: the add has a deadline, and one that ran out is tried again.
func TestJoinRetriesAnAddThatTimedOut(t *testing.T) {
	for _, timedOut := range []error{context.DeadlineExceeded, rpctypes.ErrTimeout} {
		f := &fakeCluster{members: []*etcdserverpb.Member{voter()}, addErrs: []error{timedOut, nil}}
		j, err := Join(context.Background(), zaptest.NewLogger(t), clockwork.NewRealClock(), f, testSelf)
		if err != nil || j.ID != 100 || f.adds != 2 {
			t.Fatalf("%v, then added: Join = %+v, %v after %d adds; want the second add", timedOut, j, err, f.adds)
		}
	}
}

// An add that timed out may be applied after the next attempt listed the
// members: that attempt's add finds its URLs taken by nobody it listed,
// and the one after takes the entry over.
func TestJoinRetriesAnAddRefusedForAnEntryItDidNotList(t *testing.T) {
	f := &fakeCluster{members: []*etcdserverpb.Member{voter()}, addErrs: []error{rpctypes.ErrPeerURLExist, nil}}
	j, err := Join(context.Background(), zaptest.NewLogger(t), clockwork.NewRealClock(), f, testSelf)
	if err != nil || j.ID != 100 || f.adds != 2 {
		t.Fatalf("Join = %+v, %v after %d adds; want the second add", j, err, f.adds)
	}
}
