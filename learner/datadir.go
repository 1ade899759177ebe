package learner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	etcdmembership "go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/etcd/server/v3/storage/datadir"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"google.golang.org/protobuf/proto"

	"github.com/understudy-kv/understudy/membership"
)

// Self is the replica that starts: the flags its checks and errors name.
type Self struct {
	// Name is --name.
	Name string
	// PeerURLs are --initial-advertise-peer-urls.
	PeerURLs []string
	// DataDir is --data-dir.
	DataDir string
	// Join are the --join client URLs.
	Join []string
	// ReplaceOwnLearner is --replace-own-learner: with no member in the
	// data dir, a learner listed under Name at exactly PeerURLs is this
	// replica's own entry whose data was lost; it is removed and the
	// replica joins anew. Never a voter.
	ReplaceOwnLearner bool
}

// Stored is the member a data dir holds, as etcd recorded it in the
// metadata at the head of every WAL file when the member first started.
type Stored struct {
	ID, ClusterID uint64
}

// HasData reports whether dataDir already holds an etcd member (a WAL, by
// etcd's own test), in which case the replica restarts as that member.
func HasData(dataDir string) bool { return wal.Exist(walDir(dataDir)) }

func walDir(dataDir string) string { return filepath.Join(dataDir, "member", "wal") }

// ReadDataDir returns the member dataDir holds without starting it; ok is
// false when it holds none.
func ReadDataDir(dataDir string) (s Stored, ok bool, err error) {
	dir := walDir(dataDir)
	names, err := fileutil.ReadDir(dir, fileutil.WithExt(".wal"))
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(names) == 0) {
		return Stored{}, false, nil
	}
	if err != nil {
		return Stored{}, false, fmt.Errorf("learner: --data-dir %s: %w", dataDir, err)
	}
	// Every WAL file begins with the same metadata record; the first file
	// is enough.
	path := filepath.Join(dir, names[0])
	f, err := os.Open(path)
	if err != nil {
		return Stored{}, false, fmt.Errorf("learner: --data-dir %s: %w", dataDir, err)
	}
	defer f.Close()
	dec := wal.NewDecoder(fileutil.NewFileReader(f))
	for rec := (&walpb.Record{}); ; {
		if err := dec.Decode(rec); err != nil {
			return Stored{}, false, fmt.Errorf("learner: --data-dir %s: no member metadata in %s: %w", dataDir, path, err)
		}
		if rec.GetType() != wal.MetadataType {
			continue
		}
		var md etcdserverpb.Metadata
		if err := proto.Unmarshal(rec.GetData(), &md); err != nil {
			return Stored{}, false, fmt.Errorf("learner: --data-dir %s: member metadata in %s: %w", dataDir, path, err)
		}
		return Stored{ID: md.GetNodeID(), ClusterID: md.GetClusterID()}, true, nil
	}
}

// StoredClientURLs are the client URLs of the cluster's members as the
// member dataDir holds (self, its ID) last applied its member list: the
// voters' other than its own, or, with none, the other members'. It reads
// etcd's backend read-only, without starting the member; a data dir in use
// by a running member (its lock held) is an error after a second.
func StoredClientURLs(dataDir string, self uint64) ([]string, error) {
	path := datadir.ToBackendFileName(dataDir)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("learner: --data-dir %s: no member list: %w", dataDir, unwrapPath(err))
	}
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("learner: --data-dir %s is in use (is a replica already running on it?)", dataDir)
	}
	if err != nil {
		return nil, fmt.Errorf("learner: --data-dir %s: %w", dataDir, err)
	}
	defer db.Close()
	var voters, others []string
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(schema.Members.Name())
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			var m etcdmembership.Member
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("member list: %w", err)
			}
			switch {
			case uint64(m.ID) == self:
			case m.IsLearner:
				others = append(others, m.ClientURLs...)
			default:
				voters = append(voters, m.ClientURLs...)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("learner: --data-dir %s: %w", dataDir, err)
	}
	if len(voters) == 0 {
		voters = others
	}
	slices.Sort(voters)
	return slices.Compact(voters), nil
}

func unwrapPath(err error) error {
	if pe := (*os.PathError)(nil); errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Verdict is what a replica does with its data dir at start.
type Verdict int

const (
	// VerdictJoin: the data dir holds no member; join as a new learner (or
	// take over the entry an interrupted first start added).
	VerdictJoin Verdict = iota
	// VerdictRestart: the data dir holds a member of this cluster, listed
	// under this name; restart as it.
	VerdictRestart
	// VerdictDiscard: the data dir holds a learner of this cluster that
	// never started (the cluster lists it without a name: it never
	// published itself, so it never served). The data dir holds nothing
	// anyone read; drop it and join again, reusing or removing the entry.
	VerdictDiscard
)

// CheckDataDir decides what self does with the member its data dir holds
// (held false: none), given the ID and member list of the cluster --join
// answered for. A data dir of another cluster, of a member the cluster no
// longer lists, or of a member under another name is refused: started, it
// would serve another cluster's data, or a second copy of another member,
// under this cluster's name.
func CheckDataDir(self Self, s Stored, held bool, clusterID uint64, members []*etcdserverpb.Member) (Verdict, error) {
	if !held {
		return VerdictJoin, nil
	}
	if s.ClusterID != clusterID {
		return 0, fmt.Errorf("%w: --data-dir %s holds member %x of cluster %x, but --join %s is cluster %x; give this cluster's data dir, an empty --data-dir, or (after the voters were restored from a snapshot) --replace-stale-data-dir=%x, which moves the old member aside, to join as a new learner",
			ErrForeignDataDir, self.DataDir, s.ID, s.ClusterID, joinList(self.Join), clusterID, clusterID)
	}
	i := slices.IndexFunc(members, func(m *etcdserverpb.Member) bool { return m.ID == s.ID })
	if i < 0 {
		return 0, fmt.Errorf("%w: --data-dir %s holds member %x, which cluster %x no longer lists (removed by `replica leave`, --remove-on-exit or a failed join); start with --replace-stale-data-dir=%x (it moves the old member aside), or give an empty --data-dir, to join again as a new learner",
			ErrRemovedMember, self.DataDir, s.ID, clusterID, clusterID)
	}
	m := members[i]
	switch {
	case m.Name == "" && m.IsLearner && !membership.SamePeerURLs(m.PeerURLs, self.PeerURLs):
		// Perhaps another replica's first start, under way with a copy
		// of this data dir: not this replica's to drop or remove.
		return 0, fmt.Errorf("%w: --data-dir %s holds learner %x, which never started, with peer URLs %v, not this replica's %v; if no replica is starting with it, remove it with `replica leave --endpoints %s %x`, or start with --initial-advertise-peer-urls %s",
			ErrOtherMembersDataDir, self.DataDir, m.ID, m.PeerURLs, self.PeerURLs, joinList(self.Join), m.ID, joinList(m.PeerURLs))
	case m.Name == "" && m.IsLearner:
		return VerdictDiscard, nil
	case m.Name != "" && m.Name != self.Name:
		return 0, fmt.Errorf("%w: --data-dir %s holds member %q (%x), not --name %q; start it with --name %q, or give another data dir",
			ErrOtherMembersDataDir, self.DataDir, m.Name, m.ID, self.Name, m.Name)
	}
	return VerdictRestart, nil
}
