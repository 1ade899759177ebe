package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ReservedPrefix holds the mirrors' own keys in a destination: checkpoints,
// ownership records and lease mappings. It sorts before every printable key; mirrored keys
// under it are never deleted or compared.
const ReservedPrefix = "\x00understudy/mirror/"

// Phases of a checkpoint.
const (
	// PhaseSync: a full copy at Revision is under way; every source key up
	// to SyncedThrough is copied.
	PhaseSync = "sync"
	// PhaseStream: every source revision up to Revision is applied.
	PhaseStream = "stream"
)

// Checkpoint is what a mirror keeps in the destination, written in the
// same transaction as the changes it accounts for, so that the two never
// disagree: a crash at any point neither loses nor repeats a revision.
type Checkpoint struct {
	SourceClusterID string `json:"source_cluster_id"`
	SourcePrefix    string `json:"source_prefix"`
	DestPrefix      string `json:"dest_prefix"`
	// Policy is what the mirror does to destination keys it did not write
	// ("keep", "overwrite" or "prune"; see Policy); "" in checkpoints
	// written before it was recorded. A restart with another is refused
	// unless Config.ResetPolicy (policy.go).
	Policy   string `json:"policy,omitempty"`
	Phase    string `json:"phase"`
	Revision int64  `json:"revision"`
	// SyncedThrough is the last source key copied (PhaseSync only).
	SyncedThrough string `json:"synced_through,omitempty"`
	// From is the first source revision the write carrying this checkpoint
	// covered (PhaseStream): successive checkpoints chain From = previous
	// Revision + 1, which is how a reader proves no revision was applied
	// twice or skipped.
	From int64 `json:"from,omitempty"`
	// Fresh marks a first sync into an image that held no key of this
	// mirror: every key the mirror owns then was copied at a revision the
	// watch continues from, so there is nothing to sweep.
	Fresh bool `json:"fresh,omitempty"`
	// Resyncs counts full syncs after the first (the source compacted past
	// the checkpoint).
	Resyncs int `json:"resyncs,omitempty"`
	// FailbackFrom names the mirror this one fails back from (--failback,
	// failback.go); AdoptedThrough is the last of that mirror's ownership
	// records whose destination key the adoption is done with, and Adopted
	// says the adoption is complete.
	FailbackFrom   string `json:"failback_from,omitempty"`
	AdoptedThrough string `json:"adopted_through,omitempty"`
	Adopted        bool   `json:"adopted,omitempty"`
	// Token is the writing process's own random token: after a write whose
	// outcome it did not learn, a mirror that finds its own token knows the
	// write landed, and one that finds another's knows another mirror
	// writes here.
	Token   string    `json:"token,omitempty"`
	Updated time.Time `json:"updated"`
}

// CheckpointKey is where the mirror named name keeps its checkpoint.
func CheckpointKey(name string) string { return ReservedPrefix + name + "/checkpoint" }

func leaseKeyPrefix(name string) string { return ReservedPrefix + name + "/lease/" }

func (c Checkpoint) encode() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// ReadCheckpoint returns the checkpoint of the mirror named name and the
// revision it was last written at; nil if there is none.
func ReadCheckpoint(ctx context.Context, dst *clientv3.Client, name string, opts ...clientv3.OpOption) (*Checkpoint, int64, error) {
	resp, err := dst.Get(ctx, CheckpointKey(name), opts...)
	if err != nil {
		return nil, 0, fmt.Errorf("mirror: reading checkpoint %q: %w", CheckpointKey(name), err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	var c Checkpoint
	if err := json.Unmarshal(resp.Kvs[0].Value, &c); err != nil {
		return nil, 0, fmt.Errorf("mirror: checkpoint %q is not a mirror checkpoint: %w", CheckpointKey(name), err)
	}
	return &c, resp.Kvs[0].ModRevision, nil
}

// allCheckpoints lists every mirror's checkpoint in a cluster, by name,
// and the revision of the first read: every checkpoint that existed then
// (and still does) is listed. It reads one key per mirror and jumps over
// the rest of the mirror's keys (its ownership records can be many): two
// small reads per mirror.
func allCheckpoints(ctx context.Context, cli *clientv3.Client) (map[string]Checkpoint, int64, error) {
	out := map[string]Checkpoint{}
	from, end := span(ReservedPrefix)
	var rev int64
	for {
		resp, err := cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(1))
		if err != nil {
			return nil, 0, fmt.Errorf("mirror: listing checkpoints: %w", err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		if len(resp.Kvs) == 0 {
			return out, rev, nil
		}
		key := string(resp.Kvs[0].Key)
		name, _, ok := strings.Cut(strings.TrimPrefix(key, ReservedPrefix), "/")
		if !ok {
			from = key + "\x00"
			continue
		}
		// Past every key of name: '0' follows '/'.
		from = ReservedPrefix + name + "0"
		cp, err := cli.Get(ctx, CheckpointKey(name))
		if err != nil {
			return nil, 0, fmt.Errorf("mirror: reading checkpoint %q: %w", CheckpointKey(name), err)
		}
		var c Checkpoint
		if len(cp.Kvs) > 0 && json.Unmarshal(cp.Kvs[0].Value, &c) == nil {
			out[name] = c
		}
	}
}

// overlap reports whether the key ranges of two prefixes intersect: one
// is a prefix of the other.
func overlap(a, b string) bool {
	return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
}
