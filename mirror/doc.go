// Package mirror copies a key prefix of one etcd cluster into another,
// through the source's watch: resumable, ordered, exactly once, and
// touching only destination keys it wrote.
//
// The destination holds, beside the copied keys, a checkpoint per mirror
// (CheckpointKey) naming the source cluster, the prefix mapping and how far
// the copy has got. Every change to the copied keys is written in one
// transaction with the checkpoint that accounts for it, and only if the
// checkpoint is still the one the mirror last wrote (a compare on its
// ModRevision), so:
//
//   - a crash at any point loses nothing and repeats nothing: a restart
//     reads the checkpoint and resumes after it;
//   - two mirrors with the same name cannot both write: the second one's
//     transactions fail their compare, and, finding another process's
//     token in the checkpoint, it stops. Finding its own token, it knows a
//     write whose answer it lost has landed, and goes on.
//
// Ownership (see Policy): beside each key it writes, the mirror keeps an
// ownership record, and it overwrites or deletes a destination key only
// if the record is there or the key does not exist, checked inside the
// transaction. An initial sync into an image that holds keys the mirror
// did not write is refused unless the operator chose Overwrite or Prune;
// two mirrors whose images overlap are refused.
//
// Cycles (see cycle.go): a mirror whose writes would come back into its
// own source, through the mirrors whose checkpoints it can read in either
// cluster, is refused at start, right after its first checkpoint, and at
// most every CycleCheckInterval while it runs; and it does not copy the
// source keys another mirror wrote into the source (CopyMirrored aside).
// The one exception is a failback (Failback, see failback.go): a mirror
// B → A after a drained A → B mirror leaves exactly that mirror out of
// both rules and takes over A's keys it copied.
//
// A mirror starts with a full sync that pins no source revision (see sync):
// it opens the watch at the source's revision H, copies the prefix a page
// at a time at the newest revision, sweeps the keys it owns that the source
// no longer has, then applies the watch from H+1. Each source revision is
// one destination transaction; a mirror that is behind puts as many whole
// revisions in one transaction as MaxTxnOps allows. If the source has
// compacted past the checkpoint, the mirror syncs in full again and says
// so; it never skips.
//
// Leases are described on the leases type. Every request has a timeout,
// failures are retried with backoff, and a mirror that makes no progress
// while it has work to do reports itself stalled. Keys under
// ReservedPrefix are the mirrors' own and are never copied or compared.
//
// The mirror's state (its checkpoint and the revision that fences its next
// write, its claim, its cycle checks) and its decisions are package core's
// (core.State): this package reads and writes both clusters, then feeds
// each outcome to a transition of the state, and times everything on
// Config.Clock.
package mirror
