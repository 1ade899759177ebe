package cascade

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// errLost means an upstream could not be followed or stopped delivering
// (no answer in time, its watch ended, it went silent): the replica
// resumes on the next. errCompactedHere means this upstream no longer has
// the revision the replica needs.
var (
	errLost          = errors.New("cascade: upstream lost")
	errCompactedHere = errors.New("cascade: the upstream compacted past the next revision")
)

// Run applies the upstreams' watch to the local store until ctx ends (it
// returns nil then) or the store must be built again: ErrOtherHistory,
// ErrDiverged, or ErrBehind (followCore says when). Each session with an
// upstream first checks that it holds the store's revision as the store
// does (verify), then applies its watch from the next revision until it
// is lost, compacted past the store, or the store is fenced. It is the
// local store's only writer. Beside it, it keeps the copy of the source's
// auth confirmed while calls come (authz.run), and the replica announced
// (Config.Announce). Whatever it returns, the
// store is fenced first: never served again.
func (s *Store) Run(ctx context.Context) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.auth.run(ctx)
	}()
	if a := s.cfg.Announce; a != nil {
		// While the store is served: revoked when Run returns (before
		// Close closes the clients), or at the fence.
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.Announce(ctx, *a)
		}()
	}
	defer wg.Wait()
	defer cancel()
	defer func() {
		if err != nil {
			err = s.fence(err)
		}
	}()
	a, err := newApplier(ctx, s.e.Server, s.cfg.ApplyValue, s.publish)
	if err != nil {
		return err
	}
	core := newFollowCore(s.cfg.Upstreams, s.first, s.cfg.RetryWait, s.cfg.RetryWaitMax)
	s.publishStatus(core)
	warned := make([]time.Time, len(s.ups)) // when each upstream's outcome was last logged
	for {
		if err := s.Fenced(); err != nil {
			return err
		}
		act := core.step()
		switch act.kind {
		case actBootstrap:
			if errors.Is(act.err, ErrDiverged) {
				s.m.divergences.Inc()
			}
			return act.err
		case actWait:
			s.logStalled(core)
			select {
			case <-ctx.Done():
				return nil
			case <-s.fenced:
			case <-s.clock.After(act.wait):
			}
			continue
		}
		u := s.ups[act.upstream]
		o := s.follow(ctx, a, u)
		if ctx.Err() != nil {
			return nil
		}
		core.done(act.upstream, o, a.rev()+1)
		s.publishStatus(core)
		if o.followed {
			s.m.switches.Inc()
		}
		// Every session that followed, and an upstream that keeps failing
		// once per stallLogEvery.
		if now := s.clock.Now(); o.followed || now.Sub(warned[act.upstream]) >= stallLogEvery {
			warned[act.upstream] = now
			s.lg.Warn("upstream lost; resuming on the next", zap.String("upstream", u.url), zap.String("outcome", o.kind.String()),
				zap.Int64("from-revision", a.rev()+1), zap.Error(o.err))
		}
	}
}

// logStalled says, at most once per stallLogEvery, why no upstream is
// followed.
func (s *Store) logStalled(core *followCore) {
	now := s.clock.Now()
	if now.Sub(s.stallLogged) < stallLogEvery {
		return
	}
	s.stallLogged = now
	s.lg.Warn("following no upstream; trying them again", zap.Error(core.stalled(false)), zap.Int("turns", core.failedTurns))
}

// stallLogEvery spaces the warnings of a replica that follows no upstream.
const stallLogEvery = 30 * time.Second

// follow is one session with upstream u: it checks u's history at the
// store's revision, opens its watch from the next revision, and applies
// what it sends until it is lost, compacted past that revision, the store
// diverges or is fenced; between responses it asks u for progress, checks
// the source's compaction and collects leases.
func (s *Store) follow(ctx context.Context, a *applier, u *upstream) outcome {
	began := s.clock.Now()
	o := s.session(ctx, a, u)
	if o.followed && s.clock.Since(began) < s.cfg.SilenceTimeout {
		// Delivered, but for less than a silence: not a working upstream
		// yet (one that keeps ending its streams would otherwise be tried
		// again at once, for ever).
		o.followed = false
	}
	return o
}

// session is follow's one session with u.
func (s *Store) session(ctx context.Context, a *applier, u *upstream) outcome {
	if _, err := u.client(); err != nil {
		return outcomeOf(fmt.Errorf("%w: %v", errLost, err), false)
	}
	fp, err := a.fingerprint()
	if err != nil {
		return outcomeOf(err, false)
	}
	if err := s.verify(ctx, u, fp); err != nil {
		return outcomeOf(err, false)
	}
	// Upkeep, not a client's demand: it must not keep a quiet upstream
	// awake (wire.BackgroundKey).
	wctx := background(clientv3.WithRequireLeader(ctx))
	sctx, end := context.WithCancel(context.Background())
	defer end() // after unfollow: proofs asked of u meanwhile end
	w, err := openWatch(wctx, s.clock, u.cli, fp.rev+1, s.cfg.UpstreamTimeout)
	if err != nil {
		return outcomeOf(fmt.Errorf("%w: %s: %v", errLost, u.url, err), false)
	}
	defer w.close()
	progress := s.clock.NewTicker(s.cfg.ProgressInterval)
	defer progress.Stop()
	compaction := s.clock.NewTicker(s.cfg.CompactionInterval)
	defer compaction.Stop()
	gc := s.clock.NewTicker(s.cfg.LeaseGCInterval)
	defer gc.Stop()
	heard := s.clock.Now()
	created, followed := false, false
	defer s.unfollow()
	for {
		select {
		case <-ctx.Done():
			return outcome{kind: outcomeLost, followed: followed, err: ctx.Err()}
		case <-s.fenced:
			return outcomeOf(s.Fenced(), followed)
		case resp, ok := <-w.resps:
			if !ok {
				return outcomeOf(fmt.Errorf("%w: %s's watch ended: %v", errLost, u.url, w.ended()), followed)
			}
			if err := s.take(ctx, a, u, resp); err != nil {
				return outcomeOf(err, followed)
			}
			if !created {
				// Created, from the next revision, of a checked history:
				// proofs ask u from now on.
				created = true
				s.followUp(sctx, u)
			}
			// Past its creation, it delivers.
			followed = followed || !resp.Created
			heard = s.clock.Now()
		case <-progress.Chan():
			// Silent since the last tick: ask whether it is quiet or lost
			// (a read also keeps contact, which the ready checks want
			// within an election timeout, when no progress answer comes).
			if s.clock.Since(heard) >= s.cfg.ProgressInterval {
				quiet, err := s.silent(wctx, u, a.rev(), heard)
				if err != nil {
					return outcomeOf(err, followed)
				}
				if quiet {
					heard = s.clock.Now()
					followed = followed || created
				}
			}
			_ = w.requestProgress() // its answer, or its absence, tells
		case <-compaction.Chan():
			if err := s.followCompaction(ctx, u, a.rev()); err != nil {
				s.lg.Warn("following the source's compaction", zap.String("upstream", u.url), zap.Error(err))
			}
		case <-gc.Chan():
			if err := s.collectLeases(ctx, a, u); err != nil {
				if errors.Is(err, ErrDiverged) {
					return outcomeOf(err, followed)
				}
				s.lg.Warn("collecting leases the source has ended", zap.String("upstream", u.url), zap.Error(err))
			}
		}
	}
}

// outcomeOf classifies how a session ended.
func outcomeOf(err error, followed bool) outcome {
	o := outcome{kind: outcomeLost, followed: followed, err: err}
	switch {
	case errors.Is(err, ErrOtherHistory):
		o.kind = outcomeOtherHistory
	case errors.Is(err, ErrDiverged):
		o.kind = outcomeDiverged
	case errors.Is(err, errCompactedHere):
		o.kind = outcomeCompacted
	}
	return o
}

// take handles one watch response from u.
func (s *Store) take(ctx context.Context, a *applier, u *upstream, resp *pb.WatchResponse) error {
	switch {
	case resp.CompactRevision != 0:
		return fmt.Errorf("%w: %s compacted to %d, the replica needs %d", errCompactedHere, u.url, resp.CompactRevision, a.rev()+1)
	case resp.Canceled:
		return fmt.Errorf("%w: %s cancelled its watch: %s", errLost, u.url, resp.CancelReason)
	}
	if err := s.checkHeader(u.url, "its watch", resp.Header, 0, false); err != nil {
		return err
	}
	if resp.Header.Revision < a.rev() {
		// Checked at the session's start to hold the store's revision: it
		// went back. The next session checks it again.
		return fmt.Errorf("%w: %s's watch answered at revision %d, behind the store's %d", errLost, u.url, resp.Header.Revision, a.rev())
	}
	s.heard(u, resp.Header.Revision)
	if len(resp.Events) == 0 {
		return nil
	}
	start := s.clock.Now()
	if err := a.applyResponse(ctx, resp.Events); err != nil {
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
// lost one. It reports quiet if the upstream answers at rev (the watch had
// nothing to send: it is heard), and returns errLost if it answers past
// rev once heard is SilenceTimeout ago (its watch is not delivering what
// it has), or if it does not answer by then; below rev, a linearizable
// read decides (below again: another history).
func (s *Store) silent(ctx context.Context, u *upstream, rev int64, heard time.Time) (quiet bool, err error) {
	deadline := heard.Add(s.cfg.SilenceTimeout)
	rctx, cancel := context.WithTimeout(ctx, max(deadline.Sub(s.clock.Now()), 0))
	defer cancel()
	resp, err := u.cli.Get(rctx, probeKey, clientv3.WithSerializable(), clientv3.WithCountOnly())
	switch {
	case err != nil:
		return false, fmt.Errorf("%w: %s silent for %v, and a read unanswered: %v", errLost, u.url, s.clock.Since(heard).Round(time.Millisecond), err)
	case s.checkHeader(u.url, "a read of its revision", resp.Header, rev, false) != nil:
		return false, s.Fenced()
	case resp.Header.Revision < rev:
		// Behind the store (a grpc-proxy upstream answers a serializable
		// read from its cache): a linearizable read tells a lagging one
		// from another history.
		lin, err := u.cli.Get(rctx, probeKey, clientv3.WithCountOnly())
		if err != nil {
			return false, fmt.Errorf("%w: %s answers at revision %d, behind the store's %d, and gave no linearizable revision: %v", errLost, u.url, resp.Header.Revision, rev, err)
		}
		if err := s.checkHeader(u.url, "a linearizable read of a silent upstream", lin.Header, rev, true); err != nil {
			return false, err
		}
		s.heard(u, lin.Header.Revision)
		return lin.Header.Revision == rev, nil
	case resp.Header.Revision == rev:
		s.heard(u, resp.Header.Revision)
		return true, nil
	case s.clock.Now().After(deadline):
		return false, fmt.Errorf("%w: %s is at revision %d and its watch has sent nothing past %d for %v", errLost, u.url, resp.Header.Revision, rev, s.clock.Since(heard).Round(time.Millisecond))
	}
	return false, nil
}
