package core

import (
	"encoding/json"
	"strings"
	"time"
)

// ReservedPrefix holds the mirrors' own keys in a destination: checkpoints,
// ownership records and lease mappings. It sorts before every printable
// key; mirrored keys under it are never deleted or compared.
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
	// unless --reset-policy.
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
	// FailbackFrom names the mirror this one fails back from (--failback);
	// AdoptedThrough is the last of that mirror's ownership records whose
	// destination key the adoption is done with, and Adopted says the
	// adoption is complete.
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

// Encode is the checkpoint as stored.
func (c Checkpoint) Encode() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// Reserved reports the mirrors' own keys, never copied, deleted or
// compared.
func Reserved(k []byte) bool { return strings.HasPrefix(string(k), ReservedPrefix) }

// Mapping maps source keys under Prefix to destination keys under
// DestPrefix.
type Mapping struct{ Prefix, DestPrefix string }

// Map is a source key's name in the destination.
func (m Mapping) Map(k []byte) string {
	return m.DestPrefix + strings.TrimPrefix(string(k), m.Prefix)
}

// Unmap is a destination key's name in the source.
func (m Mapping) Unmap(k []byte) string {
	return m.Prefix + strings.TrimPrefix(string(k), m.DestPrefix)
}
