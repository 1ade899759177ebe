package replica

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/understudy-kv/understudy/learner"
)

var (
	// ErrNoCluster means neither --join nor --upstream was given and the
	// data dir holds no replica to restart: a replica joins only a cluster
	// it is told, never one that happens to answer on 127.0.0.1:2379.
	ErrNoCluster = errors.New("replica: no cluster given")
	// ErrDataDirKind means the data dir holds the other kind of replica: a
	// member (a learner replica's, or an etcd member's) for a cascaded
	// replica, or a cascaded replica's store for a learner replica.
	ErrDataDirKind = errors.New("replica: a data dir of the other kind")
)

// What each kind keeps in its data dir: etcd's member/ for a learner
// replica (and any etcd member); for a cascaded replica, package cascade's
// store/ (a one-member etcd of its own) and the snapshot it was restored
// from.
const memberDir = "member"

var storeEntries = []string{"store", "bootstrap.snapshot"}

// checkDataDirKind refuses a data dir that holds the other kind of replica,
// before anything is read, added or written: a learner replica started on a
// cascaded replica's data dir (or the reverse) would put a second, unrelated
// store beside the first, and which of the two a restart serves would
// depend on the flags it is given.
//
// cascaded says the replica to start is a cascaded one, join that it was
// given --join.
func checkDataDirKind(dataDir string, cascaded, join bool) error {
	if cascaded {
		found, err := existing(dataDir, memberDir)
		if err != nil || found == "" {
			return err
		}
		return fmt.Errorf("%w: --data-dir %s holds an etcd member (%s), a learner replica's or a voter's, and --upstream makes a cascaded replica, which keeps a store of its own; give the cascaded replica another --data-dir, or start that member as it was (--join); nothing was changed",
			ErrDataDirKind, dataDir, found)
	}
	found, err := existing(dataDir, storeEntries...)
	if err != nil || found == "" {
		return err
	}
	what := "--join makes a learner replica"
	if !join {
		what = "with no --upstream the replica is a learner replica"
	}
	return fmt.Errorf("%w: --data-dir %s holds a cascaded replica's store (%s), and %s, a member of the cluster; restart the cascaded replica with --upstream, give this one another --data-dir, or, if that cascaded replica is gone for good, remove %s (it is a copy, built again from an upstream); nothing was changed",
		ErrDataDirKind, dataDir, found, what, strings.Join(storePaths(dataDir), " and "))
}

// existing returns the first of names that exists in dir, as a path; ""
// if none does.
func existing(dir string, names ...string) (string, error) {
	for _, n := range names {
		p := filepath.Join(dir, n)
		_, err := os.Lstat(p)
		switch {
		case err == nil:
			return p, nil
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("replica: --data-dir %s: %w", dir, err)
		}
	}
	return "", nil
}

func storePaths(dir string) []string {
	var out []string
	for _, n := range storeEntries {
		out = append(out, filepath.Join(dir, n))
	}
	return out
}

// joinFromDataDir is --join when none is given: a restart, whose data dir
// holds this replica's member, asks the members that member last knew (the
// member list in its backend). A data dir that holds none refuses at once,
// before anything is dialled or added.
func joinFromDataDir(dataDir string) ([]string, error) {
	stored, held, err := learner.ReadDataDir(dataDir)
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	if !held {
		return nil, fmt.Errorf("%w: give --join, the client URLs of the cluster's voters (such as --join https://10.0.0.1:2379,https://10.0.0.2:2379), or --upstream for a cascaded replica; only a restart, on a --data-dir that holds this replica's member, may leave both out, and %s holds none; nothing was added",
			ErrNoCluster, dataDir)
	}
	urls, err := learner.StoredClientURLs(dataDir, stored.ID)
	if err != nil {
		return nil, fmt.Errorf("%w: no --join, and the member list of member %x in the data dir cannot be read: %w; give --join", ErrNoCluster, stored.ID, err)
	}
	if len(urls) == 0 {
		return nil, fmt.Errorf("%w: no --join, and member %x in --data-dir %s knows no other member's client URLs; give --join, the client URLs of the cluster's voters",
			ErrNoCluster, stored.ID, dataDir)
	}
	return urls, nil
}
