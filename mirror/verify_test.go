package mirror

import (
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestDiffer: each step of verify's merge, by which side has the key,
// whether the mirror owns the destination key and whether the values
// agree.
func TestDiffer(t *testing.T) {
	kv := func(k, v string) *mvccpb.KeyValue { return &mvccpb.KeyValue{Key: []byte(k), Value: []byte(v)} }
	s, d, other := kv("/s/k", "v"), kv("/d/k", "v"), kv("/d/k", "w")
	for _, c := range []struct {
		name  string
		c     int
		owner bool
		d     *mvccpb.KeyValue
		want  string // "": no entry
	}{
		{"source only", -1, true, nil, "missing"},
		{"destination only, the mirror's", 1, true, d, "extra"},
		{"destination only, not the mirror's", 1, false, d, "unowned"},
		{"both, same value", 0, true, d, ""},
		{"both, same value, not the mirror's", 0, false, d, "unowned"},
		{"both, other value", 0, true, other, "value"},
		{"both, other value, not the mirror's", 0, false, other, "conflict"},
	} {
		got, ok := differ(c.c, c.owner, s, c.d)
		if (c.want == "") == ok || got.Kind != c.want {
			t.Errorf("%s: %+v, %v; want kind %q", c.name, got, ok, c.want)
		}
	}
}

// TestVerdict: differences fail the verify; keys the mirror did not write
// do not; agreement at the cutover record's revision says so.
func TestVerdict(t *testing.T) {
	cut := &Cutover{Revision: 7}
	unowned := []Difference{{Key: "/u", Kind: "unowned"}}
	for _, c := range []struct {
		name    string
		diffs   []Difference
		cut     *Cutover
		agree   bool
		verdict string
		unowned string
	}{
		{"none", nil, nil, true, "source revision 7 and the destination agree", ""},
		{"at the cutover", unowned, cut, true, "(the cutover record's)", `1 destination key(s) in the image were not written by mirror "m"`},
		{"a difference", append(unowned, Difference{Key: "/x", Kind: "conflict"}), cut, false, "1 difference(s) at source revision 7", "1 destination key(s)"},
	} {
		u, v, agree := Verdict(c.diffs, 7, c.cut, "m")
		if agree != c.agree || !strings.Contains(v, c.verdict) || (c.unowned == "") != (u == "") || !strings.Contains(u, c.unowned) {
			t.Errorf("%s: %q, %q, %v; want %q, %q, %v", c.name, u, v, agree, c.unowned, c.verdict, c.agree)
		}
	}
}
