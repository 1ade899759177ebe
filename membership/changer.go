package membership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/backoff"
)

// Cluster is the membership part of clientv3.Cluster that a Changer calls.
type Cluster interface {
	MemberList(ctx context.Context, opts ...clientv3.OpOption) (*clientv3.MemberListResponse, error)
	MemberAddAsLearner(ctx context.Context, peerAddrs []string) (*clientv3.MemberAddResponse, error)
	MemberPromote(ctx context.Context, id uint64) (*clientv3.MemberPromoteResponse, error)
	MemberRemove(ctx context.Context, id uint64) (*clientv3.MemberRemoveResponse, error)
}

var _ Cluster = clientv3.Cluster(nil)

// ChangerConfig is how a Changer asks for a change.
type ChangerConfig struct {
	// Cluster is where every attempt, and every member list read to settle
	// a change, goes.
	Cluster Cluster
	// Clock times each attempt's deadline and the waits between attempts.
	Clock clockwork.Clock
	// Log gets a line for each attempt to be made again; nil for none.
	Log *zap.Logger
	// Attempt bounds one attempt (and one member list read). An attempt
	// cut at its bound is in doubt: it may still be applied, and what
	// comes next settles it (Classify, Settle). Shorter than etcd's own
	// request timeout (5 s plus two election timeouts) it asks a change
	// raft dropped again sooner; near the voters, shorter still, it moves
	// an attempt stuck on a silent connection to the next endpoint.
	Attempt time.Duration
	// Backoff paces the attempts: the next starts Backoff.Next() after the
	// last one started (at once if that one took longer). Each change
	// starts from Backoff.Initial.
	Backoff backoff.Exponential
}

// DefaultChangerConfig asks cluster, each attempt bounded by 5 s, the
// attempts 100 ms apart, doubling up to 500 ms: etcd refuses a change as
// "unhealthy cluster" until the member asked has been connected to a
// quorum for 5 s (etcdserver's HealthInterval), and a refusal costs the
// cluster nothing (no raft proposal), so a cap of 500 ms ends that wait at
// most that late.
func DefaultChangerConfig(cluster Cluster, clock clockwork.Clock) ChangerConfig {
	return ChangerConfig{
		Cluster: cluster,
		Clock:   clock,
		Attempt: 5 * time.Second,
		Backoff: backoff.Exponential{Initial: 100 * time.Millisecond, Max: 500 * time.Millisecond},
	}
}

// Validate reports every field that cannot work.
func (c ChangerConfig) Validate() error {
	var errs []error
	if c.Cluster == nil {
		errs = append(errs, errors.New("membership: changer: Cluster: none given"))
	}
	if c.Clock == nil {
		errs = append(errs, errors.New("membership: changer: Clock: none given"))
	}
	if c.Attempt <= 0 {
		errs = append(errs, fmt.Errorf("membership: changer: Attempt %v: must be above 0", c.Attempt))
	}
	if c.Backoff.Initial <= 0 {
		errs = append(errs, fmt.Errorf("membership: changer: Backoff.Initial %v: must be above 0", c.Backoff.Initial))
	}
	if c.Backoff.Max < c.Backoff.Initial {
		errs = append(errs, fmt.Errorf("membership: changer: Backoff.Max %v: must be at least Backoff.Initial (%v)", c.Backoff.Max, c.Backoff.Initial))
	}
	return errors.Join(errs...)
}

// Changer makes membership changes: each attempt bounded, its answer read
// by Classify (and the member list by Settle where the answer alone does
// not say), asked again while that says Retry, until the change is made,
// refused, or ctx ends. It is the only code in understudy that adds,
// promotes or removes a member. A Changer holds no state between changes;
// one may be used by several goroutines at once.
type Changer struct {
	cfg ChangerConfig
}

// NewChanger returns a Changer for cfg, or cfg's problems.
func NewChanger(cfg ChangerConfig) (*Changer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	return &Changer{cfg: cfg}, nil
}

// Result is a change made.
type Result struct {
	// Member is the member as the last answer or member list showed it:
	// the learner added, the member promoted; nil after a remove.
	Member *etcdserverpb.Member
	// Members is the member list the last answer carried or the list read
	// to settle the change, if any.
	Members []*etcdserverpb.Member
	// Already: the change was found made (Answer.Already), not made by an
	// answered attempt of this call; after an attempt in doubt, that one's
	// doing, or someone else's.
	Already bool
	// Attempts is how many attempts were made.
	Attempts int
}

// ChangeError is a change that was not made.
type ChangeError struct {
	Change Change
	// Verdict is Refused, Failed, or Retry when ctx ended first.
	Verdict Verdict
	// InDoubt: an attempt went unanswered and nothing settled it since:
	// the change may yet be applied.
	InDoubt bool
	// Attempts is how many attempts were made.
	Attempts int
	// Err is the last answer: etcd's, or Settle's reason, or the error of
	// the member list read to settle it; nil if ctx ended before any.
	Err error
	// Ctx is ctx's error if it ended first.
	Ctx error
	// Member is the member in the way of a refused change (Answer.Member).
	Member *etcdserverpb.Member
}

func (e *ChangeError) Error() string {
	var s string
	switch {
	case e.Ctx != nil && e.Err == nil:
		s = fmt.Sprintf("%v before any answer", e.Ctx)
	case e.Ctx != nil:
		s = fmt.Sprintf("%v after %d attempt%s (last answer: %v)", e.Ctx, e.Attempts, map[bool]string{true: "s"}[e.Attempts != 1], e.Err)
	case e.Verdict == Refused && !errors.Is(e.Err, ErrRefused) && !errors.Is(e.Err, ErrPeerURLsHeld) && !errors.Is(e.Err, ErrNoMember):
		s = "etcd refused: " + e.Err.Error()
	default:
		s = e.Err.Error()
	}
	if e.InDoubt {
		s += "; an attempt went unanswered and may still be applied"
	}
	return s
}

// Unwrap gives ctx's error, if it ended first, and the last answer.
func (e *ChangeError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Ctx, e.Err} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Unchanged tells whether err is a change refused with nothing in doubt:
// the cluster is as it was before the change was asked for. Any other
// error from a Changer may hide a change that is still to be applied.
func Unchanged(err error) bool {
	var ce *ChangeError
	return errors.As(err, &ce) && ce.Verdict == Refused && !ce.InDoubt
}

// AddLearner adds a learner at peerURLs. A learner at exactly these URLs
// that never started is taken as the one added (an earlier attempt's add,
// applied after all; or one a first start left behind): Result.Already.
func (ch *Changer) AddLearner(ctx context.Context, peerURLs []string) (Result, error) {
	return ch.change(ctx, Change{Op: OpAddLearner, PeerURLs: slices.Clone(peerURLs)})
}

// Promote promotes learner id; a member that is a voter already is done.
// Understudy's own promotion rule is the caller's to check first.
func (ch *Changer) Promote(ctx context.Context, id uint64) (Result, error) {
	return ch.change(ctx, Change{Op: OpPromote, ID: id})
}

// Remove removes member id, voter or learner; a member not found is done.
func (ch *Changer) Remove(ctx context.Context, id uint64) (Result, error) {
	return ch.change(ctx, Change{Op: OpRemove, ID: id})
}

// RemoveLearner removes learner id, which the caller has just seen a
// learner; a member not found is done. After an attempt in doubt it lists
// the members before asking again, and a member found a voter (promoted
// meanwhile) is refused (ErrRefused): never removed here.
func (ch *Changer) RemoveLearner(ctx context.Context, id uint64) (Result, error) {
	return ch.change(ctx, Change{Op: OpRemoveLearner, ID: id})
}

// change asks for c until an answer or the member list says it is made or
// will not be, or ctx ends, feeding each answer back: an unanswered
// attempt leaves the change in doubt, and what comes next settles it.
func (ch *Changer) change(ctx context.Context, c Change) (Result, error) {
	cfg := ch.cfg
	b := cfg.Backoff
	b.Reset()
	var (
		res     Result
		inDoubt bool
		last    error
		began   time.Time
	)
	fail := func(v Verdict, err error, m *etcdserverpb.Member) (Result, error) {
		return res, &ChangeError{Change: c, Verdict: v, InDoubt: inDoubt, Attempts: res.Attempts, Err: err, Member: m}
	}
	ended := func() (Result, error) {
		return res, &ChangeError{Change: c, Verdict: Retry, InDoubt: inDoubt, Attempts: res.Attempts, Err: last, Ctx: ctx.Err()}
	}
	for {
		if res.Attempts > 0 {
			d := max(b.Next()-cfg.Clock.Since(began), 0)
			cfg.Log.Info("membership change not made yet; asking again", zap.Stringer("change", c), zap.Int("attempts", res.Attempts),
				zap.Bool("in-doubt", inDoubt), zap.Duration("backoff", d), zap.Error(last))
			if ctx.Err() != nil || (d > 0 && backoff.Wait(ctx, cfg.Clock, d) != nil) {
				return ended()
			}
			if c.Op == OpRemoveLearner && inDoubt {
				// Asked again only while the list shows it a learner.
				began = cfg.Clock.Now()
				a, members, err := ch.settle(ctx, c)
				switch {
				case err != nil && Classify(c.Op, err).Verdict == Retry:
					last = fmt.Errorf("listing the members: %w", err)
					if ctx.Err() != nil {
						return ended()
					}
					continue
				case err != nil:
					return fail(Failed, fmt.Errorf("listing the members: %w", err), nil)
				case a.Verdict == Done:
					res.Members, res.Already = members, true
					return res, nil
				case a.Verdict == Refused:
					return fail(Refused, a.Why, a.Member)
				}
			}
		}
		began = cfg.Clock.Now()
		res.Attempts++
		m, members, err := ch.call(ctx, c)
		a := Classify(c.Op, err)
		inDoubt = inDoubt || a.Unanswered
		if a.Verdict == Check {
			s, listed, lerr := ch.settle(ctx, c)
			switch {
			case lerr != nil && Classify(c.Op, lerr).Verdict == Retry:
				a, err = Answer{Verdict: Retry}, fmt.Errorf("%w; then listing the members: %w", err, lerr)
			case lerr != nil:
				return fail(Failed, fmt.Errorf("%w; then listing the members: %w", err, lerr), nil)
			default:
				a, m, members = s, s.Member, listed
				if s.Why != nil {
					err = fmt.Errorf("%w (etcd answered: %w)", s.Why, err)
				}
			}
		}
		switch a.Verdict {
		case Done:
			res.Member, res.Members, res.Already = m, members, a.Already
			return res, nil
		case Refused:
			return fail(Refused, err, a.Member)
		case Failed:
			return fail(Failed, err, nil)
		}
		if ctx.Err() != nil {
			if last == nil {
				last = err
			}
			return ended()
		}
		last = err
	}
}

// call makes one attempt of c within cfg.Attempt.
func (ch *Changer) call(ctx context.Context, c Change) (*etcdserverpb.Member, []*etcdserverpb.Member, error) {
	actx, cancel := clockwork.WithTimeout(ctx, ch.cfg.Clock, ch.cfg.Attempt)
	defer cancel()
	cl := ch.cfg.Cluster
	switch c.Op {
	case OpAddLearner:
		resp, err := cl.MemberAddAsLearner(actx, c.PeerURLs)
		if err != nil || resp == nil {
			return nil, nil, err
		}
		return resp.Member, resp.Members, nil
	case OpPromote:
		resp, err := cl.MemberPromote(actx, c.ID)
		if err != nil || resp == nil {
			return nil, nil, err
		}
		return find(resp.Members, c.ID), resp.Members, nil
	case OpRemove, OpRemoveLearner:
		resp, err := cl.MemberRemove(actx, c.ID)
		if err != nil || resp == nil {
			return nil, nil, err
		}
		return nil, resp.Members, nil
	}
	return nil, nil, fmt.Errorf("membership: %v: not a change a Changer makes", c.Op)
}

// settle reads the member list within cfg.Attempt and judges c by it.
func (ch *Changer) settle(ctx context.Context, c Change) (Answer, []*etcdserverpb.Member, error) {
	actx, cancel := clockwork.WithTimeout(ctx, ch.cfg.Clock, ch.cfg.Attempt)
	defer cancel()
	resp, err := ch.cfg.Cluster.MemberList(actx)
	if err != nil {
		return Answer{}, nil, err
	}
	return Settle(c, resp.Members), resp.Members, nil
}

func find(members []*etcdserverpb.Member, id uint64) *etcdserverpb.Member {
	i := slices.IndexFunc(members, func(m *etcdserverpb.Member) bool { return m.ID == id })
	if i < 0 {
		return nil
	}
	return members[i]
}
