package loopback

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Etcd36Version is the previous etcd minor release, which replicas must
// work beside (KindEtcd36).
const Etcd36Version = "v3.6.8"

// Bins holds the absolute paths of the binaries a topology runs.
type Bins struct {
	Etcd    string // stock etcd (KindEtcd); "" if none
	Etcdctl string // stock etcdctl; "" if none
	Primary string // cmd/primary (KindPrimary)
	Replica string // cmd/replica; see RequireReplica
	// Etcd36, if set, returns the path of stock etcd Etcd36Version
	// (KindEtcd36), or why there is none (the test harness builds it).
	Etcd36 func() (string, error)
	// Missing says where the replica binary was looked for, for
	// RequireReplica's message.
	Missing string
}

// RequireReplica returns an error when there is no replica binary, saying
// where it was looked for (a test fails on it rather than skip, so that a
// missing command is never mistaken for a pass).
func (b *Bins) RequireReplica() error {
	if b.Replica == "" {
		return fmt.Errorf("loopback: this needs the replica binary, but there is none (%s)", b.Missing)
	}
	return nil
}

// Installed returns the binaries of an installation: self (the running
// replica) as the replica, and primary, etcd and etcdctl from the same
// directory when they are there, else from $PATH. ok is false when no
// primary is found.
func Installed(self string) (b Bins, ok bool) {
	dir := filepath.Dir(self)
	b = Bins{Replica: self}
	for _, tg := range []struct {
		dst  *string
		name string
	}{{&b.Primary, "primary"}, {&b.Etcd, "etcd"}, {&b.Etcdctl, "etcdctl"}} {
		p := filepath.Join(dir, tg.name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			*tg.dst = p
		} else if p, err := exec.LookPath(tg.name); err == nil {
			*tg.dst, _ = filepath.Abs(p)
		}
	}
	return b, b.Primary != ""
}
