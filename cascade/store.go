package cascade

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/pkg/v3/wait"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.uber.org/zap"
)

// Store is a cascaded replica's local store: the private member holding
// the copy, the upstreams it copies from and forwards to, and what it
// knows of the source. Open builds it, Run keeps it current, Close ends it.
type Store struct {
	cfg   Config
	lg    *zap.Logger
	clock clockwork.Clock
	m     *Metrics
	// instance names this replica in chains of upstreams (Chain).
	instance string
	// ups are the upstreams, one client each (the watch follows one);
	// all is a client of all of them as the replica's user, for rounds
	// and the source's auth; forward is one that sends each call's
	// caller's token (ForwardDialOptions), never the replica's user: the
	// front forwards with it, and tokens are checked with it.
	ups          []*upstream
	all, forward *clientv3.Client
	// auth is the copy of the source's auth the front checks calls with.
	auth *authz
	// cluster is the source cluster's ID.
	cluster uint64
	// upChain is the chain of upstreams of the upstream followed last.
	upChain []string
	// sourceLeader is the source's leader, as the upstreams said;
	// sourceQuota the backend quota of the upstream snapshotted (the
	// source's members', for a learner replica upstream).
	sourceLeader atomic.Uint64
	sourceQuota  int64
	e            *embed.Etcd

	// applied is triggered with every revision applied (WaitRevision).
	applied wait.WaitTime
	// sourceRev is the source's newest revision an upstream reported;
	// contact counts what the upstreams sent (events, progress);
	// lead is the number (in --upstream, from 1) of the upstream followed,
	// 0 while none is (readindex.Source.Lead).
	sourceRev atomic.Int64
	contact   atomic.Uint64
	lead      atomic.Uint64
	// noBoundUntil (Unix ns): until then, background rounds are strong
	// reads (member.aged: an upstream's answer told no bound).
	noBoundUntil atomic.Int64

	// first is the upstream followed first (the snapshot's); followed is
	// the one whose watch the store follows now (nil while none: proofs
	// then ask any); stall is why none is (Stalled), as the follow loop
	// last decided; stallLogged is when it last said so (Run's own).
	first       int
	followed    atomic.Pointer[session]
	stall       atomic.Pointer[error]
	stallLogged time.Time

	// fenceCtx is cancelled, with the reason as its cause, once the store
	// must never be served again (fence); fenced is its Done.
	fenceOnce   sync.Once
	fenceCtx    context.Context
	fenceCancel context.CancelCauseFunc
	fenced      <-chan struct{}

	// calls counts the front's calls being served from the store (Enter):
	// Close waits for them, as an mvcc read after the backend closed
	// would crash the process.
	calls struct {
		sync.Mutex
		n int
	}

	closeOnce sync.Once
}

// NewInstance is this replica's ID in chains of upstreams
// (wire.UpstreamChainKey): its first advertised client URL, which is
// unique per replica and the same after a restart, so that a replica
// restarted with an upstream that copies from it finds itself in that
// upstream's chain. Without one (never, once config.Front validated),
// a random name.
func NewInstance(advertiseClientURLs []string) string {
	if len(advertiseClientURLs) > 0 && advertiseClientURLs[0] != "" {
		return advertiseClientURLs[0]
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "c" + hex.EncodeToString(b[:])
}

// Open checks the upstreams (one cluster, no cycle through instance),
// takes a snapshot from one of them (not the leader, unless nothing else
// answers), restores it in cfg.Dir and starts the local member on it.
func Open(ctx context.Context, cfg Config, instance string) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, lg: cfg.Logger, clock: cfg.Clock, instance: instance, applied: wait.NewTimeList()}
	s.fenceCtx, s.fenceCancel = context.WithCancelCause(context.Background())
	s.fenced = s.fenceCtx.Done()
	if s.clock == nil {
		s.clock = clockwork.NewRealClock()
	}
	s.m = cfg.Metrics
	if s.m == nil {
		s.m = NewMetrics(nil)
	}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if err := s.dial(); err != nil {
		return nil, err
	}
	cluster, ids, err := checkUpstreams(ctx, s.ups, instance, s.cfg.UpstreamTimeout)
	if err != nil {
		return nil, err
	}
	s.cluster = cluster
	if err := s.copyAuth(ctx); err != nil {
		return nil, err
	}
	src, err := snapshotSource(ctx, s.ups, ids, s.cfg.UpstreamTimeout)
	if err != nil {
		return nil, err
	}
	for i, u := range s.ups {
		if u.url == src.url {
			s.first = i
		}
	}
	s.upChain = ids[src.url].chain
	s.sourceLeader.Store(ids[src.url].leadID)
	s.sourceQuota = ids[src.url].quota
	if err := s.bootstrap(ctx, src); err != nil {
		return nil, err
	}
	ok = true
	s.m.current.Store(s)
	return s, nil
}

// dial opens a client of each upstream, and one of all of them.
func (s *Store) dial() error {
	for _, u := range s.cfg.Upstreams {
		s.ups = append(s.ups, &upstream{url: u, dial: s.cfg.Dial})
	}
	all, err := s.cfg.Dial(s.cfg.Upstreams)
	if err != nil {
		return fmt.Errorf("cascade: --upstream: %w", err)
	}
	s.all = all
	forward, err := s.cfg.DialForward(s.cfg.Upstreams, s.ForwardDialOptions())
	if err != nil {
		return fmt.Errorf("cascade: --upstream: %w", err)
	}
	s.forward = forward
	return nil
}

// bootstrap fetches src's snapshot, restores it and starts the local member.
func (s *Store) bootstrap(ctx context.Context, src *upstream) error {
	if err := os.MkdirAll(s.cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("cascade: %w", err)
	}
	s.lg.Info("bootstrapping from an upstream's snapshot", zap.String("upstream", src.url), zap.String("cluster", fmt.Sprintf("%x", s.cluster)))
	s.m.bootstraps.Inc()
	s.m.bootstrapBytes.Set(0)
	snap := snapshotPath(s.cfg.Dir)
	if err := fetchSnapshot(ctx, s.clock, src, snap, func(n int64) { s.m.bootstrapBytes.Add(float64(n)) }); err != nil {
		return err
	}
	token := "understudy-cascade-" + s.instance
	if err := restore(s.lg, snap, storeDir(s.cfg.Dir), s.cfg.Name, token); err != nil {
		return err
	}
	_ = os.Remove(snap)
	e, err := startLocal(ctx, s.clock, storeDir(s.cfg.Dir), token, s.cfg)
	if err != nil {
		return err
	}
	s.e = e
	rev := e.Server.KV().Rev()
	s.publish(rev)
	s.sourceRev.Store(rev)
	s.contact.Add(1)
	s.lead.Store(uint64(s.first) + 1) // it has just had the upstream's snapshot
	s.lg.Info("restored the upstream's snapshot", zap.String("upstream", src.url), zap.Int64("revision", rev))
	return nil
}

// SourceLeader is the source's leader, as the upstreams last said.
func (s *Store) SourceLeader() uint64 { return s.sourceLeader.Load() }

// SourceQuota is the backend quota an upstream reported at the bootstrap:
// the one that decides when the source refuses the writes forwarded to it
// (the local store's own is sized to hold any source).
func (s *Store) SourceQuota() int64 { return s.sourceQuota }

// Server is the local member, which the front serves.
func (s *Store) Server() *etcdserver.EtcdServer { return s.e.Server }

// Cluster is the source cluster's ID.
func (s *Store) Cluster() uint64 { return s.cluster }

// Chain is this replica's chain of upstreams, itself first
// (wire.UpstreamChainKey).
func (s *Store) Chain() []string { return append([]string{s.instance}, s.upChain...) }

// Revision is the local store's revision; SourceRevision the source's
// newest that an upstream reported.
func (s *Store) Revision() int64       { return s.e.Server.KV().Rev() }
func (s *Store) SourceRevision() int64 { return s.sourceRev.Load() }

// publish records revision rev applied.
func (s *Store) publish(rev int64) { s.applied.Trigger(uint64(rev)) }

// heard records what upstream u sent: it is alive, and the source is at
// revision rev or later.
func (s *Store) heard(u *upstream, rev int64) {
	s.contact.Add(1)
	for old := s.sourceRev.Load(); rev > old && !s.sourceRev.CompareAndSwap(old, rev); old = s.sourceRev.Load() {
	}
}

// session is an upstream whose watch the store follows; ctx ends with
// the session (a proof still asked of it then is given up, and the round
// retried on the next).
type session struct {
	u   *upstream
	ctx context.Context
}

// followUp records that the store follows u's watch, for as long as ctx
// lives; unfollow that it does not.
func (s *Store) followUp(ctx context.Context, u *upstream) {
	s.followed.Store(&session{u: u, ctx: ctx})
	s.lead.Store(uint64(slices.Index(s.ups, u)) + 1)
}

func (s *Store) unfollow() {
	s.followed.Store(nil)
	s.lead.Store(0)
}

// publishStatus publishes why the follow loop follows no upstream, as it
// decided last (Stalled).
func (s *Store) publishStatus(core *followCore) {
	err := core.stalled(false)
	s.stall.Store(&err)
}

// Stalled is nil while the store follows an upstream's watch, and else
// says why it does not (what each upstream tried came to, or the fence):
// the store cannot advance meanwhile (/readyz).
func (s *Store) Stalled() error {
	if err := s.Fenced(); err != nil {
		return err
	}
	if s.followed.Load() != nil {
		return nil
	}
	if p := s.stall.Load(); p != nil {
		return *p
	}
	return nil
}

// WaitRevision returns once the local store holds revision rev, or with
// ctx's error, or the fence's (the store will not be served).
func (s *Store) WaitRevision(ctx context.Context, rev int64) error {
	select {
	case <-s.applied.Wait(uint64(rev)):
		return s.Fenced()
	case <-s.fenced:
		return s.Fenced()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the local member and closes the clients. The local store's
// files stay until the next bootstrap replaces them.
func (s *Store) Close() {
	s.closeOnce.Do(func() {
		s.fence(errClosed)
		s.waitCalls()
		if s.e != nil {
			s.e.Close()
		}
		for _, u := range s.ups {
			u.close()
		}
		if s.forward != nil {
			_ = s.forward.Close()
		}
		if s.all != nil {
			_ = s.all.Close()
		}
		if s.auth != nil {
			// Closed once the front's last checks are done with it.
			s.auth.view.Load().retire()
		}
		s.m.current.CompareAndSwap(s, nil)
	})
}

// Enter admits a call of the front to the store, unless it is fenced:
// the call's context then ends at the fence, and leave, which it must
// call, lets Close go on once every call has left.
func (s *Store) Enter(ctx context.Context) (_ context.Context, leave func(), err error) {
	s.calls.Lock()
	if err := s.Fenced(); err != nil {
		s.calls.Unlock()
		return ctx, nil, err
	}
	s.calls.n++
	s.calls.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.fenceCtx, func() { cancel(s.Fenced()) })
	return ctx, func() {
		stop()
		cancel(nil)
		s.calls.Lock()
		s.calls.n--
		s.calls.Unlock()
	}, nil
}

// callsWait bounds how long Close waits for the front's calls to leave
// the store (they end at the fence; one stuck longer is logged, and the
// store closed under it).
const callsWait = 30 * time.Second

// waitCalls waits until no call of the front is in the store (the store
// is fenced: none enters).
func (s *Store) waitCalls() {
	t := s.clock.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	deadline := s.clock.Now().Add(callsWait)
	for {
		s.calls.Lock()
		n := s.calls.n
		s.calls.Unlock()
		if n == 0 {
			return
		}
		if s.clock.Now().After(deadline) {
			s.lg.Warn("closing the store while calls of the front are still in it", zap.Int("calls", n), zap.Duration("waited", callsWait))
			return
		}
		<-t.Chan()
	}
}
