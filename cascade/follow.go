package cascade

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// errLost means an upstream's watch ended or went silent: the replica
// resumes on the next upstream. errCompactedHere means this upstream no
// longer has the revision the replica needs.
var (
	errLost          = errors.New("cascade: upstream lost")
	errCompactedHere = errors.New("cascade: the upstream compacted past the next revision")
)

// Run applies the upstreams' watch to the local store until ctx ends (it
// returns nil then) or the store must be built again: ErrDiverged, or
// ErrBehind once every upstream has compacted past the revision it needs.
// Upstreams are followed in turn: when one is lost (its watch ends or it
// is silent for SilenceTimeout), the watch resumes on the next at the next
// revision. It is the local store's only writer. Beside it, it keeps the
// copy of the source's auth confirmed while calls come (authz.run).
func (s *Store) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.auth.run(ctx)
	}()
	defer func() { <-done }()
	defer cancel()
	a, err := newApplier(ctx, s.e.Server, s.cfg.BreakApplyKey, s.publish)
	if err != nil {
		return err
	}
	compacted := 0 // upstreams in a row that compacted past the next revision
	for i := 0; ctx.Err() == nil; i = (i + 1) % len(s.ups) {
		u := s.ups[i]
		err := s.follow(ctx, a, u)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrDiverged):
			s.m.divergences.Inc()
			return err
		case errors.Is(err, errCompactedHere):
			if compacted++; compacted >= len(s.ups) {
				return fmt.Errorf("%w (revision %d)", ErrBehind, a.rev()+1)
			}
		default:
			compacted = 0
		}
		s.following(0)
		s.m.switches.Inc()
		s.lg.Warn("upstream lost; resuming on the next", zap.String("upstream", u.url), zap.Int64("from-revision", a.rev()+1), zap.Error(err))
		if len(s.ups) == 1 {
			// Nothing else to turn to: wait a little before asking again.
			select {
			case <-ctx.Done():
			case <-s.clock.After(s.cfg.SilenceTimeout):
			}
		}
	}
	return nil
}

// follow watches u from the revision after the local one and applies what
// it sends, until it is lost, compacted past that revision, or the store
// diverges; between responses it asks u for progress, checks the source's
// compaction and collects leases.
func (s *Store) follow(ctx context.Context, a *applier, u upstream) error {
	// Upkeep, not a client's demand: it must not keep a quiet upstream
	// awake (wire.BackgroundKey).
	wctx, cancel := context.WithCancel(background(clientv3.WithRequireLeader(ctx)))
	defer cancel()
	ch := u.cli.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(a.rev()+1), clientv3.WithProgressNotify(), clientv3.WithCreatedNotify())
	progress := s.clock.NewTicker(s.cfg.ProgressInterval)
	defer progress.Stop()
	compaction := s.clock.NewTicker(s.cfg.CompactionInterval)
	defer compaction.Stop()
	gc := s.clock.NewTicker(s.cfg.LeaseGCInterval)
	defer gc.Stop()
	heard := s.clock.Now()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case resp, ok := <-ch:
			if err := s.take(ctx, a, u, resp, ok); err != nil {
				return err
			}
			heard = s.clock.Now()
		case <-progress.Chan():
			// Silent since the last tick: ask whether it is quiet or lost
			// (a read also keeps contact, which the ready checks want
			// within an election timeout, when no progress answer comes).
			if s.clock.Since(heard) >= s.cfg.ProgressInterval {
				quiet, err := s.silent(wctx, u, a.rev(), heard)
				if err != nil {
					return err
				}
				if quiet {
					heard = s.clock.Now()
				}
			}
			pctx, pcancel := context.WithTimeout(wctx, s.cfg.SilenceTimeout)
			_ = u.cli.RequestProgress(pctx) // its answer, or its absence, tells
			pcancel()
		case <-compaction.Chan():
			if err := s.followCompaction(ctx, u, a.rev()); err != nil {
				s.lg.Warn("following the source's compaction", zap.String("upstream", u.url), zap.Error(err))
			}
		case <-gc.Chan():
			if err := s.collectLeases(ctx, a, u); err != nil {
				if errors.Is(err, ErrDiverged) {
					return err
				}
				s.lg.Warn("collecting leases the source has ended", zap.String("upstream", u.url), zap.Error(err))
			}
		}
	}
}

// take handles one watch response from u.
func (s *Store) take(ctx context.Context, a *applier, u upstream, resp clientv3.WatchResponse, ok bool) error {
	switch {
	case !ok:
		return fmt.Errorf("%w: %s's watch closed", errLost, u.url)
	case resp.CompactRevision != 0:
		return fmt.Errorf("%w: %s compacted to %d, the replica needs %d", errCompactedHere, u.url, resp.CompactRevision, a.rev()+1)
	case resp.Err() != nil:
		return fmt.Errorf("%w: %s: %v", errLost, u.url, resp.Err())
	}
	s.heard(u, resp.Header.Revision)
	if len(resp.Events) == 0 {
		return nil
	}
	evs := make([]*mvccpb.Event, len(resp.Events))
	for i, ev := range resp.Events {
		evs[i] = (*mvccpb.Event)(ev)
	}
	start := s.clock.Now()
	if err := a.applyResponse(ctx, evs); err != nil {
		return err
	}
	s.m.applySeconds.Observe(s.clock.Since(start).Seconds())
	return nil
}

// silent decides on an upstream whose watch has sent nothing since the
// last progress tick (last heard at heard), the store at revision rev:
// etcd answers no progress request while a watch's start revision (rev+1)
// is past its store's (progressIfSync), so the watch of a cluster that
// writes nothing is silent, and only a read tells a quiet upstream from a
// lost one. It reports quiet if the upstream answers at rev or before (the
// watch had nothing to send: it is heard), and returns errLost if it
// answers past rev once heard is SilenceTimeout ago (its watch is not
// delivering what it has), or if it does not answer by then.
func (s *Store) silent(ctx context.Context, u upstream, rev int64, heard time.Time) (quiet bool, err error) {
	deadline := heard.Add(s.cfg.SilenceTimeout)
	rctx, cancel := context.WithTimeout(ctx, max(deadline.Sub(s.clock.Now()), 0))
	defer cancel()
	resp, err := u.cli.Get(rctx, probeKey, clientv3.WithSerializable(), clientv3.WithCountOnly())
	switch {
	case err != nil:
		return false, fmt.Errorf("%w: %s silent for %v, and a read unanswered: %v", errLost, u.url, s.clock.Since(heard).Round(time.Millisecond), err)
	case resp.Header.Revision <= rev:
		s.heard(u, resp.Header.Revision)
		return true, nil
	case s.clock.Now().After(deadline):
		return false, fmt.Errorf("%w: %s is at revision %d and its watch has sent nothing past %d for %v", errLost, u.url, resp.Header.Revision, rev, s.clock.Since(heard).Round(time.Millisecond))
	}
	return false, nil
}
