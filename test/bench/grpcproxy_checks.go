package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/test/harness"
)

// The grpc-proxy scenario's checks: what each front answers where etcd's
// issues say grpc-proxy differs from a voter. A check's row holds, in
// Figures, 1 for each front that answered as a voter does and 0 for each
// that did not; its Note says what each answered.
const (
	checkProgress = "check: a watch's RequestProgress is answered (etcd #19710)"
	checkFromKey  = "check: a serializable --from-key read after a put through the same front sees the put (etcd #22397)"
	checkAuth     = "check: with auth on, a serializable read of a key its user may not read is refused after another user read it (etcd #22065)"
)

// frontVoter is the reference of the checks: the cluster's one voter.
const frontVoter = "the voter"

// checkFronts are the fronts checked, the reference first.
var checkFronts = []string{frontVoter, frontProxy, frontCascaded}

// checkWait bounds the wait for a progress notification.
const checkWait = 3 * time.Second

// proxyChecks runs the checks on a cluster of their own: 1 primary with
// auth on (root; alice, who may read secret/; bob, who may read nothing),
// grpc-proxy in front of it, and a cascaded replica fed by a learner
// replica.
func proxyChecks(r *runner, p params) []Row {
	bins := harness.Binaries(r)
	c := harness.StartCluster(r, harness.ClusterConfig{N: 1})
	voter := c.WaitLeader(r, proxyLeaderWait)
	learner := harness.StartReplica(r, c, harness.ReplicaConfig{Name: "check-r1", Extra: p.replicaArgs})
	// Before auth is on: StartGRPCProxy waits for an anonymous read.
	_, proxyURL := harness.StartGRPCProxy(r, c.Endpoints())
	for _, args := range [][]string{
		{"user", "add", "root:rootpw"}, {"user", "grant-role", "root", "root"},
		{"role", "add", "reader"}, {"role", "grant-permission", "reader", "read", "secret/", "--prefix"},
		{"user", "add", "alice:alicepw"}, {"user", "grant-role", "alice", "reader"},
		{"user", "add", "bob:bobpw"}, {"put", "secret/x", "s3cr3t"}, {"auth", "enable"},
	} {
		harness.MustEtcdctl(r, bins, c.Endpoints(), args...)
	}
	cascaded := harness.StartReplica(r, c, harness.ReplicaConfig{Name: "check-c1", Upstream: []string{learner.ClientURL}, Extra: append([]string{"--user", "root:rootpw"}, p.replicaArgs...)})
	urls := map[string]string{frontVoter: voter.ClientURL, frontProxy: proxyURL, frontCascaded: cascaded.ClientURL}

	rows := []Row{{Name: checkProgress}, {Name: checkFromKey}, {Name: checkAuth}}
	notes := make([][]string, len(rows))
	for i := range rows {
		rows[i].Scenario, rows[i].Figures = grpcProxyID, map[string]float64{}
	}
	for n, front := range checkFronts {
		as := func(user string) *clientv3.Client { return userClient(r, urls[front], user) }
		for i, check := range []func() (bool, string){
			func() (bool, string) { return progressAnswered(as("alice")) },
			func() (bool, string) { return fromKeySeesPut(as("root"), fmt.Sprintf("fk/%d/", n)) },
			func() (bool, string) { return authRefuses(as("alice"), as("bob")) },
		} {
			ok, what := check()
			if ok {
				rows[i].Figures[front] = 1
			} else {
				rows[i].Figures[front] = 0
			}
			notes[i] = append(notes[i], front+": "+what)
			r.Logf("%-110s %s: %v (%s)", rows[i].Name, front, ok, what)
		}
	}
	for i := range rows {
		rows[i].Note = strings.Join(notes[i], "; ")
	}
	return rows
}

// userClient is a client of url as user (password user+"pw").
func userClient(r *runner, url, user string) *clientv3.Client {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), Username: user, Password: user + "pw"})
	if err != nil {
		r.Fatalf("client of %s as %s: %v", url, user, err)
	}
	r.Cleanup(func() { c.Close() })
	return c
}

// progressAnswered opens a watch through cli and asks for progress on its
// stream: a voter answers with a progress notification at once.
func progressAnswered(cli *clientv3.Client) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wch := cli.Watch(ctx, "secret/progress", clientv3.WithCreatedNotify())
	if resp, ok := <-wch; !ok || !resp.Created {
		return false, fmt.Sprintf("the watch was not created: %v", resp.Err())
	}
	if err := cli.RequestProgress(ctx); err != nil {
		return false, fmt.Sprintf("RequestProgress: %v", err)
	}
	select {
	case resp := <-wch:
		if resp.IsProgressNotify() {
			return true, fmt.Sprintf("a progress notification at revision %d", resp.Header.Revision)
		}
		return false, fmt.Sprintf("an answer that is no progress notification: %+v", resp)
	case <-time.After(checkWait):
		return false, fmt.Sprintf("no answer within %v", checkWait)
	}
}

// fromKeySeesPut reads from prefix to the end of the keyspace, serializable,
// through cli, puts a key after prefix through it, and reads again.
func fromKeySeesPut(cli *clientv3.Client, prefix string) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	get := func() (*clientv3.GetResponse, error) {
		return cli.Get(ctx, prefix, clientv3.WithFromKey(), clientv3.WithSerializable())
	}
	if _, err := cli.Put(ctx, prefix+"1", "a"); err != nil {
		return false, fmt.Sprintf("put: %v", err)
	}
	before, err := get()
	if err != nil {
		return false, fmt.Sprintf("read: %v", err)
	}
	put, err := cli.Put(ctx, prefix+"2", "b")
	if err != nil {
		return false, fmt.Sprintf("put: %v", err)
	}
	after, err := get()
	if err != nil {
		return false, fmt.Sprintf("read again: %v", err)
	}
	seen := false
	for _, kv := range after.Kvs {
		seen = seen || string(kv.Key) == prefix+"2"
	}
	return seen, fmt.Sprintf("%d keys at revision %d, then the put at revision %d, then %d keys at revision %d", before.Count, before.Header.Revision, put.Header.Revision, after.Count, after.Header.Revision)
}

// authRefuses has alice read secret/x, serializable, and then bob, who may
// not: a voter refuses bob.
func authRefuses(alice, bob *clientv3.Client) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := alice.Get(ctx, "secret/x", clientv3.WithSerializable()); err != nil {
		return false, fmt.Sprintf("alice's read: %v", err)
	}
	resp, err := bob.Get(ctx, "secret/x", clientv3.WithSerializable())
	switch {
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		return true, "bob refused: " + err.Error()
	case err != nil:
		return false, fmt.Sprintf("bob: %v", err)
	case resp.Count > 0:
		return false, fmt.Sprintf("bob read %q", resp.Kvs[0].Value)
	}
	return false, "bob read nothing, unrefused"
}
