package cascade

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// The follow loop's decisions, apart from its I/O: which upstream to
// follow next, when to wait before trying them again, and when the store
// must be built again (Store.Run carries them out and feeds each session's
// outcome back with done). It is not safe for concurrent use: the follow
// loop owns it, and publishes what the front may read (followStatus).

// outcomeKind is how following one upstream ended.
type outcomeKind int

const (
	// outcomeLost: the upstream could not be followed, or stopped
	// delivering (no answer within the upstream timeout, its watch ended,
	// it went silent).
	outcomeLost outcomeKind = iota
	// outcomeCompacted: the upstream compacted past the revision the
	// store needs next.
	outcomeCompacted
	// outcomeOtherHistory: the upstream holds another history than the
	// store (another cluster, or the same cluster restored from a backup
	// behind the store): the store must never be served again.
	outcomeOtherHistory
	// outcomeDiverged: the store no longer equals the source at a revision
	// the Applier checked.
	outcomeDiverged
)

func (k outcomeKind) String() string {
	return [...]string{"lost", "compacted past the revision needed", "another history", "diverged"}[k]
}

// outcome is what one session with an upstream came to.
type outcome struct {
	kind outcomeKind
	// followed: the upstream's watch delivered (events or progress past
	// its creation, or a read that found it quiet) before the session
	// ended. A watch created and then compacted did not.
	followed bool
	err      error
}

// actionKind is what the follow loop does next.
type actionKind int

const (
	// actFollow: follow upstream i (open, check its history, apply its
	// watch) until the session ends; then done.
	actFollow actionKind = iota
	// actWait: every upstream failed in turn; wait before the next turn.
	actWait
	// actBootstrap: stop serving the store and build it again (err says
	// why: ErrOtherHistory, ErrDiverged or ErrBehind).
	actBootstrap
)

type action struct {
	kind     actionKind
	upstream int
	wait     time.Duration
	err      error
}

// followCore decides, for a store at revision need-1 and its upstreams, in
// turns: each upstream is followed once per turn, starting after the last
// followed; an upstream's outcome counts until the store advances or one
// is followed. The store is built again at once when an upstream holds
// another history or the store diverged; and when, in a turn, no upstream
// could be followed and at least one has compacted past the revision
// needed (an upstream that holds it is used, one that does not is never
// waited for while the others are lost). A turn that followed none and
// found no compaction waits, longer after each (waitFirst doubling to
// waitMax), before the next.
type followCore struct {
	urls               []string
	waitFirst, waitMax time.Duration
	need               int64
	next               int
	last               []outcome
	tried              []bool
	failedTurns        int
	waited             bool
	bootstrap          error
}

func newFollowCore(urls []string, first int, waitFirst, waitMax time.Duration) *followCore {
	return &followCore{urls: urls, waitFirst: waitFirst, waitMax: waitMax, next: first,
		last: make([]outcome, len(urls)), tried: make([]bool, len(urls))}
}

// step is the next action.
func (c *followCore) step() action {
	if c.bootstrap != nil {
		return action{kind: actBootstrap, err: c.bootstrap}
	}
	if c.all() {
		compacted, followed := false, false
		for _, o := range c.last {
			compacted = compacted || o.kind == outcomeCompacted
			followed = followed || o.followed
		}
		switch {
		case followed:
			// One delivered in this turn: a new turn, at once.
			c.newTurn()
			c.failedTurns = 0
			return c.step()
		case compacted:
			return action{kind: actBootstrap, err: fmt.Errorf("%w (revision %d): %s", ErrBehind, c.need, c.describe())}
		case !c.waited:
			c.waited = true
			c.failedTurns++
			return action{kind: actWait, wait: c.backoff()}
		}
		c.newTurn()
	}
	for c.tried[c.next] {
		c.next = (c.next + 1) % len(c.urls)
	}
	return action{kind: actFollow, upstream: c.next}
}

// done records how following upstream i ended; need is the revision the
// store needs next, after the session.
func (c *followCore) done(i int, o outcome, need int64) {
	if o.kind == outcomeCompacted {
		// Compacted past the store: whatever it sent before, it cannot
		// be followed (etcd creates a watch, then cancels it compacted).
		o.followed = false
	}
	if need != c.need {
		// The store advanced: what the others said was of another
		// revision.
		c.need = need
		c.newTurn()
		c.failedTurns = 0
	}
	c.last[i], c.tried[i] = o, true
	c.next = (i + 1) % len(c.urls)
	switch o.kind {
	case outcomeOtherHistory, outcomeDiverged:
		c.bootstrap = o.err
	}
}

func (c *followCore) all() bool {
	for _, t := range c.tried {
		if !t {
			return false
		}
	}
	return true
}

func (c *followCore) newTurn() {
	clear(c.tried)
	c.waited = false
}

// backoff is the wait after the failedTurns-th turn in a row that
// followed no upstream.
func (c *followCore) backoff() time.Duration {
	d := c.waitFirst
	for range c.failedTurns - 1 {
		if d >= c.waitMax {
			break
		}
		d *= 2
	}
	return min(d, c.waitMax)
}

// describe says what each upstream tried in this turn came to.
func (c *followCore) describe() string {
	var parts []string
	for i, u := range c.urls {
		if !c.tried[i] {
			continue
		}
		o := c.last[i]
		s := u + ": " + o.kind.String()
		if o.err != nil {
			s = u + ": " + o.err.Error()
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// stalled is why the store follows no upstream, for /readyz: nil while it
// follows one (following says so).
func (c *followCore) stalled(following bool) error {
	if following || c.bootstrap != nil {
		return c.bootstrap
	}
	if d := c.describe(); d != "" {
		return errors.New("following no upstream: " + d)
	}
	return errors.New("following no upstream yet")
}
