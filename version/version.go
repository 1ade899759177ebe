// Package version is understudy's own version and source revision, as Go
// stamps them into every binary it builds in a git checkout
// (runtime/debug.ReadBuildInfo): the module's version from the commit's
// tag, and the commit. Nothing is set by hand or by -ldflags:
//
//   - go build and go install in a checkout, and scripts/release.sh: the tag
//     (v0.4.0) on a tagged commit, a pseudo-version after the last tag
//     (v0.4.1-0.20261129010106-975af4915411) on another, "+dirty" appended
//     to both the version and the commit when the tree had changes
//     (untracked files too);
//   - go install github.com/understudy-kv/understudy/cmd/replica@v0.4.0: the
//     version, but no commit (a module download has no git history);
//   - go run, go test, a build with -buildvcs=false (or GOFLAGS holding it),
//     a build outside a checkout: "(devel)" and no commit; go run
//     -buildvcs=true stamps.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	etcdversion "go.etcd.io/etcd/api/v3/version"
)

// Devel is the version of a binary Go did not stamp (its own word).
const Devel = "(devel)"

// Unknown is the revision of a binary Go did not stamp with a commit.
const Unknown = "unknown"

// Info is understudy's version and revision as a binary carries them.
type Info struct {
	// Version is the module's version: a tag, a pseudo-version, with
	// "+dirty" for a modified tree; or Devel.
	Version string
	// Revision is the git commit, with "+dirty" for a modified tree; or
	// Unknown.
	Revision string
}

// Read is this binary's Info.
func Read() Info { return FromBuildInfo(debug.ReadBuildInfo()) }

// FromBuildInfo is the Info that bi (ok: bi was read) carries.
func FromBuildInfo(bi *debug.BuildInfo, ok bool) Info {
	in := Info{Version: Devel, Revision: Unknown}
	if !ok || bi == nil {
		return in
	}
	if bi.Main.Version != "" {
		in.Version = bi.Main.Version
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" {
		in.Revision = rev
		if dirty {
			in.Revision += "+dirty"
		}
	}
	return in
}

// String is what --version prints: understudy's version and revision, the
// etcd it embeds, and Go's, in etcd's own --version layout.
func String() string { return Read().String() }

// String is in's --version text.
func (in Info) String() string {
	return fmt.Sprintf("understudy Version: %s\nGit SHA: %s\netcd Version: %s\nGo Version: %s\nGo OS/Arch: %s/%s\n",
		in.Version, in.Revision, etcdversion.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
