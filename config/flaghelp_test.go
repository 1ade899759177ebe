package config

import (
	"flag"
	"testing"
)

// maxFlagHelp is the longest a flag's help may be: the detail belongs in
// docs/, which the help names.
const maxFlagHelp = 200

// Every flag's help is at most maxFlagHelp characters.
func TestFlagHelpIsShort(t *testing.T) {
	// The primary's flags are etcd's, with etcd's own help.
	r, m, a := DefaultReplica(), DefaultMirror(), Admin{}
	for _, fs := range []*flag.FlagSet{NewReplicaFlags(&r), NewMirrorFlags(&m), NewAdminFlags(&a, "hold")} {
		fs.VisitAll(func(f *flag.Flag) {
			if len(f.Usage) > maxFlagHelp {
				t.Errorf("%s --%s: help of %d characters, want at most %d (put the detail in docs/)", fs.Name(), f.Name, len(f.Usage), maxFlagHelp)
			}
		})
	}
}
