// Package cascade is a cascaded replica's store: a copy of an etcd
// cluster's keyspace that is not a member of the cluster, fed by another
// replica's (or a member's) watch, with the cluster's own revisions.
//
// A cascaded replica bootstraps from an upstream's Maintenance.Snapshot,
// restored (etcdutl's restore) into a private single-member etcd at exactly
// the snapshot's revision, then applies the upstream's watch one source
// revision per local transaction (Applier), so that every key's value,
// create and mod revision, version and lease equal the source's; it checks
// that after each revision, and a store that diverged is never served: the
// replica bootstraps again. No revision is ever made locally but by the
// Applier: client writes, leases, auth and member calls go to the upstream
// (the front forwards them), restored and new leases never expire on the
// local lessor (their TTLs are the source's, answered by the upstream), and
// compaction follows the source's.
//
// The front (package readpath) serves it exactly as a learner replica's
// store: weak reads local, strong reads after a round that asks the
// upstream for a linearizable revision (Member), bounded reads by the
// freshness those rounds prove, watches from the local store.
package cascade
