// Package compare measures, side by side, how consistent each way of reading
// an etcd prefix is: linearizable reads through the voters ("leader"), and
// through an understudy replica its strong, weak and bounded reads, and a
// watch-based mirror's destination cluster.
//
// One writer puts sequence numbers through the primary at a fixed rate into
// --keys keys; readers on every path read the whole prefix, so that the
// largest sequence number a read returns is the position in the writer's
// history that the path had reached. Every judgement is made against the
// writer's own acknowledged history (what it was told, and when), never
// against a member's clock or revision: staleness in revisions and in
// milliseconds at read time, porcupine's linearizability verdict,
// monotonic-read violations, read-your-writes probes, and the events a
// watch on the replica and on the mirror destination lost, duplicated or
// delivered out of order. An optional fault (a replica partition, a mirror
// or leader kill) splits the run into before, during and after.
//
// The package drives processes only through their client APIs (and, with
// --local, through package harness): it does not depend on the internals of
// the mirror or the replica it measures.
package compare
