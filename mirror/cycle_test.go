package mirror

import (
	"errors"
	"strings"
	"testing"

	"github.com/understudy-kv/understudy/mirror/core"
)

// TestCarry: a mirror carries the part of a region it reads, with its
// source prefix replaced, and nothing of another cluster or a disjoint
// prefix.
func TestCarry(t *testing.T) {
	l := link{name: "b", src: "X", dst: "Y", srcPrefix: "/a/", dstPrefix: "/b/"}
	for _, c := range []struct {
		name string
		in   region
		want region
		ok   bool
	}{
		{"narrower region: its part lands narrower", region{"X", "/a/x/"}, region{"Y", "/b/x/"}, true},
		{"wider region: the whole source prefix", region{"X", "/"}, region{"Y", "/b/"}, true},
		{"every key", region{"X", ""}, region{"Y", "/b/"}, true},
		{"the same prefix", region{"X", "/a/"}, region{"Y", "/b/"}, true},
		{"disjoint prefix", region{"X", "/b/"}, region{}, false},
		{"another cluster", region{"Y", "/a/"}, region{}, false},
	} {
		got, ok := l.carry(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: carry(%v) = %v, %v; want %v, %v", c.name, c.in, got, ok, c.want, c.ok)
		}
	}
	every := link{src: "X", dst: "Y", srcPrefix: "", dstPrefix: "/m/"}
	if got, _ := every.carry(region{"X", "/a/"}); got != (region{"Y", "/m//a/"}) {
		t.Errorf("a mirror of every key carries /a/ to %v, want /m//a/ in Y", got)
	}
}

// TestFindCycle covers each way keys a mirror writes can, or cannot, come
// back into its source.
func TestFindCycle(t *testing.T) {
	// The two cycles: one cluster, /b/ → /a/x/ beside /a/ → /b/;
	// two clusters mirroring /c/ into each other.
	ab := link{name: "ab", src: "X", dst: "X", srcPrefix: "/a/", dstPrefix: "/b/"}
	cXY := link{name: "c-xy", src: "X", dst: "Y", srcPrefix: "/c/", dstPrefix: "/c/"}
	for _, c := range []struct {
		name   string
		self   link
		others []link
		want   []string // the path's names; nil: no cycle
	}{
		{"same cluster, overlapping prefixes", link{name: "s", src: "X", dst: "X", srcPrefix: "/a/", dstPrefix: "/a/b/"}, nil, []string{}},
		{"same cluster, disjoint prefixes", link{name: "s", src: "X", dst: "X", srcPrefix: "/a/", dstPrefix: "/b/"}, nil, nil},
		{"same prefixes, other cluster, alone", link{name: "s", src: "X", dst: "Y", srcPrefix: "/a/", dstPrefix: "/a/"}, nil, nil},
		{"one cluster, two mirrors", link{name: "ba", src: "X", dst: "X", srcPrefix: "/b/", dstPrefix: "/a/x/"}, []link{ab}, []string{"ab"}},
		{"one cluster, the other way round", ab, []link{{name: "ba", src: "X", dst: "X", srcPrefix: "/b/", dstPrefix: "/a/x/"}}, []string{"ba"}},
		{"two clusters into each other", link{name: "c-yx", src: "Y", dst: "X", srcPrefix: "/c/", dstPrefix: "/c/"}, []link{cXY}, []string{"c-xy"}},
		{"the other reads elsewhere in the image's cluster", link{name: "s", src: "Y", dst: "X", srcPrefix: "/c/", dstPrefix: "/d/"}, []link{cXY}, nil},
		{"the other writes elsewhere in the source's cluster", link{name: "s", src: "Y", dst: "X", srcPrefix: "/e/", dstPrefix: "/c/"}, []link{cXY}, nil},
		{"a chain out, no way back", link{name: "s", src: "Z", dst: "X", srcPrefix: "/c/", dstPrefix: "/c/"}, []link{cXY}, nil},
		// The other reads only part of the image, and writes that part
		// outside this mirror's source: /b/z/ → /a/q/, then /a/q/ → /b/q/.
		{"the carried part misses the source", link{name: "s", src: "X", dst: "X", srcPrefix: "/b/z/", dstPrefix: "/a/q/"}, []link{ab}, nil},
		{"a cycle of three", link{name: "ca", src: "X", dst: "X", srcPrefix: "/c/", dstPrefix: "/a/"}, []link{
			{name: "bc", src: "X", dst: "X", srcPrefix: "/b/", dstPrefix: "/c/"}, ab}, []string{"ab", "bc"}},
		{"three clusters round", link{name: "zx", src: "Z", dst: "X", srcPrefix: "/p/", dstPrefix: "/p/"}, []link{
			{name: "yz", src: "Y", dst: "Z", srcPrefix: "/p/", dstPrefix: "/p/"}, {name: "xy", src: "X", dst: "Y", srcPrefix: "/p/", dstPrefix: "/p/"}}, []string{"xy", "yz"}},
		{"a dead end before the way back", link{name: "ca", src: "X", dst: "X", srcPrefix: "/c/", dstPrefix: "/a/"}, []link{
			{name: "dead", src: "X", dst: "Y", srcPrefix: "/a/", dstPrefix: "/z/"}, ab, {name: "bc", src: "X", dst: "X", srcPrefix: "/b/", dstPrefix: "/c/"}}, []string{"ab", "bc"}},
		{"mirrors feeding each other elsewhere", link{name: "s", src: "X", dst: "Y", srcPrefix: "/s/", dstPrefix: "/t/"}, []link{
			{name: "p", src: "Y", dst: "Y", srcPrefix: "/t/", dstPrefix: "/u/"}, {name: "q", src: "Y", dst: "Y", srcPrefix: "/u/", dstPrefix: "/t/v/"}}, nil},
	} {
		path, ok := findCycle(c.self, c.others)
		if ok != (c.want != nil) {
			t.Errorf("%s: cycle %v (%v), want %v", c.name, ok, path, c.want)
			continue
		}
		var names []string
		for _, l := range path {
			names = append(names, l.name)
		}
		if strings.Join(names, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: path %v, want %v", c.name, names, c.want)
		}
	}
}

// TestCycleError names this mirror and every mirror of the cycle, and
// wraps ErrRefused.
func TestCycleError(t *testing.T) {
	self := link{name: "c-yx", src: "Y", dst: "X", srcPrefix: "/c/", dstPrefix: "/c/"}
	err := cycleError(self, []link{{name: "c-xy", src: "X", dst: "Y", srcPrefix: "/c/", dstPrefix: "/c/"}})
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("%v does not wrap ErrRefused", err)
	}
	for _, want := range []string{`mirror "c-yx"`, `mirror "c-xy"`, "cycle", `"\x00understudy/mirror/c-xy/"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: want it to say %q", err, want)
		}
	}
	if err := cycleError(link{src: "X", dst: "X", srcPrefix: "/a/", dstPrefix: "/a/b/"}, nil); !strings.Contains(err.Error(), "same cluster") {
		t.Errorf("a mirror into its own source prefix: %v, want it to say so", err)
	}
}

// TestFeedersOf: the feeders are the mirrors writing into the source
// under the prefix, never this mirror itself.
func TestFeedersOf(t *testing.T) {
	mr := &mirror{cfg: Config{Settings: core.Settings{Name: "me", Prefix: "/a/"}}, sourceID: "X", destID: "Y"}
	links := []link{
		{name: "in", src: "Z", dst: "X", srcPrefix: "/", dstPrefix: "/a/z/"},
		{name: "wide", src: "Z", dst: "X", srcPrefix: "/", dstPrefix: ""},
		{name: "beside", src: "Z", dst: "X", srcPrefix: "/", dstPrefix: "/b/"},
		{name: "into-dest", src: "Z", dst: "Y", srcPrefix: "/", dstPrefix: "/a/"},
	}
	got := mr.feedersOf(links)
	if len(got) != 2 || got[0].name != "in" || got[1].name != "wide" {
		t.Fatalf("feeders %v, want in and wide", got)
	}
	same := &mirror{cfg: Config{Settings: core.Settings{Name: "me", Prefix: "/a/"}}, sourceID: "X", destID: "X"}
	if got := same.feedersOf([]link{{name: "me", src: "X", dst: "X", srcPrefix: "/a/", dstPrefix: "/a/"}}); len(got) != 0 {
		t.Fatalf("a mirror is its own feeder: %v", got)
	}
}
