package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestMirrorCopiesLargeValues: values of 64 KiB — 24 of them more than the
// destination's 1.5 MiB request limit — are copied by the initial sync (a
// page of them), by the stream (a backlog of many revisions), and as one
// source revision of 20 of them (1.3 MiB, in parts): the mirror keeps every
// transaction below the destination's --max-request-bytes, where batching
// by count alone was refused ("request is too large") and retried forever.
// Broken on purpose (no byte budget), the mirror never catches up.
func TestMirrorCopiesLargeValues(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	val := func(i int) string { return fmt.Sprintf("%06d", i) + strings.Repeat("x", 64<<10) }
	ctx := context.Background()
	for i := range 60 { // the initial sync's page
		if _, err := p.s.Put(ctx, fmt.Sprintf("/big/sync/%03d", i), val(i)); err != nil {
			t.Fatal(err)
		}
	}
	p.start(t, "--prefix", "/big/", "--name", "big")
	p.waitCaughtUp(t, "big")
	for i := range 60 { // a stream backlog of 60 revisions
		if _, err := p.s.Put(ctx, fmt.Sprintf("/big/stream/%03d", i), val(i)); err != nil {
			t.Fatal(err)
		}
	}
	var ops []clientv3.Op // one revision of 20 values, 1.3 MiB
	for i := range 20 {
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("/big/txn/%03d", i), val(i)))
	}
	if _, err := p.s.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
	p.waitCaughtUp(t, "big")
	mustVerify(t, p, "--prefix", "/big/", "--name", "big")
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := p.d.Get(rctx, "/big/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 140 {
		t.Fatalf("destination holds %v keys under /big/ (%v), want 140", resp, err)
	}
}

// TestMirrorSendsWhatTheDestinationTakes: source and destination take
// requests of up to 8 MiB (--max-request-bytes), and the mirror is told so.
// A 3 MiB value, which its transaction carries twice (once in the
// ownership guard), is over clientv3's default send limit of 2 MiB and is
// copied all the same: the mirror's destination client sends up to what
// the destination takes. Broken on purpose (clientv3's default), the mirror
// stalls on "trying to send message larger than max".
func TestMirrorSendsWhatTheDestinationTakes(t *testing.T) {
	beside(t)
	limit := []string{"--max-request-bytes", fmt.Sprint(8 << 20)}
	p := startMirrorPairWith(t, 1, limit, limit)
	big, err := clientv3.New(clientv3.Config{Endpoints: p.src.Endpoints(), DialTimeout: 10 * time.Second, MaxCallSendMsgSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	value := strings.Repeat("x", 3<<20)
	if _, err := big.Put(ctx, "/huge/0", value); err != nil {
		t.Fatalf("put of 3 MiB at the source: %v", err)
	}
	proc := p.start(t, append([]string{"--prefix", "/huge/"}, limit...)...)
	p.waitCaughtUp(t, "default")
	mustVerify(t, p, "--prefix", "/huge/")
	resp, err := p.d.Get(ctx, "/huge/0")
	if err != nil || len(resp.Kvs) != 1 || len(resp.Kvs[0].Value) != len(value) {
		t.Fatalf("destination's /huge/0: %v, %v; want the 3 MiB value", resp, err)
	}
	if proc.Exited() {
		t.Fatalf("the mirror exited:\n%s", proc.Log())
	}
}
