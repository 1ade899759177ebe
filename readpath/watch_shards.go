package readpath

import (
	"context"
	"errors"
	"io"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A client's watch stream, served over several of etcd's.
//
// etcd's watch server (v3rpc) gives each gRPC stream one mvcc watch
// stream, whose channel holds 128 responses for all the stream's watchers.
// A put that matches more of a stream's watchers than that makes the rest
// victims, which the store retries only when a pass over them moves one,
// else 10 ms later (mvcc's syncVictimsLoop): with 1,000 watchers of one
// prefix on each stream (100,000 watchers over 100 prefixes), delivery p99
// was 47–61 ms here, against 12–13 ms with the same watchers 100 to a
// stream. So the front serves a client's stream over as many of etcd's own
// watch streams (shards, each etcd's Watch, unchanged) as its watchers
// need, watchShardSize to a shard; a stream with fewer is served by one,
// as before. What etcd's stream promises its client, this one keeps:
//
//   - Created answers come in the order of the creates: creates go to one
//     shard at a time, and move to another only once every create sent is
//     answered.
//   - Watch IDs are the stream's, not a shard's: the front numbers the
//     watchers as etcd does (from 0, skipping those in use) and asks each
//     shard for the ID it chose; a client's own ID goes to the shard that
//     has it, if any, which refuses it as etcd does.
//   - A progress answer at revision R comes after every event up to R of
//     every watcher the stream had when the request came (progress).
const watchShardSize = 100

// watchShards serves one client stream.
type watchShards struct {
	etcd   pb.WatchServer
	client pb.Watch_WatchServer
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// ended takes what the first shard to end by itself returned.
	ended chan error

	// sendMu orders the shards' sends on the client stream.
	sendMu sync.Mutex

	mu struct {
		sync.Mutex
		shards []*watchShard
		// target takes the creates (and took the last one); owner is each
		// watch ID's shard, from its create to its cancel; next is the
		// next ID to try.
		target *watchShard
		owner  map[int64]*watchShard
		next   int64
		// unanswered counts creates whose Created answer is not yet sent
		// to the client; answered is closed (and replaced) when it drops
		// to 0.
		unanswered int
		answered   chan struct{}
		// pending are the client's progress requests not yet answered,
		// oldest first (progress).
		pending []*progressRequest
		// ending: shardedWatch is waiting for the shards; none starts.
		ending bool
	}
}

// watchShard is one of etcd's watch streams serving part of a client's.
// Its fields are the stream's mu's.
type watchShard struct {
	pb.Watch_WatchServer // the client's, for its headers
	s                    *watchShards
	reqs                 chan *pb.WatchRequest
	ctx                  context.Context
	cancel               context.CancelFunc
	// watchers it serves; creates sent, not yet answered, in order (each
	// the ID asked, dup: an ID another watcher holds there).
	watchers int
	creates  []shardCreate
	// asked counts progress requests sent not yet answered (one a shard
	// skipped stays counted); sealed: it takes no create again (see
	// progress).
	asked  int
	sealed bool
	gone   bool
	// holdsSend: it holds sendMu between the fragments of a response
	// (its send loop's alone).
	holdsSend bool
}

type shardCreate struct {
	id  int64
	dup bool
}

// shardedWatch serves client's stream with etcd's watch server, over as
// many of its streams as the watchers need.
func shardedWatch(etcd pb.WatchServer, client pb.Watch_WatchServer) error {
	ctx, cancel := context.WithCancel(client.Context())
	s := &watchShards{etcd: etcd, client: client, ctx: ctx, cancel: cancel, ended: make(chan error, 1)}
	s.mu.owner = map[int64]*watchShard{}
	s.mu.answered = make(chan struct{})
	s.mu.Lock()
	s.mu.target = s.addShard()
	s.mu.Unlock()
	received := make(chan error, 1)
	go func() { received <- s.recvLoop() }()
	var err error
	select {
	case err = <-received:
		if err == nil { // the client sends no more: serve until it goes
			select {
			case err = <-s.ended:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
	case err = <-s.ended:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.mu.Lock()
	s.mu.ending = true
	s.mu.Unlock()
	cancel()
	s.wg.Wait()
	if cerr := client.Context().Err(); cerr != nil {
		// Its own error, as etcd's watch server returns it: a
		// require-leader stream ended for want of a leader says so
		// (leaderWatch's context), which contexts derived from it do not.
		err = cerr
	}
	if errors.Is(err, context.Canceled) {
		err = rpctypes.ErrGRPCWatchCanceled // as etcd's watch server says it
	}
	return err
}

// addShard starts one of etcd's streams (none once the stream ends: its
// shard takes nothing). With mu held.
func (s *watchShards) addShard() *watchShard {
	ctx, cancel := context.WithCancel(s.ctx)
	sh := &watchShard{Watch_WatchServer: s.client, s: s, reqs: make(chan *pb.WatchRequest, 16), ctx: ctx, cancel: cancel}
	if s.mu.ending {
		cancel()
		return sh
	}
	s.mu.shards = append(s.mu.shards, sh)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := s.etcd.Watch(sh)
		s.mu.Lock()
		gone := sh.gone
		s.mu.Unlock()
		if !gone { // a shard ended by the front (empty) is no failure
			select {
			case s.ended <- err:
			default:
			}
		}
	}()
	return sh
}

func (sh *watchShard) Context() context.Context { return sh.ctx }

// Recv gives etcd's stream the requests the front routes to it.
func (sh *watchShard) Recv() (*pb.WatchRequest, error) {
	select {
	case r, ok := <-sh.reqs:
		if !ok {
			return nil, io.EOF
		}
		return r, nil
	case <-sh.ctx.Done():
		return nil, sh.ctx.Err()
	}
}

// Send takes etcd's stream's answers to the client.
func (sh *watchShard) Send(r *pb.WatchResponse) error { return sh.s.forward(sh, r) }

// route hands r to sh, unless the stream ends first; a shard ended
// meanwhile (dropIfIdle: it has no watcher) takes nothing, as etcd's
// stream answers a progress request or a cancel of no watcher nothing.
func (s *watchShards) route(sh *watchShard, r *pb.WatchRequest) error {
	select {
	case sh.reqs <- r:
		return nil
	case <-sh.ctx.Done():
		return s.ctx.Err()
	}
}

// recvLoop routes the client's requests until it sends no more (nil) or
// its stream fails.
func (s *watchShards) recvLoop() error {
	for {
		req, err := s.client.Recv()
		if err == io.EOF {
			s.mu.Lock()
			for _, sh := range s.mu.shards {
				close(sh.reqs)
			}
			s.mu.shards = nil // nothing is routed again
			s.mu.Unlock()
			return nil
		}
		if err != nil {
			return err
		}
		switch uv := req.RequestUnion.(type) {
		case *pb.WatchRequest_CreateRequest:
			if uv.CreateRequest == nil {
				continue
			}
			sh, err := s.createShard(uv.CreateRequest)
			if err != nil {
				return err
			}
			err = s.route(sh, req)
		case *pb.WatchRequest_CancelRequest:
			if uv.CancelRequest == nil {
				continue
			}
			s.mu.Lock()
			sh, ok := s.mu.owner[uv.CancelRequest.WatchId]
			if !ok {
				sh = s.mu.target // etcd answers nothing for an unknown ID
			}
			s.mu.Unlock()
			err = s.route(sh, req)
		case *pb.WatchRequest_ProgressRequest:
			if uv.ProgressRequest == nil {
				continue
			}
			for _, sh := range s.askProgress() {
				if err = s.route(sh, req); err != nil {
					break
				}
			}
		default: // etcd logs it and goes on
			s.mu.Lock()
			sh := s.mu.target
			s.mu.Unlock()
			err = s.route(sh, req)
		}
		if err != nil {
			return err
		}
	}
}

// createShard picks the shard for cr, numbering it if the client left it
// to the server, and records it as sent. A create goes to another shard
// than the last one's only once every create sent is answered.
func (s *watchShards) createShard(cr *pb.WatchCreateRequest) (*watchShard, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		sh, dup := s.mu.owner[cr.WatchId]
		dup = dup && cr.WatchId != clientv3.AutoWatchID // held there: etcd refuses it
		if !dup {
			sh = s.openShard()
		}
		if sh != s.mu.target && s.mu.unanswered > 0 {
			ch := s.mu.answered
			s.mu.Unlock()
			select {
			case <-ch:
			case <-s.ctx.Done():
				s.mu.Lock()
				return nil, s.ctx.Err()
			}
			s.mu.Lock()
			continue // the books moved meanwhile: pick again
		}
		if sh == nil {
			sh = s.addShard()
		}
		old := s.mu.target
		s.mu.target = sh
		if old != sh {
			s.dropIfIdle(old)
		}
		if dup {
			sh.creates = append(sh.creates, shardCreate{id: cr.WatchId, dup: true})
			s.mu.unanswered++
			return sh, nil
		}
		id := cr.WatchId
		if id == clientv3.AutoWatchID {
			// As etcd numbers them: the next not in use. The first, 0, is
			// asked as etcd's own (AutoWatchID is 0) of a shard that has
			// numbered none, which gives 0.
			for {
				if _, used := s.mu.owner[s.mu.next]; !used {
					break
				}
				s.mu.next++
			}
			id = s.mu.next
			s.mu.next++
			cr.WatchId = id
		}
		s.mu.owner[id] = sh
		sh.creates = append(sh.creates, shardCreate{id: id})
		s.mu.unanswered++
		return sh, nil
	}
}

// openShard is the shard that takes the next create: the target while it
// has room and no progress request unanswered, else the first such other,
// else nil (a new one). With mu held.
func (s *watchShards) openShard() *watchShard {
	takes := func(sh *watchShard) bool {
		return sh != nil && !sh.gone && !sh.sealed && sh.asked == 0 && sh.watchers+len(sh.creates) < watchShardSize
	}
	if takes(s.mu.target) {
		return s.mu.target
	}
	for _, sh := range s.mu.shards {
		if takes(sh) {
			return sh
		}
	}
	return nil
}

// forward sends a shard's answer to the client, keeping the stream's
// books: creates answered, watchers gone, progress (whose answers it
// merges: progress).
func (s *watchShards) forward(sh *watchShard, r *pb.WatchResponse) error {
	created := false
	var then *pb.WatchResponse // a progress answer the books complete
	s.mu.Lock()
	switch {
	case r.Created && len(sh.creates) > 0:
		created = true
		c := sh.creates[0]
		sh.creates = sh.creates[1:]
		switch {
		case !r.Canceled:
			sh.watchers++
			if r.WatchId != c.id { // etcd numbered it (AutoWatchID)
				delete(s.mu.owner, c.id)
			}
			// Also a duplicate's: its ID was freed before etcd took it.
			s.mu.owner[r.WatchId] = sh
		case !c.dup:
			delete(s.mu.owner, c.id)
			then = s.emptied(sh)
		}
	case r.Canceled && r.WatchId != clientv3.InvalidWatchID && r.CompactRevision == 0:
		// An answer to a cancel: the ID is free. (A watcher canceled by a
		// compaction keeps it until the client cancels it, as in etcd.)
		if s.mu.owner[r.WatchId] == sh {
			delete(s.mu.owner, r.WatchId)
			sh.watchers--
			then = s.emptied(sh)
		}
	case isProgress(r):
		r = s.progressAnswered(sh, r)
	}
	s.mu.Unlock()
	// A response etcd sent in fragments (WatchCreateRequest.Fragment)
	// goes out whole: the client joins consecutive fragments, and drops
	// what comes between them. So a shard keeps the stream from its first
	// fragment to its last (its sends are one goroutine's: its send loop).
	var err error
	if !sh.holdsSend {
		s.sendMu.Lock()
	}
	for _, a := range []*pb.WatchResponse{r, then} {
		if a != nil && err == nil {
			err = s.client.Send(a)
		}
	}
	sh.holdsSend = r != nil && r.Fragment && err == nil
	if !sh.holdsSend {
		s.sendMu.Unlock()
	}
	if created {
		s.mu.Lock()
		if s.mu.unanswered--; s.mu.unanswered == 0 {
			close(s.mu.answered)
			s.mu.answered = make(chan struct{})
		}
		s.mu.Unlock()
	}
	return err
}

// emptied is called when sh may serve no watcher: then no progress request
// waits for its answer (etcd's stream without watchers answers none), and
// it ends unless it takes the creates (dropIfIdle). It returns the
// stream's progress answer this completes, if any. With mu held.
func (s *watchShards) emptied(sh *watchShard) *pb.WatchResponse {
	if sh.watchers > 0 || len(sh.creates) > 0 {
		return nil
	}
	for _, p := range s.mu.pending {
		delete(p.waiting, sh)
	}
	s.dropIfIdle(sh)
	return s.progressDone()
}

// dropIfIdle ends sh if it serves nothing and takes no creates. With mu
// held.
func (s *watchShards) dropIfIdle(sh *watchShard) {
	if sh.watchers > 0 || len(sh.creates) > 0 || sh == s.mu.target || sh.gone {
		return
	}
	sh.gone = true
	for i, o := range s.mu.shards {
		if o == sh {
			s.mu.shards = append(s.mu.shards[:i], s.mu.shards[i+1:]...)
			break
		}
	}
	for _, p := range s.mu.pending {
		delete(p.waiting, sh)
	}
	sh.cancel()
}

// Progress. A client's progress request asks for an answer at a revision
// R once every event up to R of each of its watchers is sent. Each shard
// asked answers for its own watchers (after their events up to its R, as
// its answers share one channel), or not at all if one is not synced or
// its channel is full (mvcc's progressIfSync), as etcd's stream does. The
// stream answers with the lowest R once every shard that had watchers, or
// creates sent, when the request came has answered after it came; an
// answer completing a later request completes the earlier ones too.
//
// That a shard's answer after the request came covers the watchers it had
// then: it answers a request sent at or before that. One sent at it, fine.
// One sent before it counts only if the shard took no create in between:
// so a shard with a request unanswered (asked > 0) takes no create, and
// one asked again with a request unanswered (it may have skipped one:
// which answer is which is no longer known) takes none ever again
// (sealed), its watchers only leaving. A stream with one shard answers as
// etcd's does.

// maxPendingProgress bounds the progress requests a stream keeps waiting:
// an older one is answered by any later one's answer, or not at all, as
// etcd answers none a shard skips.
const maxPendingProgress = 16

// progressRequest is a client's progress request: the shards whose answer
// it waits for, and the answer with the lowest revision so far.
type progressRequest struct {
	waiting map[*watchShard]bool
	answer  *pb.WatchResponse
}

// isProgress tells an answer to a progress request (mvcc's progressAll:
// the stream's, not a watcher's).
func isProgress(r *pb.WatchResponse) bool {
	return r.WatchId == clientv3.InvalidWatchID && !r.Created && !r.Canceled && len(r.Events) == 0 && r.CompactRevision == 0
}

// askProgress records a client's progress request and returns the shards
// to send it to: those with watchers or creates sent (none: etcd answers a
// stream without watchers nothing).
func (s *watchShards) askProgress() []*watchShard {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &progressRequest{waiting: map[*watchShard]bool{}}
	var to []*watchShard
	for _, sh := range s.mu.shards {
		if sh.watchers+len(sh.creates) == 0 {
			continue
		}
		p.waiting[sh] = true
		to = append(to, sh)
		if sh.asked++; sh.asked > 1 {
			sh.sealed = true
		}
	}
	if len(to) > 0 {
		s.mu.pending = append(s.mu.pending, p)
		if len(s.mu.pending) > maxPendingProgress {
			s.mu.pending = s.mu.pending[1:]
		}
	}
	return to
}

// progressAnswered takes sh's answer to a progress request, and returns
// the stream's answer if it completes one. With mu held.
func (s *watchShards) progressAnswered(sh *watchShard, r *pb.WatchResponse) *pb.WatchResponse {
	if sh.asked > 0 {
		sh.asked--
	}
	for _, p := range s.mu.pending {
		if p.waiting[sh] {
			delete(p.waiting, sh)
			if p.answer == nil || r.GetHeader().GetRevision() < p.answer.GetHeader().GetRevision() {
				p.answer = r
			}
		}
	}
	return s.progressDone()
}

// progressDone is the answer of the latest pending request that every
// shard it waited for has answered (nil if none, or if they all left
// without answering); that request and every earlier one are done. With
// mu held.
func (s *watchShards) progressDone() *pb.WatchResponse {
	for i := len(s.mu.pending) - 1; i >= 0; i-- {
		if p := s.mu.pending[i]; len(p.waiting) == 0 {
			s.mu.pending = s.mu.pending[i+1:]
			return p.answer
		}
	}
	return nil
}
