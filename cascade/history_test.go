package cascade

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/server/v3/lease"
	betesting "go.etcd.io/etcd/server/v3/storage/backend/testing"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap/zaptest"
)

// A restored store's fingerprint is read from the store itself: the keys
// put last, newest first, each whole as it is at the store's revision —
// found across pages of the index, deletes left out.
func TestLocalFingerprintOnARealStore(t *testing.T) {
	be, _ := betesting.NewDefaultTmpBackend(t)
	s := mvcc.New(zaptest.NewLogger(t), be, &lease.FakeLessor{}, mvcc.StoreConfig{})
	t.Cleanup(func() { s.Close(); be.Close() })
	put := func(k, v string) { s.Put([]byte(k), []byte(v), lease.NoLease) }
	for i := range 25000 { // more than a page of the index
		put(fmt.Sprintf("k%05d", i), "old")
	}
	put("k00007", "newer")
	put("a", "newest-but-one")
	put("zz", "newest")
	s.DeleteRange([]byte("k24999"), nil)
	fp, err := localFingerprint(s)
	if err != nil {
		t.Fatal(err)
	}
	if fp.rev != s.Rev() || len(fp.kvs) != maxFingerprint {
		t.Fatalf("fingerprint at %d with %d keys, want at %d with %d", fp.rev, len(fp.kvs), s.Rev(), maxFingerprint)
	}
	want := []string{"zz=newest", "a=newest-but-one", "k00007=newer", "k24998=old", "k24997=old"}
	for i, w := range want {
		if got := string(fp.kvs[i].Key) + "=" + string(fp.kvs[i].Value); got != w {
			t.Errorf("fingerprint key %d: %s, want %s (newest puts first, with their values)", i, got, w)
		}
	}
	for _, kv := range fp.kvs {
		if string(kv.Key) == "k24999" {
			t.Errorf("a deleted key in the fingerprint")
		}
		if kv.ModRevision == 0 || kv.CreateRevision == 0 || kv.Version == 0 {
			t.Errorf("%q not whole: %+v", kv.Key, kv)
		}
	}
}

// The Applier's fingerprint after a revision: its puts first (the last
// event of a key wins), the keys it deleted out, the older ones after.
func TestFingerprintNext(t *testing.T) {
	kv := func(k string, rev int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte(k), ModRevision: rev, CreateRevision: rev, Version: 1}
	}
	fp := fingerprint{rev: 5, kvs: []*mvccpb.KeyValue{kv("a", 5), kv("b", 4), kv("c", 3)}}
	fp = fp.next(6, []*mvccpb.Event{
		{Type: mvccpb.PUT, Kv: kv("d", 6)},
		{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte("b"), ModRevision: 6}},
	})
	keys := func(fp fingerprint) (s string) {
		for _, kv := range fp.kvs {
			s += string(kv.Key)
		}
		return s
	}
	if fp.rev != 6 || keys(fp) != "dac" {
		t.Fatalf("after a put of d and a delete of b: rev %d, keys %q; want 6, \"dac\"", fp.rev, keys(fp))
	}
	// A delete-only revision keeps what was put before.
	fp = fp.next(7, []*mvccpb.Event{{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte("a"), ModRevision: 7}}})
	if keys(fp) != "dc" {
		t.Fatalf("after a delete of a: %q, want \"dc\"", keys(fp))
	}
	var evs []*mvccpb.Event
	for i := range 20 {
		evs = append(evs, &mvccpb.Event{Type: mvccpb.PUT, Kv: kv(fmt.Sprintf("n%02d", i), 8)})
	}
	if fp = fp.next(8, evs); len(fp.kvs) != maxFingerprint || string(fp.kvs[0].Key) != "n19" {
		t.Fatalf("after a revision of 20 puts: %d keys, first %q; want %d, n19", len(fp.kvs), fp.kvs[0].Key, maxFingerprint)
	}
}

// The front's calls enter the store until it is fenced: a call in it
// then sees its context end with the fence's reason, no call enters
// after, and Close's wait ends once the last call has left.
func TestEnterUntilTheFence(t *testing.T) {
	s := &Store{lg: zaptest.NewLogger(t), clock: clockwork.NewRealClock(), m: NewMetrics(nil)}
	s.fenceCtx, s.fenceCancel = context.WithCancelCause(context.Background())
	s.fenced = s.fenceCtx.Done()
	ctx, leave, err := s.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	why := &historyError{upstream: "http://u", how: "a test"}
	s.fence(why)
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), ErrOtherHistory) {
		t.Fatalf("the call's context ended with %v, want the fence's reason", context.Cause(ctx))
	}
	if _, _, err := s.Enter(context.Background()); !errors.Is(err, ErrOtherHistory) {
		t.Fatalf("a call entered a fenced store: %v", err)
	}
	waited := make(chan struct{})
	go func() { s.waitCalls(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Close's wait ended with a call still in the store")
	case <-time.After(50 * time.Millisecond): // a chance to end wrongly, not a synchronisation
	}
	leave()
	<-waited
}
