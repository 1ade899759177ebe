package mirror

import (
	"slices"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestSameCopy(t *testing.T) {
	src := &mvccpb.KeyValue{Key: []byte("a/k"), Value: []byte("v"), Lease: 7}
	kv := func(val string, lease int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Value: []byte(val), Lease: lease}
	}
	for _, c := range []struct {
		what  string
		dst   copyState
		lease int64
		want  bool
	}{
		{"same value, lease and record", copyState{kv("v", 9), kv("", 9)}, 9, true},
		{"no lease on either side", copyState{kv("v", 0), kv("", 0)}, 0, true},
		{"missing", copyState{}, 9, false},
		{"no ownership record", copyState{kv: kv("v", 9)}, 9, false},
		{"record without the key", copyState{own: kv("", 9)}, 9, false},
		{"another value", copyState{kv("w", 9), kv("", 9)}, 9, false},
		{"another lease", copyState{kv("v", 8), kv("", 8)}, 9, false},
		{"a lease the source key has not", copyState{kv("v", 9), kv("", 9)}, 0, false},
		{"the record on another lease", copyState{kv("v", 9), kv("", 0)}, 9, false},
	} {
		if got := sameCopy(src, c.dst, c.lease); got != c.want {
			t.Errorf("%s: sameCopy %v, want %v", c.what, got, c.want)
		}
	}
}

func TestOutsideReserved(t *testing.T) {
	rend := clientv3.GetPrefixRangeEnd(ReservedPrefix)
	for _, c := range []struct {
		lo, hi string
		want   [][2]string
	}{
		{"a/", "a/z", [][2]string{{"a/", "a/z"}}},
		{"\x00a", "b", [][2]string{{"\x00a", ReservedPrefix}, {rend, "b"}}},
		{"\x00a", "\x00b", [][2]string{{"\x00a", "\x00b"}}},
		{ReservedPrefix + "x", "b", [][2]string{{rend, "b"}}},
		{ReservedPrefix + "a", ReservedPrefix + "b", nil},
	} {
		if got := outsideReserved(c.lo, c.hi); !slices.Equal(got, c.want) {
			t.Errorf("outsideReserved(%q, %q) = %q, want %q", c.lo, c.hi, got, c.want)
		}
	}
}
