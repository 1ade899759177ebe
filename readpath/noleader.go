package readpath

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/etcdserver/txn"
)

// proposes reports a request that etcd's handlers turn into a raft
// proposal, which a learner forwards to the member it takes for leader.
//
// With no leader in the cluster (a majority of voters down), a forwarded
// proposal is not refused: the receiving voter holds it, whatever the
// client's deadline, until it knows a leader again, and it may then be
// applied long after the client was told it failed (rafthttp steps
// received proposals with no deadline). So a replica that knows no leader
// refuses these at once (rpctypes.ErrGRPCNoLeader), forwarding nothing;
// reads and watches are served from its store (strong and bounded reads
// wait for a round until their deadline).
func proposes(method string, req any) bool {
	switch method {
	case "/etcdserverpb.KV/Txn":
		t, ok := req.(*pb.TxnRequest)
		return ok && !txn.IsTxnReadonly(t)
	case "/etcdserverpb.Maintenance/Alarm":
		a, ok := req.(*pb.AlarmRequest)
		return ok && a.Action != pb.AlarmRequest_GET
	}
	return proposals[method]
}

// proposals are the unary methods that are always raft proposals (etcd's
// auth reads are too: they go through raft to be linearizable).
var proposals = map[string]bool{
	"/etcdserverpb.KV/Put":                    true,
	"/etcdserverpb.KV/DeleteRange":            true,
	"/etcdserverpb.KV/Compact":                true,
	"/etcdserverpb.Lease/LeaseGrant":          true,
	"/etcdserverpb.Lease/LeaseRevoke":         true,
	"/etcdserverpb.Cluster/MemberAdd":         true,
	"/etcdserverpb.Cluster/MemberRemove":      true,
	"/etcdserverpb.Cluster/MemberUpdate":      true,
	"/etcdserverpb.Cluster/MemberPromote":     true,
	"/etcdserverpb.Maintenance/MoveLeader":    true,
	"/etcdserverpb.Maintenance/Downgrade":     true,
	"/etcdserverpb.Auth/AuthEnable":           true,
	"/etcdserverpb.Auth/AuthDisable":          true,
	"/etcdserverpb.Auth/Authenticate":         true,
	"/etcdserverpb.Auth/UserAdd":              true,
	"/etcdserverpb.Auth/UserGet":              true,
	"/etcdserverpb.Auth/UserList":             true,
	"/etcdserverpb.Auth/UserDelete":           true,
	"/etcdserverpb.Auth/UserChangePassword":   true,
	"/etcdserverpb.Auth/UserGrantRole":        true,
	"/etcdserverpb.Auth/UserRevokeRole":       true,
	"/etcdserverpb.Auth/RoleAdd":              true,
	"/etcdserverpb.Auth/RoleGet":              true,
	"/etcdserverpb.Auth/RoleList":             true,
	"/etcdserverpb.Auth/RoleDelete":           true,
	"/etcdserverpb.Auth/RoleGrantPermission":  true,
	"/etcdserverpb.Auth/RoleRevokePermission": true,
	"/v3lockpb.Lock/Lock":                     true,
	"/v3lockpb.Lock/Unlock":                   true,
	"/v3electionpb.Election/Campaign":         true,
	"/v3electionpb.Election/Proclaim":         true,
	"/v3electionpb.Election/Resign":           true,
}
