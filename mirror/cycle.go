package mirror

import (
	"fmt"
	"strings"
)

// Cycles. Mirrors that feed each other write without end: a mirror of /b/
// into /a/x/ beside one of /a/ into /b/ (one cluster), or two clusters
// mirroring /c/ into each other, each copy the other's writes back, and
// the keys (or revisions) grow until the clusters run out of space. A
// mirror therefore refuses to start, and stops, when the keys it writes
// would come back into its own source through mirrors whose checkpoints it
// can read: those in its destination (they write there) and those in its
// source (they write there). The decision is findCycle's, on link values;
// cycleCheck (cyclecheck.go) reads the checkpoints.

// link is one mirror as the cycle check sees it: it copies the keys under
// srcPrefix of cluster src to dstPrefix of cluster dst (cluster IDs as
// checkpoints record them). A checkpoint names its source; its destination
// is the cluster it is kept in.
type link struct {
	name                 string
	src, dst             string
	srcPrefix, dstPrefix string
}

// region is the keys under prefix in one cluster.
type region struct{ cluster, prefix string }

// carry is where the keys of r that l copies land: nothing if l does not
// read r. Keys under the longer of r's prefix and l's source prefix (one
// is a prefix of the other) land under l's destination prefix with l's
// source prefix replaced.
func (l link) carry(r region) (region, bool) {
	if r.cluster != l.src || !overlap(r.prefix, l.srcPrefix) {
		return region{}, false
	}
	longer := r.prefix
	if len(l.srcPrefix) > len(longer) {
		longer = l.srcPrefix
	}
	return region{cluster: l.dst, prefix: l.dstPrefix + longer[len(l.srcPrefix):]}, true
}

// findCycle reports whether keys that self writes come back into self's
// source, and through which of others, in order (none: self alone, its
// source and destination the same cluster with overlapping prefixes). It
// follows each chain of mirrors from self's image, each mirror at most
// once per chain; others are the few mirrors whose checkpoints self can
// read, so the walk stays small.
func findCycle(self link, others []link) ([]link, bool) {
	home := region{cluster: self.src, prefix: self.srcPrefix}
	used := make([]bool, len(others))
	var path []link
	var walk func(r region) bool
	walk = func(r region) bool {
		if r.cluster == home.cluster && overlap(r.prefix, home.prefix) {
			return true
		}
		for i, o := range others {
			if used[i] {
				continue
			}
			next, ok := o.carry(r)
			if !ok {
				continue
			}
			used[i] = true
			path = append(path, o)
			if walk(next) {
				return true
			}
			used[i] = false
			path = path[:len(path)-1]
		}
		return false
	}
	if walk(region{cluster: self.dst, prefix: self.dstPrefix}) {
		return path, true
	}
	return nil, false
}

// describe names a mirror and what it copies, for refusals.
func (l link) describe() string {
	return fmt.Sprintf("mirror %q (cluster %s %s → cluster %s %s)", l.name, l.src, prefixName(l.srcPrefix), l.dst, prefixName(l.dstPrefix))
}

func prefixName(p string) string {
	if p == "" {
		return "every key"
	}
	return fmt.Sprintf("%q", p)
}

// cycleError is the refusal of self, naming every mirror of the cycle.
func cycleError(self link, path []link) error {
	if len(path) == 0 {
		return fmt.Errorf("%w: source and destination are the same cluster (%s) and the prefixes overlap (--prefix %q, destination prefix %q): the mirror would copy its own writes; use a destination prefix outside the source prefix, or another cluster",
			ErrRefused, self.src, self.srcPrefix, self.dstPrefix)
	}
	names := make([]string, len(path))
	chain := make([]string, len(path))
	for i, l := range path {
		names[i] = fmt.Sprintf("mirror %q", l.name)
		chain[i] = l.describe()
	}
	return fmt.Errorf("%w: %s would form a mirror cycle with %s: what it writes, %s copies back into its source, and each would copy the other's writes without end; "+
		"use a destination prefix that %s does not read, or a --prefix that %s does not write into; if %s is retired for good, delete its keys under %q in cluster %s",
		ErrRefused, self.describe(), strings.Join(names, ", then "), strings.Join(chain, ", then "),
		names[0], names[len(names)-1], names[0], ReservedPrefix+path[0].name+"/", path[0].dst)
}
