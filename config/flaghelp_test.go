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
	r, m := DefaultReplica(), DefaultMirror()
	for _, fs := range []*flag.FlagSet{NewReplicaFlags(&r), NewMirrorFlags(&m)} {
		fs.VisitAll(func(f *flag.Flag) {
			if len(f.Usage) > maxFlagHelp {
				t.Errorf("%s --%s: help of %d characters, want at most %d (put the detail in docs/)", fs.Name(), f.Name, len(f.Usage), maxFlagHelp)
			}
		})
	}
}
