package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/test/harness"
)

// A cascaded replica of a cluster with auth on, and one fed by it,
// enforce the source's auth as a voter does: a reader reads what its role permits and nothing else
// (ranges, read-only txns, watches, admin calls), its writes are the
// source's to refuse, an anonymous caller is refused; and a change of
// permissions or a deleted user takes effect on it within the stated
// bound (about 2 s: the replica asks every second), while a
// client that keeps its connection goes on working through a change. A
// cascaded replica without a root user is refused with a clear error.
func TestCascadedReplicaEnforcesAuth(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	v := c.Endpoints()
	for _, args := range authSetup {
		harness.MustEtcdctl(t, bins, v, args...)
	}

	t.Run("no-root-user", func(t *testing.T) {
		bad := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "c-anon", Upstream: []string{r.ClientURL}, NoWait: true,
			Extra: []string{"--join-timeout", "20s", "--user", "alice:alicepw"}})
		mustContain(t, exitsWithin(t, bad, 30*time.Second), "auth enabled", "--user", "root role")
	})

	cc := cascaded(t, c, "c1", []string{r.ClientURL}, "--user", "root:rootpw")
	as := func(args ...string) (string, error) {
		return harness.Etcdctl(t, bins, []string{cc.ClientURL}, append([]string{"--user", "alice:alicepw"}, args...)...)
	}
	// A reader fed by the cascaded replica (depth 2) enforces it too.
	deep := cascaded(t, c, "c2", []string{cc.ClientURL}, "--user", "root:rootpw")
	if out, err := harness.Etcdctl(t, bins, []string{deep.ClientURL}, "--user", "alice:alicepw", "get", "pub/a", "--print-value-only"); err != nil || out != "1\n" {
		t.Errorf("alice's permitted read at depth 2: %q %v", out, err)
	}
	if _, err := harness.Etcdctl(t, bins, []string{deep.ClientURL}, "--user", "alice:alicepw", "get", "secret/a"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("alice's read of secret/a at depth 2: %v, want permission denied", err)
	}
	denied := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("alice's %s on the cascaded replica: %v, want permission denied", what, err)
		}
	}
	for _, consistency := range []string{"l", "s"} {
		if out, err := as("get", "pub/a", "--print-value-only", "--consistency="+consistency); err != nil || out != "1\n" {
			t.Errorf("alice's permitted read (consistency %s): %q %v", consistency, out, err)
		}
		_, err := as("get", "secret/a", "--consistency="+consistency)
		denied("read of secret/a (consistency "+consistency+")", err)
	}
	_, err := as("put", "pub/a", "x")
	denied("put", err)
	_, err = as("snapshot", "save", t.TempDir()+"/snap.db")
	denied("snapshot", err)
	if _, err := as("endpoint", "status"); err != nil {
		t.Errorf("alice's endpoint status: %v", err)
	}
	if _, err := harness.Etcdctl(t, bins, []string{cc.ClientURL}, "get", "pub/a"); err == nil || !strings.Contains(err.Error(), "user name is empty") {
		t.Errorf("anonymous read on the cascaded replica: %v, want user name is empty", err)
	}

	alice := authClient(t, cc.ClientURL, "alice", "alicepw")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := alice.Txn(ctx).Then(clientv3.OpGet("pub/a"), clientv3.OpGet("secret/a")).Commit(); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("alice's read-only txn over secret/a: %v, want permission denied", err)
	}
	if resp, err := alice.Txn(ctx).Then(clientv3.OpGet("pub/a")).Commit(); err != nil || string(resp.Responses[0].GetResponseRange().Kvs[0].Value) != "1" {
		t.Errorf("alice's read-only txn over pub/a: %v %v", resp, err)
	}
	wresp := <-alice.Watch(ctx, "secret/", clientv3.WithPrefix())
	if !wresp.Canceled || !strings.Contains(wresp.Err().Error(), "permission denied") {
		t.Errorf("alice's watch on secret/: %+v, want canceled, permission denied", wresp)
	}
	pub := alice.Watch(ctx, "pub/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	if w := <-pub; !w.Created || w.Canceled {
		t.Fatalf("alice's watch on pub/: %+v", w)
	}
	harness.MustEtcdctl(t, bins, v, "--user", "root:rootpw", "put", "pub/b", "2")
	if w := <-pub; len(w.Events) != 1 || string(w.Events[0].Kv.Key) != "pub/b" {
		t.Errorf("alice's watch on pub/: %+v, want the put of pub/b", w)
	}

	// A permission granted on the voters takes effect on the cascaded
	// replica within the bound, for a client that stays connected too
	// (its token is refused once, and it authenticates again).
	changed := time.Now()
	harness.MustEtcdctl(t, bins, v, "--user", "root:rootpw", "role", "grant-permission", "reader", "read", "secret/", "--prefix")
	harness.WaitFor(t, 10*time.Second, "alice reads secret/a through the cascaded replica", func() (bool, error) {
		_, err := alice.Get(ctx, "secret/a")
		return err == nil, err
	})
	t.Logf("a granted permission took effect on the cascaded replica in %v", time.Since(changed).Round(time.Millisecond))

	// A revoked one too, for serializable reads and watches.
	changed = time.Now()
	harness.MustEtcdctl(t, bins, v, "--user", "root:rootpw", "role", "revoke-permission", "reader", "secret/", "--prefix")
	harness.WaitFor(t, 10*time.Second, "alice's serializable read of secret/a is denied", func() (bool, error) {
		_, err := alice.Get(ctx, "secret/a", clientv3.WithSerializable())
		return errors.Is(err, rpctypes.ErrPermissionDenied), err
	})
	t.Logf("a revoked permission took effect on the cascaded replica in %v", time.Since(changed).Round(time.Millisecond))
	if w := <-alice.Watch(ctx, "secret/", clientv3.WithPrefix()); !w.Canceled {
		t.Errorf("alice's watch on secret/ after the revoke: %+v, want canceled", w)
	}

	// A deleted user is refused: her token is no longer honoured, and
	// authenticating again fails upstream.
	harness.MustEtcdctl(t, bins, v, "--user", "root:rootpw", "user", "delete", "alice")
	harness.WaitFor(t, 10*time.Second, "the deleted alice is refused", func() (bool, error) {
		_, err := alice.Get(ctx, "pub/a", clientv3.WithSerializable())
		return err != nil, nil
	})
	if _, err := as("get", "pub/a", "--consistency=s"); err == nil {
		t.Errorf("a deleted user read through the cascaded replica")
	}
}

// A learner replica answers AuthStatus itself, in the read mode asked
// (strong by default, bounded with understudy-max-staleness): the
// cascaded replicas below it ask every period, and the leader pays no
// raft entry for it.
func TestReplicaAnswersAuthStatus(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	rep := client(t, r.ClientURL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before, err := rep.AuthStatus(ctx)
	if err != nil || before.Enabled {
		t.Fatalf("auth status before: %+v %v", before, err)
	}
	for _, args := range authSetup {
		harness.MustEtcdctl(t, bins, c.Endpoints(), args...)
	}
	after, err := rep.AuthStatus(ctx)
	if err != nil || !after.Enabled || after.AuthRevision <= before.AuthRevision {
		t.Fatalf("a strong auth status right after auth enable: %+v %v (before: revision %d)", after, err, before.AuthRevision)
	}
	voter, err := client(t, c.Endpoints()[0]).AuthStatus(ctx)
	if err != nil || voter.AuthRevision != after.AuthRevision {
		t.Errorf("the voter's auth revision %v (%v), the replica's %d", voter, err, after.AuthRevision)
	}
	// 20 calls, strong and bounded, commit no raft entry (etcd's own
	// AuthStatus proposes one each).
	committed := func() float64 {
		return harness.MustScrape(t, c.Endpoints()[0]+"/metrics").Sum("etcd_server_proposals_committed_total")
	}
	c0 := committed()
	bctx := metadata.AppendToOutgoingContext(ctx, "understudy-max-staleness", "1s")
	for i := range 20 {
		cx := ctx
		if i%2 == 1 {
			cx = bctx
		}
		if b, err := rep.AuthStatus(cx); err != nil || b.AuthRevision != after.AuthRevision {
			t.Fatalf("auth status %d: %+v %v", i, b, err)
		}
	}
	if d := committed() - c0; d >= 20 {
		t.Errorf("20 auth status calls on the replica committed %v raft entries", d)
	}
}

// A cascaded replica of a TLS cluster with --client-cert-auth and auth on,
// whose own certificate's CN is root: a caller without a token (its own
// certificate names a user with no role) reads nothing and writes
// nothing through it — a forwarded call never runs as the replica's
// certificate — while root with a token writes through it.
func TestCascadedReplicaNeverForwardsAsItsCertificate(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	certs := harness.NewCerts(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1, TLS: certs})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	enableAuth(t, bins, c)
	cc := cascaded(t, c, "c1", []string{r.ClientURL})
	cert, key := harness.ClientCert(t, certs, "nobody")
	tc, err := transport.TLSInfo{CertFile: cert, KeyFile: key, TrustedCAFile: certs.CA}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	nobody, err := clientv3.New(clientv3.Config{Endpoints: []string{cc.ClientURL}, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nobody.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := nobody.Put(ctx, "forged", "1"); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("an untokened put by a user with no role, through the cascaded replica: %v, want user name is empty", err)
	}
	if _, err := nobody.Get(ctx, "forged"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("a read by a user with no role: %v, want permission denied", err)
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{cc.ClientURL}, TLS: certs.ClientConfig(), Username: "root", Password: "rootpw",
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	if _, err := root.Put(ctx, "by-root", "1"); err != nil {
		t.Errorf("root's put with a token through the cascaded replica: %v", err)
	}
	resp, err := tlsClient(t, c, c.Endpoints()[0]).Get(ctx, "forged")
	if err != nil || len(resp.Kvs) != 0 {
		t.Errorf("the source holds %v (%v): the forged put went through", resp, err)
	}
}

// A watch opened through a cascaded replica right after an auth change that
// does not touch its user sees the next put, as at a voter, five rounds of
// a quiet spell (the replica's copy of the source's auth not confirmed
// lately), an unrelated change on the voters, and a new client of alice's
// that authenticates through the replica and watches at once.
func TestCascadedReplicaWatchesRightAfterAnAuthChange(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	v := c.Endpoints()
	for _, args := range authSetup {
		harness.MustEtcdctl(t, bins, v, args...)
	}
	cc := cascaded(t, c, "c1", []string{r.ClientURL}, "--user", "root:rootpw")
	root := authClient(t, v[0], "root", "rootpw")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seen := 0
	for i := range 5 {
		// The scenario's quiet spell: nobody calls the replica for longer
		// than its copy counts as confirmed (2 s); not a synchronisation.
		time.Sleep(3 * time.Second)
		harness.MustEtcdctl(t, bins, v, "--user", "root:rootpw", "role", "add", fmt.Sprintf("unrelated-%d", i))
		alice := authClient(t, cc.ClientURL, "alice", "alicepw")
		key := fmt.Sprintf("pub/round-%d", i)
		wch := alice.Watch(ctx, key, clientv3.WithCreatedNotify())
		created := <-wch
		if created.Err() != nil || !created.Created {
			t.Errorf("round %d: alice's watch right after an auth change: %+v (%v)", i, created, created.Err())
			continue
		}
		if _, err := root.Put(ctx, key, "v"); err != nil {
			t.Fatal(err)
		}
		select {
		case w := <-wch:
			if w.Err() != nil || len(w.Events) != 1 {
				t.Errorf("round %d: alice's watch: %+v (%v), want the put of %s", i, w, w.Err(), key)
				continue
			}
			seen++
		case <-time.After(10 * time.Second):
			t.Errorf("round %d: alice's watch saw no put of %s within 10 s", i, key)
		}
		alice.Close()
	}
	t.Logf("%d of 5 watches saw their put", seen)
}

// A password changed on the voters ends, at a cascaded replica two tiers
// down, the tokens issued before it, as on a voter: three rounds of alice
// reading through c2 (fed by c1, fed by a learner replica), her password
// changed on the voters, and her client, which keeps its token, refused
// within the bound (about 3 s) and from then on. Each tier's copy of the
// source's auth moves on its own second: c2 may learn the change before c1
// does, and must not then take c1's word for a token c1 has not checked
// against the change.
func TestCascadedReplicaAtDepthTwoEndsTokensAtAPasswordChange(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	v := c.Endpoints()
	for _, args := range authSetup {
		harness.MustEtcdctl(t, bins, v, args...)
	}
	c1 := cascaded(t, c, "c1", []string{r.ClientURL}, "--user", "root:rootpw")
	c2 := cascaded(t, c, "c2", []string{c1.ClientURL}, "--user", "root:rootpw")
	root := authClient(t, v[0], "root", "rootpw")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	password := "alicepw"
	for i := range 3 {
		alice := authClient(t, c2.ClientURL, "alice", password)
		if _, err := alice.Get(ctx, "pub/a"); err != nil {
			t.Fatalf("round %d: alice's read through c2: %v", i, err)
		}
		password = fmt.Sprintf("alicepw-%d", i)
		if _, err := root.UserChangePassword(ctx, "alice", password); err != nil {
			t.Fatal(err)
		}
		changed := time.Now()
		harness.WaitFor(t, 10*time.Second, "alice's old token refused through c2", func() (bool, error) {
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			defer rcancel()
			_, err := alice.Get(rctx, "pub/a", clientv3.WithSerializable())
			return err != nil, nil
		})
		t.Logf("round %d: refused %v after the change", i, time.Since(changed).Round(time.Millisecond))
		for range 5 {
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := alice.Get(rctx, "pub/a", clientv3.WithSerializable())
			rcancel()
			if err == nil {
				t.Fatalf("round %d: alice's client, with the password changed, read through c2 again", i)
			}
		}
		alice.Close()
	}
}

// A cascaded replica of a cluster with auth off, quiet for longer than its
// copy of the source's auth counts as confirmed, refuses an anonymous
// caller right after the source turns auth on: the copy that said auth was
// off is confirmed before it permits anything (it was not: the first calls
// after a quiet spell were served to anyone until the next refresh).
func TestCascadedReplicaRefusesAnonymousCallsOnceAuthIsOn(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	v := c.Endpoints()
	for _, args := range authSetup[:len(authSetup)-1] { // all but auth enable
		harness.MustEtcdctl(t, bins, v, args...)
	}
	cc := cascaded(t, c, "c1", []string{r.ClientURL}, "--user", "root:rootpw")
	if out, err := harness.Etcdctl(t, bins, []string{cc.ClientURL}, "get", "secret/a", "--print-value-only"); err != nil || out != "2\n" {
		t.Fatalf("an anonymous read with auth off: %q %v", out, err)
	}
	// The scenario's quiet spell: nobody calls the replica for longer than
	// its copy counts as confirmed (2 s); not a synchronisation.
	time.Sleep(3 * time.Second)
	harness.MustEtcdctl(t, bins, v, "auth", "enable")
	for _, consistency := range []string{"s", "l"} {
		out, err := harness.Etcdctl(t, bins, []string{cc.ClientURL}, "get", "secret/a", "--print-value-only", "--consistency="+consistency)
		if err == nil || !strings.Contains(err.Error(), "user name is empty") {
			t.Errorf("an anonymous read (consistency %s) right after auth was turned on: %q %v, want user name is empty", consistency, out, err)
		}
	}
	if out, err := harness.Etcdctl(t, bins, []string{cc.ClientURL}, "--user", "alice:alicepw", "get", "pub/a", "--print-value-only"); err != nil || out != "1\n" {
		t.Errorf("alice's permitted read once auth is on: %q %v", out, err)
	}
}
