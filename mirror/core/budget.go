package core

import "go.etcd.io/etcd/api/v3/mvccpb"

// Budget bounds one destination transaction: at most Ops changes, and at
// most Bytes of request (ChangeBytes summed; 0: no bound). etcd refuses a
// transaction with more operations than its --max-txn-ops, and a request
// larger than its --max-request-bytes ("etcdserver: request is too
// large"): a mirror that batched many large values into one would be
// refused, and retry the same transaction, forever.
type Budget struct {
	Ops, Bytes int
}

// changeOverhead is what one change costs a transaction besides its key
// and value: its ownership record and checks, lease and framing.
const changeOverhead = 256

// ChangeBytes is what c adds to a transaction's request, erring large: its
// value twice (under an ownership guard, the put is in both branches of
// the guard's transaction), and its destination key, which the puts, the
// ownership records and the checks each name.
func ChangeBytes(c Change) int {
	n := changeOverhead + 8*len(c.Key)
	if c.Put != nil {
		n += 2 * len(c.Put.Value)
	}
	return n
}

// KVBytes is ChangeBytes of a copy of kv under its own key.
func KVBytes(kv *mvccpb.KeyValue) int {
	return ChangeBytes(Change{Key: string(kv.Key), Put: kv})
}

// fits reports whether n changes of size bytes fit b. A lone change always
// fits: one too large for any transaction goes alone, and the destination's
// refusal names it.
func (b Budget) fits(n, bytes int) bool {
	return n <= 1 || (n <= b.Ops && (b.Bytes <= 0 || bytes <= b.Bytes))
}

// ChunksBy splits s into runs that each fit b, size telling each element's
// bytes, in order.
func ChunksBy[T any](s []T, b Budget, size func(T) int) func(func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			k, bytes := 1, size(s[0])
			for k < len(s) && b.fits(k+1, bytes+size(s[k])) {
				bytes += size(s[k])
				k++
			}
			if !yield(s[:k]) {
				return
			}
			s = s[k:]
		}
	}
}
