package mirror

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// checkpointEvent is a watch event of mirror name's checkpoint at rev.
func checkpointEvent(t *testing.T, name string, rev int64, c *Checkpoint) *clientv3.Event {
	t.Helper()
	ev := &clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(CheckpointKey(name)), ModRevision: rev}}
	if c != nil {
		v, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		ev.Type, ev.Kv.Value = mvccpb.PUT, v
	}
	return ev
}

// TestLinkChanged: a known mirror's progress changes no link; a mirror
// not known, another cluster or prefix, a delete, or a value that is not
// a checkpoint does (the feeders are read again).
func TestLinkChanged(t *testing.T) {
	known := map[string]link{"in": {name: "in", src: "Y", dst: "X", srcPrefix: "/in/", dstPrefix: "/a/in/"}}
	cp := func(src, sp, dp string) *Checkpoint {
		return &Checkpoint{SourceClusterID: src, SourcePrefix: sp, DestPrefix: dp, Revision: 42}
	}
	for _, c := range []struct {
		what string
		name string
		cp   *Checkpoint
		want bool
	}{
		{"a known mirror's progress", "in", cp("Y", "/in/", "/a/in/"), false},
		{"a known mirror with another destination prefix", "in", cp("Y", "/in/", "/a/"), true},
		{"a known mirror from another cluster", "in", cp("Z", "/in/", "/a/in/"), true},
		{"a mirror not known", "new", cp("Y", "/in/", "/a/in/"), true},
		{"a known mirror deleted", "in", nil, true},
		{"a mirror not known deleted", "gone", nil, false},
	} {
		if got := linkChanged(known, c.name, "X", (*mvccpb.Event)(checkpointEvent(t, c.name, 7, c.cp))); got != c.want {
			t.Errorf("%s: linkChanged = %v, want %v", c.what, got, c.want)
		}
	}
	garbage := &mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(CheckpointKey("in")), Value: []byte("{")}}
	if !linkChanged(known, "in", "X", garbage) {
		t.Errorf("a checkpoint that cannot be read: linkChanged = false, want true")
	}
}

// TestCheckpointName: only a mirror's checkpoint key names a mirror; its
// ownership records and leases do not.
func TestCheckpointName(t *testing.T) {
	for key, want := range map[string]string{
		CheckpointKey("in"):               "in",
		ownPrefix("in") + "/a/x":          "",
		ownPrefix("in") + "/a/checkpoint": "",
		leaseKeyPrefix("in") + "12":       "",
		"/a/checkpoint":                   "",
	} {
		if got, ok := checkpointName(key); got != want || ok != (want != "") {
			t.Errorf("checkpointName(%q) = %q, %v; want %q", key, got, ok, want)
		}
	}
}

// TestLinkFollower: what the follower's watch tells moves the revision
// through which the links are known; a change to them makes it stale until
// a read newer than everything told resets it; confirm answers at once
// when the follower is through, refuses when stale, and gives up at its
// timeout.
func TestLinkFollower(t *testing.T) {
	known := []link{{name: "in", src: "Y", dst: "X", srcPrefix: "/in/", dstPrefix: "/a/in/"}}
	requests := 0
	f := &linkFollower{moved: make(chan struct{}, 1), known: map[string]link{}, through: 10, request: func() error { requests++; return nil }}
	f.reset(known, 10)
	ctx := context.Background()
	clock := clockwork.NewRealClock()

	progress := clientv3.WatchResponse{Header: &pb.ResponseHeader{Revision: 15}}
	f.tell(progress, "X", "")
	if rev, ok := f.confirm(ctx, clock, 15, time.Millisecond, time.Minute); !ok || rev != 15 || requests != 0 {
		t.Fatalf("after progress to 15: confirm(15) = %d, %v with %d requests; want 15, true, none", rev, ok, requests)
	}
	own := &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(ownPrefix("in") + "/a/in/k"), ModRevision: 17}}
	progressOf := checkpointEvent(t, "in", 17, &Checkpoint{SourceClusterID: "Y", SourcePrefix: "/in/", DestPrefix: "/a/in/", Revision: 99})
	f.tell(clientv3.WatchResponse{Header: &pb.ResponseHeader{Revision: 17}, Events: []*clientv3.Event{own, progressOf}}, "X", "")
	if rev, ok := f.confirm(ctx, clock, 16, time.Millisecond, time.Minute); !ok || rev != 17 {
		t.Fatalf("after a feeder's key and progress at 17: confirm(16) = %d, %v; want 17, true", rev, ok)
	}
	if _, ok := f.confirm(ctx, clock, 18, time.Millisecond, 20*time.Millisecond); ok || requests == 0 {
		t.Fatalf("nothing told past 17: confirm(18) = true or asked for no progress (%d requests)", requests)
	}
	// Timed out: starved, the next checks read at once (a minute's
	// timeout would fail the test's own deadline) until a progress
	// notification comes.
	if _, ok := f.confirm(ctx, clock, 18, time.Millisecond, time.Minute); ok {
		t.Fatalf("starved: confirm(18) = true")
	}
	f.tell(clientv3.WatchResponse{Header: &pb.ResponseHeader{Revision: 18}}, "X", "")
	if rev, ok := f.confirm(ctx, clock, 18, time.Millisecond, time.Minute); !ok || rev != 18 {
		t.Fatalf("a progress notification at 18 after starving: confirm(18) = %d, %v; want 18, true", rev, ok)
	}

	newcomer := checkpointEvent(t, "new", 19, &Checkpoint{SourceClusterID: "Z", SourcePrefix: "/", DestPrefix: "/a/"})
	f.tell(clientv3.WatchResponse{Header: &pb.ResponseHeader{Revision: 19}, Events: []*clientv3.Event{newcomer}}, "X", "")
	if _, ok := f.confirm(ctx, clock, 18, time.Millisecond, time.Minute); ok {
		t.Fatalf("a new mirror's checkpoint at 19: confirm(18) = true, want false (read the links)")
	}
	f.reset(known, 18)
	if _, ok := f.confirm(ctx, clock, 18, time.Millisecond, time.Minute); ok {
		t.Fatalf("reset by a read at 18, older than the change at 19: confirm = true, want false")
	}
	f.reset(append(known, link{name: "new", src: "Z", dst: "X", srcPrefix: "/", dstPrefix: "/a/"}), 20)
	if rev, ok := f.confirm(ctx, clock, 20, time.Millisecond, time.Minute); !ok || rev != 20 {
		t.Fatalf("reset by a read at 20: confirm(20) = %d, %v; want 20, true", rev, ok)
	}
	f.tell(clientv3.WatchResponse{Header: &pb.ResponseHeader{Revision: 21}, Events: []*clientv3.Event{checkpointEvent(t, "in", 21, nil)}}, "X", "")
	if _, ok := f.confirm(ctx, clock, 21, time.Millisecond, time.Minute); ok {
		t.Fatalf("a known mirror's checkpoint deleted at 21: confirm = true, want false")
	}
}
