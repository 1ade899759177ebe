package core

import "go.etcd.io/etcd/api/v3/mvccpb"

// Change is one mirrored change of a destination key.
type Change struct {
	// Key is the destination key.
	Key string
	// Put is the source version to copy; nil deletes Key.
	Put *mvccpb.KeyValue
	// Foreign: a put of a version another mirror wrote, turned into a
	// delete of the copy this mirror may have made before.
	Foreign bool
}

// PutChange copies one source key, or, if another mirror wrote its
// version (foreign), deletes this mirror's copy of it.
func PutChange(kv *mvccpb.KeyValue, m Mapping, foreign Versions) Change {
	if foreign.Has(kv) {
		return Change{Key: m.Map(kv.Key), Foreign: true}
	}
	return Change{Key: m.Map(kv.Key), Put: kv}
}

// ChangeOf is one source event as a destination change.
func ChangeOf(ev *mvccpb.Event, m Mapping, foreign Versions) Change {
	if ev.Type == mvccpb.DELETE {
		return Change{Key: m.Map(ev.Kv.Key)}
	}
	return PutChange(ev.Kv, m, foreign)
}

// Txn is one destination transaction: its changes and the checkpoint it
// writes.
type Txn struct {
	Changes    []Change
	Checkpoint Checkpoint
	// Revisions is how many whole source revisions it completes; 0 for a
	// part of a source revision too big for one transaction, which leaves
	// the checkpoint as it was.
	Revisions int
}

// Plan groups streamed events (in revision order) into transactions that
// fit b, each with the checkpoint of the last revision in it, chained from
// cp. A transaction holds whole revisions; a revision that changes a key
// already in the transaction starts the next one: etcd refuses a key twice
// in a transaction, and folding the two changes into one would hide the
// earlier from every destination watcher. One source revision bigger than
// b goes in parts: all but its last without moving the checkpoint (its
// puts and deletes are of distinct keys, so doing a part again after a
// crash leaves the same state). Events of reserved keys count towards the
// operations and the revision but are not copied.
func Plan(cp Checkpoint, events []*mvccpb.Event, b Budget, m Mapping, foreign Versions) []Txn {
	var (
		out   []Txn
		cur   []Change
		index = map[string]bool{} // destination keys in cur
		last  int64
		revs  int
		// ops and bytes are what cur holds, reserved events' ops included.
		ops, bytes int
	)
	flush := func() {
		if revs == 0 {
			return
		}
		next := cp
		next.Phase, next.From, next.Revision = PhaseStream, cp.Revision+1, last
		out = append(out, Txn{Changes: cur, Checkpoint: next, Revisions: revs})
		cp, cur, index, revs, ops, bytes = next, nil, map[string]bool{}, 0, 0, 0
	}
	size := func(ev *mvccpb.Event) int { return ChangeBytes(ChangeOf(ev, m, foreign)) }
	for len(events) > 0 {
		rev := events[0].Kv.ModRevision
		n := 1
		for n < len(events) && events[n].Kv.ModRevision == rev {
			n++
		}
		group := events[:n]
		events = events[n:]
		groupBytes := 0
		for _, ev := range group {
			groupBytes += size(ev)
		}
		if !b.fits(ops+len(group), bytes+groupBytes) || touchesAny(group, index, m) {
			flush()
		}
		if !b.fits(len(group), groupBytes) {
			// Too big for one transaction: every part but the last alone.
			var parts [][]*mvccpb.Event
			for part := range ChunksBy(group, b, size) {
				parts = append(parts, part)
			}
			for _, part := range parts[:len(parts)-1] {
				out = append(out, Txn{Changes: changesOf(part, m, foreign), Checkpoint: cp})
			}
			group = parts[len(parts)-1]
			groupBytes = 0
			for _, ev := range group {
				groupBytes += size(ev)
			}
		}
		for _, c := range changesOf(group, m, foreign) {
			index[c.Key] = true
			cur = append(cur, c)
		}
		ops, bytes = ops+len(group), bytes+groupBytes
		last = rev
		revs++
	}
	flush()
	return out
}

// touchesAny reports whether an event of group changes a key already in
// index (the destination keys of the transaction being built).
func touchesAny(group []*mvccpb.Event, index map[string]bool, m Mapping) bool {
	for _, ev := range group {
		if !Reserved(ev.Kv.Key) && index[m.Map(ev.Kv.Key)] {
			return true
		}
	}
	return false
}

// changesOf are the changes of events, reserved keys left out.
func changesOf(evs []*mvccpb.Event, m Mapping, foreign Versions) []Change {
	out := make([]Change, 0, len(evs))
	for _, ev := range evs {
		if !Reserved(ev.Kv.Key) {
			out = append(out, ChangeOf(ev, m, foreign))
		}
	}
	return out
}

// SyncChange is one change of a full sync and the source key it is for.
type SyncChange struct {
	Src string
	Change
}

// PageChanges is the changes a page of a full sync (source keys kvs) needs,
// and how many of its keys the destination already holds as they would be
// written (have: the destination's copies by destination key; wantLease:
// the destination lease a copy of kv would get). With compare false (a
// first sync into an image the mirror never wrote) every key is written. A
// version another mirror wrote is the same when the destination holds
// neither a copy nor a record of it.
func PageChanges(kvs []*mvccpb.KeyValue, have map[string]Copy, foreign Versions, compare bool, m Mapping, wantLease func(*mvccpb.KeyValue) int64) ([]SyncChange, int) {
	out := make([]SyncChange, 0, len(kvs))
	same := 0
	for _, kv := range kvs {
		if Reserved(kv.Key) {
			continue
		}
		if compare {
			dst := have[m.Map(kv.Key)]
			isForeign := foreign.Has(kv)
			if (isForeign && dst.KV == nil && dst.Own == nil) || (!isForeign && SameCopy(kv, dst, wantLease(kv))) {
				same++
				continue
			}
		}
		out = append(out, SyncChange{Src: string(kv.Key), Change: PutChange(kv, m, foreign)})
	}
	return out, same
}

// PlanPage groups a full sync page's changes into transactions that fit
// b, each moving the checkpoint's SyncedThrough to its last source key,
// and, if the page's last key (last) was unchanged or reserved, a
// transaction of no change that moves SyncedThrough to it.
func PlanPage(cp Checkpoint, changes []SyncChange, last string, b Budget) []Txn {
	var out []Txn
	for chunk := range ChunksBy(changes, b, func(c SyncChange) int { return ChangeBytes(c.Change) }) {
		next := cp
		next.SyncedThrough = chunk[len(chunk)-1].Src
		cs := make([]Change, len(chunk))
		for i, c := range chunk {
			cs[i] = c.Change
		}
		out = append(out, Txn{Changes: cs, Checkpoint: next})
		cp = next
	}
	if cp.SyncedThrough != last {
		next := cp
		next.SyncedThrough = last
		out = append(out, Txn{Checkpoint: next})
	}
	return out
}

// Gone is the destination keys, among keys, that the source does not have
// (inSource: the source's keys by destination name): a sweep deletes them.
func Gone(keys []string, inSource map[string]bool) []Change {
	var out []Change
	for _, k := range keys {
		if !inSource[k] {
			out = append(out, Change{Key: k})
		}
	}
	return out
}

// Chunks splits s into runs of at most n.
func Chunks[T any](s []T, n int) func(func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			k := min(n, len(s))
			if !yield(s[:k]) {
				return
			}
			s = s[k:]
		}
	}
}
