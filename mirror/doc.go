// Package mirror copies a key prefix of one etcd cluster into another,
// through the source's watch: resumable, ordered and exactly once.
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
//     transactions fail their compare, and it stops.
//
// A mirror starts with a full sync at one source revision, page by page
// (each page's transaction records the last key copied, so an interrupted
// sync resumes), then deletes the destination keys the source did not have
// at that revision (keys deleted while no mirror ran), then watches from
// the revision after. Each source revision is one destination transaction;
// a mirror that is behind puts as many whole revisions in one transaction
// as MaxTxnOps allows. If the source has compacted past the checkpoint, the
// mirror syncs in full again, with deletes, and says so; it never skips.
//
// Leases are described on the leases type. Keys under ReservedPrefix are
// the mirrors' own and are never copied, deleted or compared.
package mirror
