// Package version is understudy's own version and source revision, set at
// link time by scripts/build-image.sh (and any release build):
//
//	go build -ldflags "-X github.com/understudy-kv/understudy/version.Version=v0.3.0 \
//	  -X github.com/understudy-kv/understudy/version.Revision=$(git rev-parse HEAD)" ./cmd/...
//
// A plain go build leaves Version at "dev" and takes the revision from the
// VCS stamp Go embeds (debug.ReadBuildInfo), when there is one.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	etcdversion "go.etcd.io/etcd/api/v3/version"
)

// Set with -ldflags -X; see the package comment.
var (
	// Version is understudy's release, such as v0.3.0.
	Version = "dev"
	// Revision is the source's git commit.
	Revision = ""
)

// Rev is Revision, or else the VCS revision Go stamped into the binary
// ("+dirty" when the tree had changes), or else "unknown".
func Rev() string {
	if Revision != "" {
		return Revision
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "+dirty"
	}
	return rev
}

// String is what --version prints: understudy's version and revision, the
// etcd it embeds, and Go's, in etcd's own --version layout.
func String() string {
	return fmt.Sprintf("understudy Version: %s\nGit SHA: %s\netcd Version: %s\nGo Version: %s\nGo OS/Arch: %s/%s\n",
		Version, Rev(), etcdversion.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
