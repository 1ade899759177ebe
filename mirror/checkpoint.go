package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/understudy-kv/understudy/mirror/core"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ReservedPrefix holds the mirrors' own keys in a destination: checkpoints,
// ownership records and lease mappings. It sorts before every printable key; mirrored keys
// under it are never deleted or compared.
const ReservedPrefix = core.ReservedPrefix

// Phases of a checkpoint (see core).
const (
	PhaseSync   = core.PhaseSync
	PhaseStream = core.PhaseStream
)

// Checkpoint is what a mirror keeps in the destination, written in the
// same transaction as the changes it accounts for (core.Checkpoint).
type Checkpoint = core.Checkpoint

// CheckpointKey is where the mirror named name keeps its checkpoint.
func CheckpointKey(name string) string { return ReservedPrefix + name + "/checkpoint" }

func leaseKeyPrefix(name string) string { return ReservedPrefix + name + "/lease/" }

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
