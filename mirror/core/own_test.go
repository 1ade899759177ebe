package core

import (
	"slices"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestGuards: under Keep a put is written only over a key the mirror owns
// or onto no key, and a delete only of a key it owns; Overwrite writes any
// put but deletes only its own; Prune writes and deletes anything.
func TestGuards(t *testing.T) {
	for _, c := range []struct {
		p        Policy
		name     string
		put, del Guard
	}{
		{Keep, "keep", IfOwnedOrAbsent, IfOwned},
		{Overwrite, "overwrite", Always, IfOwned},
		{Prune, "prune", Always, Always},
	} {
		if got := PutGuard(c.p); got != c.put {
			t.Errorf("%v put: %v, want %v", c.p, got, c.put)
		}
		if got := DeleteGuard(c.p); got != c.del {
			t.Errorf("%v delete: %v, want %v", c.p, got, c.del)
		}
		if c.p.String() != c.name {
			t.Errorf("%d.String() = %q, want %q", c.p, c.p.String(), c.name)
		}
	}
}

// TestAnswer reads whether a guarded put was written from the shape of its
// answer: owned (then), absent (the nested else took its then), or someone
// else's key (neither: a conflict).
func TestAnswer(t *testing.T) {
	for _, c := range []struct {
		what string
		a    Answer
		want bool
	}{
		{"owned or unguarded", Answer{Then: true}, true},
		{"absent: created", Answer{ElseTxn: true, ElseThen: true}, true},
		{"someone else's", Answer{ElseTxn: true}, false},
		{"no nested answer", Answer{}, false},
	} {
		if got := c.a.Written(); got != c.want {
			t.Errorf("%s: written %v, want %v", c.what, got, c.want)
		}
	}
}

// TestWroteIt: a feeder wrote a key's version if its ownership record was
// written with it; an older record means another writer since, a newer one
// means the record as of the version's revision must say.
func TestWroteIt(t *testing.T) {
	rec := func(mod int64) *mvccpb.KeyValue { return &mvccpb.KeyValue{ModRevision: mod} }
	for _, c := range []struct {
		name string
		rec  *mvccpb.KeyValue
		want Writer
	}{
		{"no record", nil, NotFeeder},
		{"record written with the version", rec(10), ByFeeder},
		{"record older: written by another since", rec(7), NotFeeder},
		{"record newer: the feeder wrote the key again", rec(12), AskAtRev},
	} {
		if got := WroteIt(10, c.rec); got != c.want {
			t.Errorf("%s: WroteIt = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestVersions(t *testing.T) {
	a := &mvccpb.KeyValue{Key: []byte("a"), ModRevision: 3}
	a4 := &mvccpb.KeyValue{Key: []byte("a"), ModRevision: 4}
	b := &mvccpb.KeyValue{Key: []byte("b"), ModRevision: 3}
	v := Versions{{"a", 3}: true}
	if !v.Has(a) || v.Has(a4) || v.Has(b) {
		t.Fatal("Has: want only a@3")
	}
	if got := v.NotIn([]*mvccpb.KeyValue{a, a4, b}); len(got) != 2 || got[0] != a4 || got[1] != b {
		t.Fatalf("NotIn = %v, want a@4 and b", got)
	}
	all := []*mvccpb.KeyValue{a}
	if got := Versions(nil).NotIn(all); &got[0] != &all[0] {
		t.Fatal("NotIn of no versions copied the slice")
	}
}

func TestSameCopy(t *testing.T) {
	src := &mvccpb.KeyValue{Key: []byte("a/k"), Value: []byte("v"), Lease: 7}
	kv := func(val string, lease int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Value: []byte(val), Lease: lease}
	}
	for _, c := range []struct {
		what  string
		dst   Copy
		lease int64
		want  bool
	}{
		{"same value, lease and record", Copy{kv("v", 9), kv("", 9)}, 9, true},
		{"no lease on either side", Copy{kv("v", 0), kv("", 0)}, 0, true},
		{"missing", Copy{}, 9, false},
		{"no ownership record", Copy{KV: kv("v", 9)}, 9, false},
		{"record without the key", Copy{Own: kv("", 9)}, 9, false},
		{"another value", Copy{kv("w", 9), kv("", 9)}, 9, false},
		{"another lease", Copy{kv("v", 8), kv("", 8)}, 9, false},
		{"a lease the source key has not", Copy{kv("v", 9), kv("", 9)}, 0, false},
		{"the record on another lease", Copy{kv("v", 9), kv("", 0)}, 9, false},
	} {
		if got := SameCopy(src, c.dst, c.lease); got != c.want {
			t.Errorf("%s: SameCopy %v, want %v", c.what, got, c.want)
		}
	}
}

// TestAdoptable: a destination key the reverse mirror copied is adopted
// unless its version is newer than the cutover record's revision; keys
// the destination does not have are not.
func TestAdoptable(t *testing.T) {
	dest := map[string]*mvccpb.KeyValue{
		"/p/old":  {Key: []byte("/p/old"), ModRevision: 10},
		"/p/at":   {Key: []byte("/p/at"), ModRevision: 42},
		"/p/late": {Key: []byte("/p/late"), ModRevision: 43},
	}
	adopt, newer := Adoptable([]string{"/p/at", "/p/gone", "/p/late", "/p/old"}, dest, 42)
	var got []string
	for _, kv := range adopt {
		got = append(got, string(kv.Key))
	}
	if !slices.Equal(got, []string{"/p/at", "/p/old"}) || !slices.Equal(newer, []string{"/p/late"}) {
		t.Fatalf("Adoptable = %v, newer %v; want [/p/at /p/old], newer [/p/late]", got, newer)
	}
}
