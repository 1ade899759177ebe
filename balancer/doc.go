// Package balancer gives Go services a clientv3.Client whose reads and
// watches go to understudy replicas and whose writes go straight to the
// etcd leader, with no follower hop.
//
//	b, err := balancer.New(balancer.Config{Endpoints: []string{"http://10.0.0.1:2379"}})
//	if err != nil { ... }
//	defer b.Close()
//	cli := b.Client() // a standard *clientv3.Client
//
// # How it is done
//
// Everything happens inside the client's gRPC connection, so the client is
// an ordinary *clientv3.Client and everything built on it (concurrency,
// leasing, namespaces) works unchanged:
//
//   - Discovery: a loop owned by the Balancer asks the cluster for its
//     members (MemberList: each member's client URLs and learner flag) and
//     each voter for its Status (the leader, by the highest term), every
//     Config.RefreshInterval and at once when a write sees its endpoint
//     fail. It hands every member's client URL to the client
//     (Client.SetEndpoints), so gRPC keeps one connection to each.
//   - Routing: the connection's load-balancing policy is this package's
//     ("understudy"). Its picker reads a route from each call's context:
//     a client interceptor marks Range, read-only Txn and Watch as reads,
//     and everything else as writes. Reads go to a healthy replica chosen
//     by the read policy; writes go to the leader, or to another voter
//     when the leader is unreachable (etcd forwards them).
//   - Health: the loop probes every replica with a serializable Range
//     bounded by Config.MaxStaleness (the replica's wire.MaxStalenessKey),
//     so a replica that is down, cannot prove itself fresh enough, or
//     answers with a learner's refusal is ejected until a later probe
//     succeeds. A read refused by a learner is retried on the voters. With
//     no healthy replica, reads go to the voters. While reads used a
//     budget tighter than MaxStaleness within the last 30s, each probe
//     first asks for the tightest of them (failing it ejects nothing): a
//     replica keeps its rounds at the full rate only for bounds its idle
//     rounds cannot serve, so a balancer whose clients use no tight budget
//     leaves its replicas at one round a second.
//   - Staleness budgets: a serializable read made with WithMaxStaleness(ctx,
//     d) (or the wire.MaxStalenessKey metadata) goes to a replica whose
//     staleness bound fits d: the bound it last reported
//     (wire.StalenessBoundKey, in the header of every answer and probe)
//     plus the time since that call began; of those, replicas of
//     Config.Zone first, then by the read policy. The replica is sent d
//     and serves a bounded read, so it never answers older than d. When
//     none fits, or the one tried cannot prove d within half of what is
//     left of the call's deadline, a voter serves the read linearizably.
//     Strong reads ignore the budget.
//   - Zones: a replica started with --zone tells its zone in the header of
//     each probe's response (wire.ZoneKey); the ZoneAffinity policy keeps
//     reads on replicas of Config.Zone while any is healthy.
//
// Reads through a replica keep etcd's meaning: a default Get is
// linearizable (the replica's strong read), WithSerializable is the
// replica's weak (or bounded) read.
package balancer
