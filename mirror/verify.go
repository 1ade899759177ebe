package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/understudy-kv/understudy/mirror/core"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Difference is one key on which source and destination disagree.
type Difference struct {
	// Key is the source key (the destination key for "extra").
	Key string
	// Kind is "missing" (in the source, not the destination), "extra" (in
	// the destination, not the source), "value" (both, different values),
	// "conflict" (both, different values, and the mirror did not write the
	// destination key, so it leaves it alone) or "unowned" (a destination
	// key the mirror did not write, which the source does not have or has
	// with the same value: not a difference, reported apart).
	Kind string
}

// Differs is false for keys that are only reported as not the mirror's.
func (d Difference) Differs() bool { return d.Kind != "unowned" }

func (d Difference) String() string {
	switch d.Kind {
	case "missing":
		return fmt.Sprintf("missing in destination: %q", d.Key)
	case "extra":
		return fmt.Sprintf("extra in destination: %q", d.Key)
	case "conflict":
		return fmt.Sprintf("value differs, and the destination key is not the mirror's (it leaves it alone; --overwrite copies over it): %q", d.Key)
	case "unowned":
		return fmt.Sprintf("not written by the mirror (left alone): %q", d.Key)
	}
	return fmt.Sprintf("value differs: %q", d.Key)
}

// VerifyConfig says what to compare.
type VerifyConfig struct {
	Source, Dest *clientv3.Client
	// Settings are the mirror's (the same flags). Name is the mirror
	// whose checkpoint picks the source revision when Rev is 0: the
	// destination is read as of a moment its checkpoint says revision R,
	// and the source as of R, so a running mirror verifies exactly.
	// PageSize is the number of keys per read.
	core.Settings
	// CopyMirrored: the mirror copies source keys other mirrors wrote
	// into the source (Config.CopyMirrored); without it they are left out
	// of the comparison, as the mirror leaves them out of the copy.
	CopyMirrored bool
	// Cutover, with Rev 0, is the mirror's cutover record (ReadCutover):
	// while the mirror's checkpoint is still the one the drain saw, the
	// source at the record's revision is compared with the destination as
	// of the record (its DestRevision).
	Cutover *Cutover
}

// Verify compares the source at a revision with the destination through
// the prefix mapping. It returns the differences, and the destination keys
// the mirror did not write (Kind "unowned", Differs false), and the source
// revision compared.
func Verify(ctx context.Context, cfg VerifyConfig) ([]Difference, int64, error) {
	if err := cfg.Settings.Validate(); err != nil {
		return nil, 0, err
	}
	rev, drev, err := verifyRevisions(ctx, cfg)
	if err != nil {
		return nil, 0, err
	}
	fs, err := feederScanAt(ctx, cfg, rev)
	if err != nil {
		return nil, rev, err
	}
	skey, send := span(cfg.Prefix)
	dkey, dend := span(cfg.DestPrefix)
	v := &verifier{
		m:     &mirror{cfg: Config{Settings: cfg.Settings}},
		src:   &pager{cli: cfg.Source, next: skey, end: send, rev: rev, size: cfg.PageSize},
		dst:   &pager{cli: cfg.Dest, next: dkey, end: dend, rev: drev, size: cfg.PageSize},
		fs:    fs,
		owned: newOwnScan(cfg.Dest, cfg.Name, drev, cfg.PageSize),
		rev:   rev,
	}
	diffs, err := v.compare(ctx)
	return diffs, rev, err
}

// verifyRevisions picks the source revision to compare and the
// destination revision to read: cfg.Rev and the destination now, or the
// mirror's checkpoint as of now, or, while the mirror has not moved since
// its drain, the cutover record's.
func verifyRevisions(ctx context.Context, cfg VerifyConfig) (rev, drev int64, err error) {
	dkey, dend := span(cfg.DestPrefix)
	head, err := cfg.Dest.Get(ctx, dkey, clientv3.WithRange(dend), clientv3.WithCountOnly())
	if err != nil {
		return 0, 0, fmt.Errorf("mirror: destination: %w", err)
	}
	drev, rev = head.Header.Revision, cfg.Rev
	if rev != 0 {
		return rev, drev, nil
	}
	cp, cpModRev, err := ReadCheckpoint(ctx, cfg.Dest, cfg.Name, clientv3.WithRev(drev))
	if err != nil {
		return 0, 0, err
	}
	if cp == nil || cp.Phase != PhaseStream {
		return 0, 0, fmt.Errorf("mirror: mirror %q has not finished a full sync in this destination; give --rev to compare at a source revision", cfg.Name)
	}
	if c := cfg.Cutover; c != nil && cpModRev == c.CheckpointRev && c.DestRevision <= drev {
		// The mirror has not moved since the drain: compare the
		// destination as the drain left it.
		return c.Revision, c.DestRevision, nil
	}
	return cp.Revision, drev, nil
}

// verifier walks the source (less the keys feeders wrote) and the
// destination image in key order, side by side.
type verifier struct {
	m        *mirror // for the key mapping
	src, dst *pager
	fs       *feederScan
	owned    *ownScan
	rev      int64
}

// next is the next source key the mirror copies.
func (v *verifier) next(ctx context.Context) (*mvccpb.KeyValue, error) {
	for {
		kv, err := v.src.get(ctx)
		if err != nil || kv == nil {
			if err != nil {
				err = fmt.Errorf("mirror: source at revision %d: %w", v.rev, err)
			}
			return kv, err
		}
		if by, err := v.fs.wrote(ctx, kv); err != nil || !by {
			return kv, err
		}
	}
}

// compare merges the two walks into the differences.
func (v *verifier) compare(ctx context.Context) ([]Difference, error) {
	var diffs []Difference
	s, err := v.next(ctx)
	if err != nil {
		return nil, err
	}
	d, err := v.dst.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("mirror: destination: %w", err)
	}
	for s != nil || d != nil {
		var c int
		switch {
		case s == nil:
			c = 1
		case d == nil:
			c = -1
		default:
			c = bytes.Compare([]byte(v.m.mapKey(s.Key)), d.Key)
		}
		owner := true
		if c >= 0 {
			if owner, err = v.owned.mine(ctx, d.Key); err != nil {
				return diffs, err
			}
		}
		if diff, ok := differ(c, owner, s, d); ok {
			diffs = append(diffs, diff)
		}
		if c <= 0 {
			if s, err = v.next(ctx); err != nil {
				return diffs, err
			}
		}
		if c >= 0 {
			if d, err = v.dst.get(ctx); err != nil {
				return diffs, fmt.Errorf("mirror: destination: %w", err)
			}
		}
	}
	return diffs, nil
}

// differ classifies a step of the merge: c compares the source key s
// (mapped) with the destination key d (-1: only s, 1: only d), owner says
// whether the mirror wrote d.
func differ(c int, owner bool, s, d *mvccpb.KeyValue) (Difference, bool) {
	switch {
	case c < 0:
		return Difference{Key: string(s.Key), Kind: "missing"}, true
	case c > 0 && owner:
		return Difference{Key: string(d.Key), Kind: "extra"}, true
	case c > 0:
		return Difference{Key: string(d.Key), Kind: "unowned"}, true
	case !bytes.Equal(s.Value, d.Value) && owner:
		return Difference{Key: string(s.Key), Kind: "value"}, true
	case !bytes.Equal(s.Value, d.Value):
		return Difference{Key: string(s.Key), Kind: "conflict"}, true
	case !owner:
		return Difference{Key: string(d.Key), Kind: "unowned"}, true
	}
	return Difference{}, false
}

// ownScan tells, for destination keys in order, whether the mirror named
// name owns them: one pager over its ownership records.
type ownScan struct {
	p    *pager
	pre  string
	at   *mvccpb.KeyValue
	read bool
}

func newOwnScan(dst *clientv3.Client, name string, rev int64, size int) *ownScan {
	oKey, oEnd := span(ownPrefix(name))
	return &ownScan{p: &pager{cli: dst, next: oKey, end: oEnd, rev: rev, size: size, keysOnly: true, all: true}, pre: ownPrefix(name)}
}

// mine reports whether the mirror owns destination key k.
func (o *ownScan) mine(ctx context.Context, k []byte) (bool, error) {
	name := string(k)
	for !o.read || (o.at != nil && strings.TrimPrefix(string(o.at.Key), o.pre) < name) {
		rec, err := o.p.get(ctx)
		if err != nil {
			return false, fmt.Errorf("mirror: destination ownership records: %w", err)
		}
		o.at, o.read = rec, true
	}
	return o.at != nil && strings.TrimPrefix(string(o.at.Key), o.pre) == name, nil
}

// feederScan tells, for source keys in order, whether another mirror
// wrote their version into the source (its ownership record was written
// with it): one pager over each feeder's records at the compared revision.
type feederScan struct {
	owns []*pager
	pre  []string
	at   []*mvccpb.KeyValue
	read []bool
}

// feederScanAt reads which mirrors write into the source under the prefix
// (none under CopyMirrored, or if the source's reserved prefix cannot be
// read; not the one the mirror fails back from) and scans their records
// at rev.
func feederScanAt(ctx context.Context, cfg VerifyConfig, rev int64) (*feederScan, error) {
	fs := &feederScan{}
	if cfg.CopyMirrored {
		return fs, nil
	}
	src, _, err := clusterID(ctx, cfg.Source)
	if err != nil {
		return nil, fmt.Errorf("mirror: source cluster: %w", err)
	}
	dst, _, err := clusterID(ctx, cfg.Dest)
	if err != nil {
		return nil, fmt.Errorf("mirror: destination cluster: %w", err)
	}
	cps, _, err := allCheckpoints(ctx, cfg.Source)
	switch {
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		return fs, nil
	case err != nil:
		return nil, fmt.Errorf("mirror: source: %w", err)
	}
	// A failback copies the keys of the mirror it fails back from.
	self, _, err := ReadCheckpoint(ctx, cfg.Dest, cfg.Name)
	if err != nil {
		return nil, err
	}
	key, end := span(cfg.Prefix)
	for name, c := range cps {
		if (src == dst && name == cfg.Name) || !overlap(c.DestPrefix, cfg.Prefix) ||
			(self != nil && name == self.FailbackFrom && c.SourceClusterID == dst) {
			continue
		}
		own := ownPrefix(name)
		oend := own + end
		if cfg.Prefix == "" {
			oend = clientv3.GetPrefixRangeEnd(own)
		}
		fs.owns = append(fs.owns, &pager{cli: cfg.Source, next: own + key, end: oend, rev: rev, size: cfg.PageSize, keysOnly: true, all: true})
		fs.pre = append(fs.pre, own)
	}
	fs.at = make([]*mvccpb.KeyValue, len(fs.owns))
	fs.read = make([]bool, len(fs.owns))
	return fs, nil
}

// wrote reports whether a feeder wrote kv's version; kvs come in key order.
func (fs *feederScan) wrote(ctx context.Context, kv *mvccpb.KeyValue) (bool, error) {
	k := string(kv.Key)
	by := false
	for i, p := range fs.owns {
		for !fs.read[i] || (fs.at[i] != nil && strings.TrimPrefix(string(fs.at[i].Key), fs.pre[i]) < k) {
			rec, err := p.get(ctx)
			if err != nil {
				return false, fmt.Errorf("mirror: ownership records in the source: %w", err)
			}
			fs.at[i], fs.read[i] = rec, true
		}
		if r := fs.at[i]; r != nil && strings.TrimPrefix(string(r.Key), fs.pre[i]) == k && core.WroteIt(kv.ModRevision, r) == core.ByFeeder {
			by = true
		}
	}
	return by, nil
}

// pager reads a key range at a revision a page at a time, skipping the
// mirrors' own keys.
type pager struct {
	cli       *clientv3.Client
	next, end string
	rev       int64
	size      int
	buf       []*mvccpb.KeyValue
	done      bool
	// keysOnly reads no values; all keeps the mirrors' own keys.
	keysOnly, all bool
}

// get returns the next key, or nil at the end.
func (p *pager) get(ctx context.Context) (*mvccpb.KeyValue, error) {
	for {
		for len(p.buf) > 0 {
			kv := p.buf[0]
			p.buf = p.buf[1:]
			if p.all || !reserved(kv.Key) {
				return kv, nil
			}
		}
		if p.done {
			return nil, nil
		}
		opts := []clientv3.OpOption{clientv3.WithRange(p.end), clientv3.WithRev(p.rev), clientv3.WithLimit(int64(p.size))}
		if p.keysOnly {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		resp, err := p.cli.Get(ctx, p.next, opts...)
		if err != nil {
			return nil, err
		}
		p.buf = resp.Kvs
		p.done = !resp.More || len(resp.Kvs) == 0
		if len(resp.Kvs) > 0 {
			p.next = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
			if !p.all {
				p.next = skipReserved(p.next, p.end)
			}
		}
	}
}
