package learner

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/datadir"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// writeMembers writes members into dataDir's backend as etcd's apply does.
func writeMembers(t *testing.T, dataDir string, ms ...*membership.Member) backend.Backend {
	t.Helper()
	path := datadir.ToBackendFileName(dataDir)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	lg := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	be := backend.NewDefaultBackend(lg, path)
	tx := be.BatchTx()
	tx.Lock()
	tx.UnsafeCreateBucket(schema.Members)
	tx.UnsafeCreateBucket(schema.MembersRemoved)
	tx.Unlock()
	mb := schema.NewMembershipBackend(lg, be)
	for _, m := range ms {
		mb.MustSaveMemberToBackend(m)
	}
	be.ForceCommit()
	return be
}

func member(id uint64, learner bool, clientURLs ...string) *membership.Member {
	return &membership.Member{ID: types.ID(id), RaftAttributes: membership.RaftAttributes{PeerURLs: []string{"http://p:1"}, IsLearner: learner},
		Attributes: membership.Attributes{Name: "m", ClientURLs: clientURLs}}
}

func TestStoredClientURLs(t *testing.T) {
	dir := t.TempDir()
	be := writeMembers(t, dir,
		member(1, false, "http://v1:2379"), member(2, false, "http://v2:2379", "http://v2b:2379"),
		member(3, true, "http://self:2479"), member(4, true, "http://other-replica:2479"))
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := StoredClientURLs(dir, 3)
	if want := []string{"http://v1:2379", "http://v2:2379", "http://v2b:2379"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("StoredClientURLs = %v, %v; want the voters' %v", got, err, want)
	}

	// No voter left in the list: the other replicas, never itself.
	only := t.TempDir()
	be = writeMembers(t, only, member(3, true, "http://self:2479"), member(4, true, "http://other-replica:2479"))
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := StoredClientURLs(only, 3); err != nil || !slices.Equal(got, []string{"http://other-replica:2479"}) {
		t.Fatalf("StoredClientURLs = %v, %v; want the other replica's", got, err)
	}

	// No backend at all (a first start that died before it wrote one).
	if _, err := StoredClientURLs(t.TempDir(), 3); err == nil || !strings.Contains(err.Error(), "no member list") {
		t.Fatalf("no backend: %v", err)
	}
}

// A data dir a running member holds is refused, not read under it.
func TestStoredClientURLsInUse(t *testing.T) {
	dir := t.TempDir()
	be := writeMembers(t, dir, member(1, false, "http://v1:2379"))
	defer be.Close()
	if _, err := StoredClientURLs(dir, 3); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a backend held open: %v", err)
	}
}
