package main

import (
	"testing"

	"github.com/google/pprof/profile"
)

// The watch's stacks are told apart from the writes' own: a promoted store
// method of the watchable store and the write's End are the write's; its
// notify, the watch stream's sends and the sync loops are the watch's.
func TestProfileSumsWatchServingApart(t *testing.T) {
	fn := map[string]*profile.Function{}
	loc := func(name string) *profile.Location {
		f, ok := fn[name]
		if !ok {
			f = &profile.Function{ID: uint64(len(fn) + 1), Name: name}
			fn[name] = f
		}
		return &profile.Location{Line: []profile.Line{{Function: f}}}
	}
	sample := func(ns int64, stack ...string) *profile.Sample {
		s := &profile.Sample{Value: []int64{ns / 1e7, ns}}
		for _, name := range stack {
			s.Location = append(s.Location, loc(name))
		}
		return s
	}
	const mvcc, v3rpc = "go.etcd.io/etcd/server/v3/storage/mvcc.", "go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc."
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			// The write's own work, through promoted store methods.
			sample(1e9, mvcc+"(*store).Put", mvcc+"(*watchableStore).Put", "go.etcd.io/etcd/server/v3/etcdserver/apply.(*applierV3backend).Put"),
			sample(2e9, mvcc+"(*storeTxnWrite).End", mvcc+"(*watchableStoreTxnWrite).End"),
			sample(3e8, mvcc+"(*watchableStore).Read"),
			// The watch's.
			sample(4e8, mvcc+"newWatcherBatch", mvcc+"(*watchableStore).notify", mvcc+"(*watchableStoreTxnWrite).End"),
			sample(5e8, "google.golang.org/grpc.(*serverStream).SendMsg", v3rpc+"(*serverWatchStream).sendLoop"),
			sample(6e8, mvcc+"(*watchableStore).syncWatchers", mvcc+"(*watchableStore).syncWatchersLoop"),
			sample(7e8, mvcc+"(*watcherGroup).chooseAll"),
			// The frames written.
			sample(8e8, "syscall.write", "google.golang.org/grpc/internal/transport.(*loopyWriter).run"),
			// The frames read: the puts' own.
			sample(1e8, "google.golang.org/grpc/internal/transport.(*http2Server).HandleStreams"),
			// Replication.
			sample(9e8, "go.etcd.io/raft/v3.(*raft).Step"),
			sample(2e8, "go.etcd.io/etcd/server/v3/etcdserver/api/rafthttp.(*streamWriter).run"),
		},
	}
	c, err := sumProfile(p)
	if err != nil {
		t.Fatal(err)
	}
	near := func(got, want float64) bool { return got > want-1e-9 && got < want+1e-9 }
	if !near(c.watch, 2.2) || !near(c.writer, 0.8) || !near(c.replication, 1.1) || !near(c.total, 7.5) || !near(c.serving(), 3.0) {
		t.Fatalf("watch %.2f (want 2.2), writer %.2f (want 0.8), replication %.2f (want 1.1), total %.2f (want 7.5), serving %.2f (want 3.0)", c.watch, c.writer, c.replication, c.total, c.serving())
	}
	if _, err := sumProfile(&profile.Profile{SampleType: []*profile.ValueType{{Type: "inuse_space", Unit: "bytes"}}}); err == nil {
		t.Fatal("a heap profile summed as a CPU profile")
	}
}
