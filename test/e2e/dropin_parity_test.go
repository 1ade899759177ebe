package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/understudy-kv/understudy/test/harness"
)

// rpcCase is one call of etcd's v3 API (for streams: open, send, first
// answer); it returns the call's error.
type rpcCase struct {
	name string
	// rootToo: also as root. Cases that would change what the other cases
	// stand on (auth disable) run only for users that are refused.
	rootToo bool
	call    func(ctx context.Context, c *grpc.ClientConn) error
}

func rpcCases(voterPeerURL string) []rpcCase {
	kv := func(c *grpc.ClientConn) pb.KVClient { return pb.NewKVClient(c) }
	lease := func(c *grpc.ClientConn) pb.LeaseClient { return pb.NewLeaseClient(c) }
	cl := func(c *grpc.ClientConn) pb.ClusterClient { return pb.NewClusterClient(c) }
	mt := func(c *grpc.ClientConn) pb.MaintenanceClient { return pb.NewMaintenanceClient(c) }
	au := func(c *grpc.ClientConn) pb.AuthClient { return pb.NewAuthClient(c) }
	unary := func(name string, f func(context.Context, *grpc.ClientConn) (any, error)) rpcCase {
		return rpcCase{name: name, rootToo: true, call: func(ctx context.Context, c *grpc.ClientConn) error { _, err := f(ctx, c); return err }}
	}
	const noLease, noMember = 0x7fff0001, 0x7fff0002
	return []rpcCase{
		unary("KV.Range", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return kv(c).Range(ctx, &pb.RangeRequest{Key: []byte("pub/a")})
		}),
		unary("KV.Range serializable", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return kv(c).Range(ctx, &pb.RangeRequest{Key: []byte("pub/a"), Serializable: true})
		}),
		unary("KV.Range forbidden key", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return kv(c).Range(ctx, &pb.RangeRequest{Key: []byte("secret/a")})
		}),
		{name: "KV.RangeStream", rootToo: true, call: func(ctx context.Context, c *grpc.ClientConn) error {
			s, err := kv(c).RangeStream(ctx, &pb.RangeRequest{Key: []byte("pub/"), RangeEnd: []byte("pub0")})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}},
		unary("KV.Put", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return kv(c).Put(ctx, &pb.PutRequest{Key: []byte("pub/x"), Value: []byte("1")})
		}),
		unary("KV.DeleteRange", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return kv(c).DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("pub/none")})
		}),
		unary("KV.Txn read-only", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return kv(c).Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("pub/a")}}}}})
		}),
		unary("KV.Txn write", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return kv(c).Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("pub/y"), Value: []byte("1")}}}}})
		}),
		unary("KV.Compact future", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return kv(c).Compact(ctx, &pb.CompactionRequest{Revision: 1 << 40})
		}),
		{name: "Watch.Watch", rootToo: true, call: func(ctx context.Context, c *grpc.ClientConn) error {
			return firstWatch(ctx, c, "pub/a")
		}},
		{name: "Watch.Watch forbidden key", rootToo: true, call: func(ctx context.Context, c *grpc.ClientConn) error {
			return firstWatch(ctx, c, "secret/a")
		}},
		unary("Lease.LeaseGrant", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return lease(c).LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 5})
		}),
		unary("Lease.LeaseRevoke", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return lease(c).LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: noLease})
		}),
		unary("Lease.LeaseTimeToLive", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return lease(c).LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: noLease})
		}),
		unary("Lease.LeaseLeases", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return lease(c).LeaseLeases(ctx, &pb.LeaseLeasesRequest{})
		}),
		{name: "Lease.LeaseKeepAlive", rootToo: true, call: func(ctx context.Context, c *grpc.ClientConn) error {
			s, err := lease(c).LeaseKeepAlive(ctx)
			if err == nil {
				err = s.Send(&pb.LeaseKeepAliveRequest{ID: noLease})
			}
			if err == nil {
				var r *pb.LeaseKeepAliveResponse
				if r, err = s.Recv(); err == nil && r.TTL > 0 {
					err = fmt.Errorf("TTL %d for a lease that does not exist", r.TTL)
				}
			}
			return err
		}},
		unary("Cluster.MemberList", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return cl(c).MemberList(ctx, &pb.MemberListRequest{Linearizable: true})
		}),
		unary("Cluster.MemberAdd existing URL", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return cl(c).MemberAdd(ctx, &pb.MemberAddRequest{PeerURLs: []string{voterPeerURL}, IsLearner: true})
		}),
		unary("Cluster.MemberRemove", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return cl(c).MemberRemove(ctx, &pb.MemberRemoveRequest{ID: noMember})
		}),
		unary("Cluster.MemberUpdate", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return cl(c).MemberUpdate(ctx, &pb.MemberUpdateRequest{ID: noMember, PeerURLs: []string{"http://127.0.0.1:1"}})
		}),
		unary("Cluster.MemberPromote", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return cl(c).MemberPromote(ctx, &pb.MemberPromoteRequest{ID: noMember})
		}),
		unary("Maintenance.Alarm", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return mt(c).Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
		}),
		unary("Maintenance.Status", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return mt(c).Status(ctx, &pb.StatusRequest{})
		}),
		unary("Maintenance.Defragment", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return mt(c).Defragment(ctx, &pb.DefragmentRequest{})
		}),
		unary("Maintenance.Hash", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return mt(c).Hash(ctx, &pb.HashRequest{})
		}),
		unary("Maintenance.HashKV", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return mt(c).HashKV(ctx, &pb.HashKVRequest{})
		}),
		{name: "Maintenance.Snapshot", rootToo: true, call: func(ctx context.Context, c *grpc.ClientConn) error {
			s, err := mt(c).Snapshot(ctx, &pb.SnapshotRequest{})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		}},
		unary("Maintenance.MoveLeader", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return mt(c).MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: noMember})
		}),
		unary("Maintenance.Downgrade cancel", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return mt(c).Downgrade(ctx, &pb.DowngradeRequest{Action: pb.DowngradeRequest_CANCEL})
		}),
		unary("Auth.AuthEnable", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return au(c).AuthEnable(ctx, &pb.AuthEnableRequest{})
		}),
		{name: "Auth.AuthDisable", call: func(ctx context.Context, c *grpc.ClientConn) error {
			_, err := au(c).AuthDisable(ctx, &pb.AuthDisableRequest{})
			return err
		}},
		unary("Auth.AuthStatus", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return au(c).AuthStatus(ctx, &pb.AuthStatusRequest{})
		}),
		unary("Auth.Authenticate wrong password", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return au(c).Authenticate(ctx, &pb.AuthenticateRequest{Name: "alice", Password: "wrong"})
		}),
		unary("Auth.UserAdd existing", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return au(c).UserAdd(ctx, &pb.AuthUserAddRequest{Name: "alice", Password: "x"})
		}),
		unary("Auth.UserGet", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return au(c).UserGet(ctx, &pb.AuthUserGetRequest{Name: "alice"})
		}),
		unary("Auth.UserList", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return au(c).UserList(ctx, &pb.AuthUserListRequest{})
		}),
		unary("Auth.UserDelete", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return au(c).UserDelete(ctx, &pb.AuthUserDeleteRequest{Name: "nobody"})
		}),
		unary("Auth.UserChangePassword", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return au(c).UserChangePassword(ctx, &pb.AuthUserChangePasswordRequest{Name: "nobody", Password: "x"})
		}),
		unary("Auth.UserGrantRole", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return au(c).UserGrantRole(ctx, &pb.AuthUserGrantRoleRequest{User: "nobody", Role: "reader"})
		}),
		unary("Auth.UserRevokeRole", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return au(c).UserRevokeRole(ctx, &pb.AuthUserRevokeRoleRequest{Name: "nobody", Role: "reader"})
		}),
		unary("Auth.RoleAdd existing", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return au(c).RoleAdd(ctx, &pb.AuthRoleAddRequest{Name: "reader"})
		}),
		unary("Auth.RoleGet", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return au(c).RoleGet(ctx, &pb.AuthRoleGetRequest{Role: "reader"})
		}),
		unary("Auth.RoleList", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return au(c).RoleList(ctx, &pb.AuthRoleListRequest{})
		}),
		unary("Auth.RoleDelete", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return au(c).RoleDelete(ctx, &pb.AuthRoleDeleteRequest{Role: "nobody"})
		}),
		unary("Auth.RoleGrantPermission", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return au(c).RoleGrantPermission(ctx, &pb.AuthRoleGrantPermissionRequest{Name: "nobody", Perm: &authpb.Permission{PermType: authpb.READ, Key: []byte("k")}})
		}),
		unary("Auth.RoleRevokePermission", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return au(c).RoleRevokePermission(ctx, &pb.AuthRoleRevokePermissionRequest{Role: "nobody", Key: []byte("k")})
		}),
		unary("Lock.Lock without a lease", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return v3lockpb.NewLockClient(c).Lock(ctx, &v3lockpb.LockRequest{Name: []byte("pub/lock"), Lease: noLease})
		}),
		unary("Lock.Unlock", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return v3lockpb.NewLockClient(c).Unlock(ctx, &v3lockpb.UnlockRequest{Key: []byte("pub/lock/none")})
		}),
		unary("Election.Campaign without a lease", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return v3electionpb.NewElectionClient(c).Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("pub/el"), Lease: noLease, Value: []byte("v")})
		}),
		unary("Election.Leader", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return v3electionpb.NewElectionClient(c).Leader(ctx, &v3electionpb.LeaderRequest{Name: []byte("pub/el")})
		}),
		unary("Election.Proclaim", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return v3electionpb.NewElectionClient(c).Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: &v3electionpb.LeaderKey{Name: []byte("pub/el"), Key: []byte("pub/el/none"), Lease: noLease}, Value: []byte("v")})
		}),
		unary("Election.Resign", func(ctx context.Context, c *grpc.ClientConn) (any, error) {
			return v3electionpb.NewElectionClient(c).Resign(ctx, &v3electionpb.ResignRequest{Leader: &v3electionpb.LeaderKey{Name: []byte("pub/el"), Key: []byte("pub/el/none"), Lease: noLease}})
		}),
	}
}

func firstWatch(ctx context.Context, c *grpc.ClientConn, key string) error {
	s, err := pb.NewWatchClient(c).Watch(ctx)
	if err != nil {
		return err
	}
	if err := s.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte(key)}}}); err != nil {
		return err
	}
	r, err := s.Recv()
	if err != nil {
		return err
	}
	if r.Canceled {
		return errors.New("watch canceled: " + r.CancelReason)
	}
	return nil
}

// outcome is what a client can tell of a call: ok, or the error's code and
// message.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	if s, ok := status.FromError(err); ok {
		return s.Code().String() + ": " + s.Message()
	}
	return err.Error()
}

// TestReplicaAnswersEveryRPCAsAVoter calls every RPC of etcd's v3 API, and
// the lock and election services, against a follower voter and a replica
// of the same cluster with auth on, as an anonymous client, a read-only
// user and root, and requires the same outcome: served the same way or
// refused with the same error.
func TestReplicaAnswersEveryRPCAsAVoter(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	r := startReplica(t, bins, c, "r1", replicaOpts{Extra: []string{"--user", "root:rootpw"}})
	lead := c.WaitLeader(t, 30*time.Second)
	var follower *harness.Member
	for _, m := range c.Members {
		if m != lead {
			follower = m
			break
		}
	}
	testHTTPParity(t, follower.ClientURL, r.ClientURL)

	for _, args := range authSetup {
		harness.MustEtcdctl(t, bins, c.Endpoints()[:1], args...)
	}
	ids := []struct{ name, user, password string }{{"anonymous", "", ""}, {"alice (read pub/)", "alice", "alicepw"}, {"root", "root", "rootpw"}}
	cases := rpcCases(c.Members[0].PeerURL)
	checked := 0
	for _, id := range ids {
		conn := func(ep string) *grpc.ClientConn {
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Username: id.user, Password: id.password, Logger: zap.NewNop()})
			if err != nil {
				t.Fatalf("%s: client of %s: %v", id.name, ep, err)
			}
			t.Cleanup(func() { cli.Close() })
			return cli.ActiveConnection()
		}
		voter, rep := conn(follower.ClientURL), conn(r.ClientURL)
		for _, tc := range cases {
			if id.user == "root" && !tc.rootToo {
				continue
			}
			run := func(cc *grpc.ClientConn) string {
				// etcd refuses membership changes ("unhealthy cluster")
				// from a member, voter or replica, connected to its peers
				// for less than 5s; wait that out rather than compare it.
				deadline := time.Now().Add(20 * time.Second)
				for {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					out := outcome(tc.call(ctx, cc))
					cancel()
					if !strings.Contains(out, "unhealthy cluster") || time.Now().After(deadline) {
						return out
					}
				}
			}
			want, got := run(voter), run(rep)
			checked++
			if got != want {
				t.Errorf("%s, %s: replica %q, voter %q", id.name, tc.name, got, want)
			}
		}
	}
	// Refusals must have been among the outcomes, or the table proves
	// nothing about auth.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	anon := client(t, r.ClientURL)
	if _, err := anon.Defragment(ctx, r.ClientURL); err == nil || !strings.Contains(err.Error(), "user name is empty") {
		t.Fatalf("anonymous defragment of the replica: %v, want refused (user name is empty)", err)
	}
	t.Logf("%d calls compared, voter and replica side by side", checked)
}

// testHTTPParity requests every HTTP path of a voter's client URL from the
// voter and the replica and requires the same status, and for the JSON API
// the same kind of answer. The documented difference: /readyz/non_learner
// fails on a replica (it is a learner), and /readyz lists the replica's own
// checks.
func testHTTPParity(t *testing.T, voterURL, replicaURL string) {
	t.Helper()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	type req struct{ method, path, body, wantInBody string }
	reqs := []req{
		{"GET", "/version", "", "etcdserver"},
		{"GET", "/health", "", `"health":"true"`},
		{"GET", "/health?serializable=true", "", `"health":"true"`},
		{"GET", "/livez", "", "ok"},
		{"GET", "/livez?verbose", "", "[+]serializable_read ok"},
		{"GET", "/readyz", "", "ok"},
		{"GET", "/readyz?verbose", "", "[+]linearizable_read ok"},
		{"GET", "/readyz/serializable_read", "", "ok"},
		{"GET", "/metrics", "", "etcd_server_has_leader"},
		{"POST", "/v3/kv/put", fmt.Sprintf(`{"key":%q,"value":%q}`, b64("http/k"), b64("v")), `"header"`},
		{"POST", "/v3/kv/range", fmt.Sprintf(`{"key":%q}`, b64("http/k")), `"kvs"`},
		{"POST", "/v3beta/kv/range", fmt.Sprintf(`{"key":%q,"serializable":true}`, b64("http/k")), `"kvs"`},
		{"POST", "/v3/kv/txn", fmt.Sprintf(`{"success":[{"request_range":{"key":%q}}]}`, b64("http/k")), `"succeeded":true`},
		{"POST", "/v3/kv/deleterange", fmt.Sprintf(`{"key":%q}`, b64("http/none")), `"header"`},
		{"POST", "/v3/kv/compaction", `{"revision":"1099511627776"}`, "future revision"},
		{"POST", "/v3/lease/grant", `{"TTL":"5"}`, `"TTL":"5"`},
		{"POST", "/v3/lease/leases", `{}`, `"header"`},
		{"POST", "/v3/cluster/member/list", `{}`, `"members"`},
		{"POST", "/v3/maintenance/status", `{}`, `"version"`},
		{"POST", "/v3/maintenance/alarm", `{"action":"GET"}`, `"header"`},
		{"POST", "/v3/auth/status", `{}`, `"header"`},
		{"POST", "/v3/lock/lock", fmt.Sprintf(`{"name":%q,"lease":"2147418113"}`, b64("http/lock")), "lease not found"},
		{"POST", "/v3/election/leader", fmt.Sprintf(`{"name":%q}`, b64("http/el")), "no leader"},
	}
	do := func(base string, rq req) (int, string) { return httpDo(rq.method, base+rq.path, rq.body) }
	// The replica's readiness may lag its first freshness rounds by a
	// moment; wait for it, as a probe would.
	harness.WaitFor(t, 30*time.Second, "replica /readyz 200", func() (bool, error) {
		code, body := do(replicaURL, req{method: "GET", path: "/readyz?verbose"})
		return code == 200, fmt.Errorf("%d %s", code, body)
	})
	for _, rq := range reqs {
		vc, vb := do(voterURL, rq)
		rc, rb := do(replicaURL, rq)
		if vc != rc || !strings.Contains(vb, rq.wantInBody) || !strings.Contains(rb, rq.wantInBody) {
			t.Errorf("%s %s: replica %d %.300q; voter %d %.300q (want %q in both)", rq.method, rq.path, rc, rb, vc, vb, rq.wantInBody)
		}
	}
	// Streams: the first answer of a watch over HTTP.
	for _, base := range []string{voterURL, replicaURL} {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		hr, _ := http.NewRequestWithContext(ctx, "POST", base+"/v3/watch", strings.NewReader(fmt.Sprintf(`{"create_request":{"key":%q}}`, b64("http/k"))))
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			cancel()
			t.Fatalf("%s /v3/watch: %v", base, err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		resp.Body.Close()
		cancel()
		if err != nil || !strings.Contains(line, `"created":true`) {
			t.Errorf("%s /v3/watch: first line %q, %v; want the watch created", base, line, err)
		}
	}
	// The documented difference.
	if code, _ := do(replicaURL, req{method: "GET", path: "/readyz/non_learner"}); code != http.StatusServiceUnavailable {
		t.Errorf("replica /readyz/non_learner: %d, want 503 (a replica is a learner)", code)
	}
	_, body := do(replicaURL, req{method: "GET", path: "/readyz?verbose"})
	for _, check := range []string{"[+]caught_up ok", "[+]leader_contact ok", "[+]freshness ok", "[+]data_corruption ok"} {
		if !strings.Contains(body, check) {
			t.Errorf("replica /readyz?verbose lacks %q:\n%s", check, body)
		}
	}
	if strings.Contains(body, "non_learner") {
		t.Errorf("replica /readyz?verbose runs etcd's non_learner check:\n%s", body)
	}
}
