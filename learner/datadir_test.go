package learner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"
)

func TestReadDataDir(t *testing.T) {
	dir := t.TempDir()
	if _, held, err := ReadDataDir(dir); held || err != nil {
		t.Fatalf("empty data dir: held %v, %v", held, err)
	}
	if HasData(dir) {
		t.Fatal("HasData on an empty data dir")
	}
	id, cid := uint64(0xabc), uint64(0xdef)
	md, err := proto.Marshal(&etcdserverpb.Metadata{NodeID: &id, ClusterID: &cid})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	w, err := wal.Create(zaptest.NewLogger(t), walDir(dir), md)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s, held, err := ReadDataDir(dir)
	if err != nil || !held || s != (Stored{ID: id, ClusterID: cid}) {
		t.Fatalf("ReadDataDir = %+v, %v, %v; want member %x of cluster %x", s, held, err, id, cid)
	}
	if !HasData(dir) {
		t.Fatal("HasData false on a data dir with a WAL")
	}
}

func TestCheckDataDir(t *testing.T) {
	self := Self{Name: "r1", PeerURLs: []string{"http://p1"}, DataDir: "/data/r1", Join: []string{"http://v1:2379"}}
	members := []*etcdserverpb.Member{
		{ID: 1, Name: "v1"},
		{ID: 2, Name: "r1", IsLearner: true},
		{ID: 3, IsLearner: true, PeerURLs: []string{"http://p1"}},
		{ID: 4, Name: "r2", IsLearner: true},
		{ID: 6, IsLearner: true, PeerURLs: []string{"http://p2"}},
	}
	for _, tc := range []struct {
		name    string
		stored  Stored
		held    bool
		want    Verdict
		wantErr error
		says    []string
	}{
		{name: "no member", want: VerdictJoin},
		{name: "this member", stored: Stored{ID: 2, ClusterID: 9}, held: true, want: VerdictRestart},
		{name: "never started", stored: Stored{ID: 3, ClusterID: 9}, held: true, want: VerdictDiscard},
		{name: "never started, other peer URLs", stored: Stored{ID: 6, ClusterID: 9}, held: true, wantErr: ErrOtherMembersDataDir,
			says: []string{"learner 6", "http://p2", "replica leave --endpoints http://v1:2379 6"}},
		{name: "other cluster", stored: Stored{ID: 2, ClusterID: 8}, held: true, wantErr: ErrForeignDataDir,
			says: []string{"cluster 8", "is cluster 9", "/data/r1", "--join http://v1:2379"}},
		{name: "removed", stored: Stored{ID: 5, ClusterID: 9}, held: true, wantErr: ErrRemovedMember, says: []string{"member 5", "/data/r1"}},
		{name: "another replica's", stored: Stored{ID: 4, ClusterID: 9}, held: true, wantErr: ErrOtherMembersDataDir, says: []string{`"r2"`, `--name "r1"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := CheckDataDir(self, tc.stored, tc.held, 9, members)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				for _, s := range tc.says {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("%v does not say %q", err, s)
					}
				}
				return
			}
			if err != nil || v != tc.want {
				t.Fatalf("CheckDataDir = %v, %v; want %v", v, err, tc.want)
			}
		})
	}
}
