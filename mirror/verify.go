package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

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
	Source, Dest       *clientv3.Client
	Prefix, DestPrefix string
	// Name is the mirror whose checkpoint picks the source revision when
	// Rev is 0: the destination is read as of a moment its checkpoint says
	// revision R, and the source as of R, so a running mirror verifies
	// exactly.
	Name string
	Rev  int64
	// PageSize is the number of keys per read.
	PageSize int
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
	if cfg.PageSize <= 0 {
		cfg.PageSize = 1000
	}
	dkey, dend := span(cfg.DestPrefix)
	head, err := cfg.Dest.Get(ctx, dkey, clientv3.WithRange(dend), clientv3.WithCountOnly())
	if err != nil {
		return nil, 0, fmt.Errorf("mirror: destination: %w", err)
	}
	drev, rev := head.Header.Revision, cfg.Rev
	if rev == 0 {
		cp, cpModRev, err := ReadCheckpoint(ctx, cfg.Dest, cfg.Name, clientv3.WithRev(drev))
		if err != nil {
			return nil, 0, err
		}
		if cp == nil || cp.Phase != PhaseStream {
			return nil, 0, fmt.Errorf("mirror: mirror %q has not finished a full sync in this destination; give --rev to compare at a source revision", cfg.Name)
		}
		rev = cp.Revision
		if c := cfg.Cutover; c != nil && cpModRev == c.CheckpointRev && c.DestRevision <= drev {
			// The mirror has not moved since the drain: compare the
			// destination as the drain left it.
			rev, drev = c.Revision, c.DestRevision
		}
	}
	m := &mirror{cfg: Config{Prefix: cfg.Prefix, DestPrefix: cfg.DestPrefix}}
	skey, send := span(cfg.Prefix)
	src := &pager{cli: cfg.Source, next: skey, end: send, rev: rev, size: cfg.PageSize}
	dst := &pager{cli: cfg.Dest, next: dkey, end: dend, rev: drev, size: cfg.PageSize}
	oKey, oEnd := span(ownPrefix(cfg.Name))
	owns := &pager{cli: cfg.Dest, next: oKey, end: oEnd, rev: drev, size: cfg.PageSize, keysOnly: true, all: true}
	o, err := owns.get(ctx)
	if err != nil {
		return nil, rev, fmt.Errorf("mirror: destination ownership records: %w", err)
	}
	// mine reports whether the mirror owns destination key k; keys come
	// in order.
	mine := func(k []byte) (bool, error) {
		name := string(k)
		for o != nil && strings.TrimPrefix(string(o.Key), ownPrefix(cfg.Name)) < name {
			if o, err = owns.get(ctx); err != nil {
				return false, fmt.Errorf("mirror: destination ownership records: %w", err)
			}
		}
		return o != nil && strings.TrimPrefix(string(o.Key), ownPrefix(cfg.Name)) == name, nil
	}
	fs, err := feederScanAt(ctx, cfg, rev)
	if err != nil {
		return nil, rev, err
	}
	// next is the next source key the mirror copies.
	next := func() (*mvccpb.KeyValue, error) {
		for {
			kv, err := src.get(ctx)
			if err != nil || kv == nil {
				return kv, err
			}
			if by, err := fs.wrote(ctx, kv); err != nil || !by {
				return kv, err
			}
		}
	}
	var diffs []Difference
	s, err := next()
	if err != nil {
		return nil, rev, fmt.Errorf("mirror: source at revision %d: %w", rev, err)
	}
	d, err := dst.get(ctx)
	if err != nil {
		return nil, rev, fmt.Errorf("mirror: destination: %w", err)
	}
	for s != nil || d != nil {
		var c int
		switch {
		case s == nil:
			c = 1
		case d == nil:
			c = -1
		default:
			c = bytes.Compare([]byte(m.mapKey(s.Key)), d.Key)
		}
		owner := true
		if c >= 0 {
			if owner, err = mine(d.Key); err != nil {
				return diffs, rev, err
			}
		}
		switch {
		case c < 0:
			diffs = append(diffs, Difference{Key: string(s.Key), Kind: "missing"})
		case c > 0 && owner:
			diffs = append(diffs, Difference{Key: string(d.Key), Kind: "extra"})
		case c > 0:
			diffs = append(diffs, Difference{Key: string(d.Key), Kind: "unowned"})
		case !bytes.Equal(s.Value, d.Value) && owner:
			diffs = append(diffs, Difference{Key: string(s.Key), Kind: "value"})
		case !bytes.Equal(s.Value, d.Value):
			diffs = append(diffs, Difference{Key: string(s.Key), Kind: "conflict"})
		case !owner:
			diffs = append(diffs, Difference{Key: string(d.Key), Kind: "unowned"})
		}
		if c <= 0 {
			if s, err = next(); err != nil {
				return diffs, rev, fmt.Errorf("mirror: source at revision %d: %w", rev, err)
			}
		}
		if c >= 0 {
			if d, err = dst.get(ctx); err != nil {
				return diffs, rev, fmt.Errorf("mirror: destination: %w", err)
			}
		}
	}
	return diffs, rev, nil
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
		if r := fs.at[i]; r != nil && strings.TrimPrefix(string(r.Key), fs.pre[i]) == k && wroteIt(kv.ModRevision, r) == byFeeder {
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
