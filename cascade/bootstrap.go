package cascade

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/jonboulle/clockwork"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.uber.org/zap"
)

// localPeerURL is the local member's peer URL: it has no peer, so the URL
// only names it (and its listener takes any free port).
const localPeerURL = "http://127.0.0.1:0"

// Paths under Config.Dir.
func snapshotPath(dir string) string { return filepath.Join(dir, "bootstrap.snapshot") }
func storeDir(dir string) string     { return filepath.Join(dir, "store") }

// snapshotIdleTimeout ends a snapshot that sent nothing for that long.
const snapshotIdleTimeout = 30 * time.Second

// fetchSnapshot streams u's snapshot to the file at path (through a
// temporary file, synced, then renamed), reporting the bytes received. It
// ends, failing, once the upstream sent nothing for snapshotIdleTimeout.
func fetchSnapshot(parent context.Context, clock clockwork.Clock, u *upstream, path string, progress func(int64)) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	idle := clock.AfterFunc(snapshotIdleTimeout, cancel)
	defer idle.Stop()
	rc, err := u.cli.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("cascade: snapshot of --upstream %s: %w", u.url, err)
	}
	defer rc.Close()
	report := progress
	progress = func(n int64) {
		idle.Reset(snapshotIdleTimeout)
		if report != nil {
			report(n)
		}
	}
	tmp := path + ".part"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("cascade: %w", err)
	}
	n, err := io.Copy(f, countingReader{r: rc, n: progress})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		if ctx.Err() != nil && parent.Err() == nil {
			err = fmt.Errorf("nothing received for %v: %w", snapshotIdleTimeout, err)
		}
		return fmt.Errorf("cascade: snapshot of --upstream %s (%d bytes received): %w", u.url, n, err)
	}
	return os.Rename(tmp, path)
}

// countingReader reports the bytes of each read.
type countingReader struct {
	r io.Reader
	n func(int64)
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.n != nil && n > 0 {
		c.n(int64(n))
	}
	return n, err
}

// restore makes dir a single-member etcd data dir holding the snapshot at
// snap, at exactly its revision (etcdutl's restore), then readies its
// backend for a copy that only the Applier writes (prepareBackend).
func restore(lg *zap.Logger, snap, dir, name, token string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("cascade: clearing %s: %w", dir, err)
	}
	err := snapshot.NewV3(lg.Named("restore")).Restore(snapshot.RestoreConfig{
		SnapshotPath:        snap,
		Name:                name,
		OutputDataDir:       dir,
		PeerURLs:            []string{localPeerURL},
		InitialCluster:      name + "=" + localPeerURL,
		InitialClusterToken: token,
	})
	if err != nil {
		return fmt.Errorf("cascade: restoring the upstream's snapshot: %w", err)
	}
	return prepareBackend(lg, filepath.Join(dir, "member", "snap", "db"))
}

// prepareBackend turns the local store's auth off (the front checks every
// call it serves with a copy of the source's auth: authz), and makes every restored lease last as long as a lease can: the local member
// leads its own one-member cluster, and its lessor would otherwise expire
// the source's leases by their TTLs, deleting their keys here, a local
// revision the source never made. A lease's life is the source's, told by
// the upstream (the front forwards every lease call); here a lease only
// holds keys, until the source's ends and its keys are deleted here.
func prepareBackend(lg *zap.Logger, path string) error {
	be := backend.NewDefaultBackend(lg, path)
	defer be.Close()
	atx := schema.NewAuthBackend(lg, be).BatchTx()
	atx.Lock()
	atx.UnsafeSaveAuthEnabled(false)
	atx.Unlock()
	tx := be.BatchTx()
	tx.LockOutsideApply()
	for _, l := range schema.MustUnsafeGetAllLeases(tx) {
		l.TTL, l.RemainingTTL = lease.MaxLeaseTTL, 0
		schema.MustUnsafePutLease(tx, l)
	}
	tx.Unlock()
	be.ForceCommit()
	return nil
}
