package mirror

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/mirror/core"
)

// TestReversesOf: a mirror from this mirror's destination cluster into
// its source, over overlapping prefixes, is a reverse; one of another
// cluster pair or disjoint prefixes is not.
func TestReversesOf(t *testing.T) {
	self := link{name: "ba", src: "B", dst: "A", srcPrefix: "/p/", dstPrefix: "/p/"}
	links := []link{
		{name: "ab", src: "A", dst: "B", srcPrefix: "/p/", dstPrefix: "/p/"},
		{name: "narrow", src: "A", dst: "B", srcPrefix: "/p/x/", dstPrefix: "/p/x/"},
		{name: "disjoint-src", src: "A", dst: "B", srcPrefix: "/q/", dstPrefix: "/p/"},
		{name: "disjoint-dst", src: "A", dst: "B", srcPrefix: "/p/", dstPrefix: "/q/"},
		{name: "other-cluster", src: "C", dst: "B", srcPrefix: "/p/", dstPrefix: "/p/"},
	}
	var got []string
	for _, l := range reversesOf(self, links) {
		got = append(got, l.name)
	}
	if want := []string{"ab", "narrow"}; !slices.Equal(got, want) {
		t.Fatalf("reversesOf = %v, want %v", got, want)
	}
}

// TestDecideFailback covers the --failback decision: refused without the
// flag naming the records, refused with it unless a cutover record of the
// exact reverse exists, and recorded for restarts.
func TestDecideFailback(t *testing.T) {
	self := link{name: "ba", src: "B", dst: "A", srcPrefix: "/p/", dstPrefix: "/p/"}
	ab := link{name: "ab", src: "A", dst: "B", srcPrefix: "/p/", dstPrefix: "/p/"}
	cut := &Cutover{SourceClusterID: "A", SourcePrefix: "/p/", DestPrefix: "/p/", Revision: 42, Time: time.Unix(0, 0)}
	drained := reverseMirror{link: ab, cut: cut, owned: 7}
	undrained := reverseMirror{link: ab, owned: 7}
	otherCut := *cut
	otherCut.SourceClusterID = "C"
	narrow := reverseMirror{link: link{name: "n", src: "A", dst: "B", srcPrefix: "/p/x/", dstPrefix: "/p/x/"},
		cut: &Cutover{SourceClusterID: "A", SourcePrefix: "/p/x/", DestPrefix: "/p/x/", Revision: 9}}
	for _, c := range []struct {
		name     string
		failback bool
		cp       *Checkpoint
		found    []reverseMirror
		want     core.Failback
		refused  []string // nil: accepted
	}{
		{"no reverse, no flag: a plain mirror", false, nil, nil, core.Failback{}, nil},
		{"no reverse, flag", true, nil, nil, core.Failback{}, []string{"--failback", "nothing to fail back from"}},
		{"reverse retired after the failback", true, &Checkpoint{FailbackFrom: "ab", Adopted: true}, nil, core.Failback{From: "ab"}, nil},
		{"drained reverse, no flag", false, nil, []reverseMirror{drained}, core.Failback{},
			[]string{`mirror "ab"`, strconv.Quote(CheckpointKey("ab")), strconv.Quote(CutoverKey("ab")), strconv.Quote(ownPrefix("ab")), "7 ownership record(s)", "give --failback"}},
		{"undrained reverse, no flag: the cycle check refuses it", false, nil, []reverseMirror{undrained}, core.Failback{}, nil},
		{"undrained reverse, recorded failback, no flag", false, &Checkpoint{FailbackFrom: "ab"}, []reverseMirror{undrained}, core.Failback{},
			[]string{`mirror "ab"`, strconv.Quote(CheckpointKey("ab")), "no cutover record", "cycle", "drain", "restart it with --failback"}},
		{"restart without the flag", false, &Checkpoint{FailbackFrom: "ab", Adopted: true}, []reverseMirror{drained}, core.Failback{},
			[]string{"records a failback from it", "restart it with --failback"}},
		{"undrained reverse, flag", true, nil, []reverseMirror{undrained}, core.Failback{}, []string{"--failback needs a completed switchover", strconv.Quote(CutoverKey("ab"))}},
		{"cutover of another source", true, nil, []reverseMirror{{link: ab, cut: &otherCut}}, core.Failback{}, []string{"not the reverse", "cluster C"}},
		{"narrower reverse", true, nil, []reverseMirror{narrow}, core.Failback{}, []string{"not the reverse", `--prefix "/p/x/"`}},
		{"two reverses", true, nil, []reverseMirror{drained, narrow}, core.Failback{}, []string{"2 mirrors", `mirror "ab"`, `mirror "n"`}},
		{"another reverse than recorded", true, &Checkpoint{FailbackFrom: "old"}, []reverseMirror{drained}, core.Failback{}, []string{`failback from mirror "old"`}},
		{"first failback", true, nil, []reverseMirror{drained}, core.Failback{From: "ab", Adopt: true, CutRev: 42}, nil},
		{"restart mid-adoption", true, &Checkpoint{FailbackFrom: "ab", AdoptedThrough: "/p/3"}, []reverseMirror{drained}, core.Failback{From: "ab", Adopt: true, CutRev: 42}, nil},
		{"restart after adoption", true, &Checkpoint{FailbackFrom: "ab", Adopted: true}, []reverseMirror{drained}, core.Failback{From: "ab", CutRev: 42}, nil},
	} {
		got, err := decideFailback(self, c.failback, c.cp, c.found)
		if c.refused == nil {
			if err != nil || got != c.want {
				t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
			}
			continue
		}
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %+v, %v; want a refusal", c.name, got, err)
			continue
		}
		for _, w := range c.refused {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: refusal %q does not say %q", c.name, err, w)
			}
		}
	}
}
