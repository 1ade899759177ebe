package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The feeders without a read per transaction. Before it copies versions
// up to source revision r, a mirror must know the feeders as of r or later
// (mirrored.go). Reading the source's checkpoints for that costs a round
// trip to the source per transaction: nothing at loopback, but across a
// WAN of 150 ms it held a mirror at 2,000 puts/s 0.7 s behind (0.15 s
// without the read). So while the mirror watches the source, a second
// watch on the same stream follows the source's reserved prefix from the
// revision the feeders were read at: every mirror checkpoint created,
// changed or deleted there comes through it in revision order, and its
// events and progress notifications say up to which revision nothing
// that would change the feeders has happened. Only such a change (a
// checkpoint of a mirror not known, with another cluster or prefix, or
// deleted) sends the mirror back to reading them.

// linkFollower is that watch and what it has told.
type linkFollower struct {
	cancel context.CancelFunc
	done   chan struct{}
	// moved holds a token once the watch has told something new.
	moved chan struct{}
	// request asks the source for a progress notification on the stream;
	// kicks wakes the goroutine that does, while data events come (kick).
	request func() error
	kicks   chan struct{}
	clock   clockwork.Clock

	mu sync.Mutex
	// known are the links by mirror name (this mirror's own left out)
	// as of revision through: the last read's, and every change since.
	known   map[string]link
	through int64
	// stale: a change to the links came through; they must be read.
	stale bool
	// starved: a confirmation timed out (a progress notification comes
	// only once every watch on the stream has caught up: not while the
	// data watch replays a backlog); checks read until one comes.
	starved bool
	err     error
}

// followLinks watches the source's reserved prefix from revision from on
// (known being the links read at from-1), on the stream of ctx: the data
// watch's, so that a progress request moves both.
func (mr *mirror) followLinks(ctx context.Context, known []link, from int64) *linkFollower {
	lctx, cancel := context.WithCancel(ctx)
	f := &linkFollower{cancel: cancel, done: make(chan struct{}), moved: make(chan struct{}, 1), known: map[string]link{}, through: from - 1}
	f.request = func() error {
		pctx, cancel := context.WithTimeout(ctx, mr.cfg.RequestTimeout)
		defer cancel()
		return mr.cfg.Source.RequestProgress(pctx)
	}
	f.kicks, f.clock = make(chan struct{}, 1), mr.clock
	go f.ask(lctx)
	for _, l := range known {
		f.known[l.name] = l
	}
	key, end := span(ReservedPrefix)
	ch := mr.cfg.Source.Watch(lctx, key, clientv3.WithRange(end), clientv3.WithRev(from))
	except := ""
	if mr.sourceID == mr.destID {
		except = mr.cfg.Name
	}
	go func() {
		defer close(f.done)
		for resp := range ch {
			if !f.tell(resp, mr.sourceID, except) {
				return
			}
		}
		f.fail(errLinkWatchEnded)
	}()
	return f
}

// errLinkWatchEnded is why a follower whose watch closed tells nothing more.
var errLinkWatchEnded = errors.New("mirror: the watch of the source's mirror checkpoints ended")

// kick says the data watch has brought events: the source is asked for a
// progress notification soon, whose answer confirms the links through
// them, so that the check before they are copied finds them confirmed,
// or nearly, instead of asking then and waiting a round trip.
func (f *linkFollower) kick() {
	select {
	case f.kicks <- struct{}{}:
	default:
	}
}

// ask requests a progress notification for each kick, at most every
// linkProgressInterval, until ctx ends. A request that fails is not
// retried here: a check that needs the answer asks itself, or reads.
func (f *linkFollower) ask(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.kicks:
		}
		_ = f.request()
		select {
		case <-ctx.Done():
			return
		case <-f.clock.After(linkProgressInterval):
		}
	}
}

// tell takes one response of the watch; false once the watch is of no
// more use.
func (f *linkFollower) tell(resp clientv3.WatchResponse, cluster, except string) bool {
	if err := watchErr(resp, true); err != nil {
		f.fail(err)
		return false
	}
	f.mu.Lock()
	switch {
	case resp.Created:
	case resp.IsProgressNotify():
		f.through = max(f.through, resp.Header.GetRevision())
		f.starved = false
	default:
		for _, ev := range resp.Events {
			name, ok := checkpointName(string(ev.Kv.Key))
			if ok && name != except && linkChanged(f.known, name, cluster, (*mvccpb.Event)(ev)) {
				f.stale = true
			}
			// A watcher's events come in revision order, a revision's
			// together: every change up to this one has come.
			f.through = max(f.through, ev.Kv.ModRevision)
		}
	}
	f.mu.Unlock()
	f.signal()
	return true
}

func (f *linkFollower) fail(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
	f.signal()
}

func (f *linkFollower) signal() {
	select {
	case f.moved <- struct{}{}:
	default:
	}
}

// checkpointName is the mirror whose checkpoint key is key, if it is one.
func checkpointName(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, ReservedPrefix)
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "/checkpoint")
	if !ok || strings.Contains(name, "/") {
		return "", false // an ownership record or a lease of a mirror
	}
	return name, true
}

// linkChanged reports whether ev, a change of the checkpoint of the mirror
// named name in cluster, changes the links known: a mirror not known, or
// one whose cluster or prefixes differ, or deleted. A known mirror's
// progress (every transaction rewrites its checkpoint) does not.
func linkChanged(known map[string]link, name, cluster string, ev *mvccpb.Event) bool {
	had, ok := known[name]
	if ev.Type == mvccpb.DELETE {
		return ok
	}
	var c Checkpoint
	if json.Unmarshal(ev.Kv.Value, &c) != nil {
		return true // not a checkpoint we can read: let a read decide
	}
	now := link{name: name, src: c.SourceClusterID, dst: cluster, srcPrefix: c.SourcePrefix, dstPrefix: c.DestPrefix}
	return !ok || had != now
}

// confirm waits until the follower has told every change up to revision
// newest and returns that the links have not changed through it. It asks
// the source for a progress notification (on the data watch's stream)
// while it waits, at most every interval; it gives up (false: read them)
// once the links changed, the watch failed or timeout passed, and at once
// while starved.
func (f *linkFollower) confirm(ctx context.Context, clock clockwork.Clock, newest int64, interval, timeout time.Duration) (int64, bool) {
	deadline := clock.NewTimer(timeout)
	defer deadline.Stop()
	var asked time.Time
	for {
		f.mu.Lock()
		through, stale, starved, err := f.through, f.stale, f.starved, f.err
		f.mu.Unlock()
		switch {
		case stale || err != nil:
			return 0, false
		case through >= newest:
			return through, true
		case starved:
			f.kick() // so that a notification comes once the stream has caught up
			return 0, false
		}
		if clock.Since(asked) >= interval {
			asked = clock.Now()
			if f.request() != nil {
				return 0, false
			}
		}
		wait := clock.NewTimer(interval)
		select {
		case <-ctx.Done():
			wait.Stop()
			return 0, false
		case <-deadline.Chan():
			wait.Stop()
			f.mu.Lock()
			f.starved = true
			f.mu.Unlock()
			return 0, false
		case <-f.moved:
		case <-wait.Chan():
		}
		wait.Stop()
	}
}

// reset takes the links read at revision rev: the follower knows them
// again, unless its watch has not yet come that far (then the next check
// reads them again).
func (f *linkFollower) reset(links []link, rev int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rev < f.through {
		// Changes after rev came through already and are not in links.
		f.stale = true
		return
	}
	f.known = map[string]link{}
	for _, l := range links {
		f.known[l.name] = l
	}
	f.through = rev
	f.stale = false
}

// stop ends the watch.
func (f *linkFollower) stop() {
	f.cancel()
	<-f.done
}
