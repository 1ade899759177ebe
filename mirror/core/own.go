package core

import (
	"bytes"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Policy says what a mirror may do to the destination keys of its image
// that it did not write. Beside every destination key it writes, a mirror
// keeps an ownership record, put and deleted in the same transaction as
// the key; a change is written under the Guard its Policy gives it.
type Policy int

const (
	// Keep (the default) never touches a key the mirror did not write; a
	// source key that lands on one is a conflict: skipped, logged, counted.
	Keep Policy = iota
	// Overwrite copies over keys the mirror did not write (and owns them
	// from then on), but deletes nothing it did not write.
	Overwrite
	// Prune makes the image an exact copy of the source.
	Prune
)

func (p Policy) String() string {
	switch p {
	case Overwrite:
		return "overwrite"
	case Prune:
		return "prune"
	}
	return "keep"
}

// NestedOps is how many operations the ownership checks add to a
// transaction's budget: etcd counts a nested transaction's operations
// against what its parent leaves (checkTxnRequest), and a put under Keep
// nests two deep with two operations at each level.
const NestedOps = 4

// Guard is the condition a change of a destination key is written under.
type Guard int

const (
	// Always: written whoever wrote the key.
	Always Guard = iota
	// IfOwned: written only if the mirror's ownership record is there.
	IfOwned
	// IfOwnedOrAbsent: written if the mirror owns the key, else if the
	// key does not exist.
	IfOwnedOrAbsent
)

// PutGuard is the guard of a put under p: under Keep only a key the
// mirror owns, or one that does not exist, is written.
func PutGuard(p Policy) Guard {
	if p == Keep {
		return IfOwnedOrAbsent
	}
	return Always
}

// DeleteGuard is the guard of a delete under p: only Prune deletes keys
// the mirror did not write.
func DeleteGuard(p Policy) Guard {
	if p == Prune {
		return Always
	}
	return IfOwned
}

// Answer is the shape of a guarded put's response: whether its outer
// transaction took its then branch (owned, or unguarded), and whether its
// else branch answered with exactly one nested transaction (ElseTxn) that
// took its then branch (ElseThen: the key was absent).
type Answer struct{ Then, ElseTxn, ElseThen bool }

// Written reports whether the put was written; false is a conflict: the
// key exists and the mirror does not own it.
func (a Answer) Written() bool { return a.Then || (a.ElseTxn && a.ElseThen) }

// Version names one key version.
type Version struct {
	Key string
	Rev int64
}

// Versions is a set of key versions: those another mirror wrote.
type Versions map[Version]bool

// Has reports whether kv's version is in the set.
func (v Versions) Has(kv *mvccpb.KeyValue) bool { return v[Version{string(kv.Key), kv.ModRevision}] }

// NotIn is kvs without the versions in v.
func (v Versions) NotIn(kvs []*mvccpb.KeyValue) []*mvccpb.KeyValue {
	if len(v) == 0 {
		return kvs
	}
	out := make([]*mvccpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		if !v.Has(kv) {
			out = append(out, kv)
		}
	}
	return out
}

// Writer is what a feeder's ownership record says of one key version.
type Writer int

const (
	// NotFeeder: the feeder did not write this version.
	NotFeeder Writer = iota
	// ByFeeder: the feeder wrote this version.
	ByFeeder
	// AskAtRev: the feeder wrote the key again since; its record as of the
	// version's revision says.
	AskAtRev
)

// WroteIt decides, from a feeder's ownership record of a key as read at or
// after rev (nil: none), whether the feeder wrote the key's version of
// revision rev. With no record the feeder does not own the key now: if it
// wrote that version, it has deleted the key since, and the delete comes
// after it. A record older than the version means someone else wrote the
// key after the feeder.
func WroteIt(rev int64, rec *mvccpb.KeyValue) Writer {
	switch {
	case rec == nil || rec.ModRevision < rev:
		return NotFeeder
	case rec.ModRevision == rev:
		return ByFeeder
	}
	return AskAtRev
}

// Copy is what the destination holds of one source key: its copy and the
// mirror's ownership record (nil when absent).
type Copy struct{ KV, Own *mvccpb.KeyValue }

// SameCopy reports whether a destination copy already is what a put would
// write for a source key: the same value, on the destination lease
// wantLease (0: none), with the mirror's ownership record on that lease.
// A copy without the record is written again (under Keep the put is then
// skipped and counted as a conflict, as on a first sync; otherwise it
// takes ownership).
func SameCopy(src *mvccpb.KeyValue, dst Copy, wantLease int64) bool {
	return dst.KV != nil && dst.Own != nil &&
		bytes.Equal(src.Value, dst.KV.Value) &&
		dst.KV.Lease == wantLease && dst.Own.Lease == wantLease
}

// Adoptable picks, among the destination keys named keys (the mapped
// copies of the reverse mirror's records; dest holds those that exist),
// the ones a failback adopts, and names those left alone because their
// version is newer than the cutover record's revision cutRev.
func Adoptable(keys []string, dest map[string]*mvccpb.KeyValue, cutRev int64) (adopt []*mvccpb.KeyValue, newer []string) {
	for _, k := range keys {
		kv := dest[k]
		switch {
		case kv == nil:
		case kv.ModRevision > cutRev:
			newer = append(newer, k)
		default:
			adopt = append(adopt, kv)
		}
	}
	return adopt, newer
}
