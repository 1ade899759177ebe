package mirror

import (
	"slices"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

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
