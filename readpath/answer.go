package readpath

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/wire"
)

// answerHeader tells, in the response header of a read, watch or
// forwarded write, how the replica served it (wire.ReadModeKey), the
// staleness it can prove (wire.StalenessBoundKey), whether it knows a
// leader (wire.KnownLeaderKey) and its store's revision
// (wire.AppliedRevisionKey): Consul's LastContact and KnownLeader, so that
// clients and balancers learn freshness from traffic. It does so when the
// request asks (wire.FreshnessKey, or a probe's wire.ProbeKey), as Spanner
// returns a read's timestamp only when asked, or on every answer with
// always (--freshness-headers=always): the four keys cost a weak read about
// a tenth of its throughput, which a client that never reads them should
// not pay.
//
// The header is on the hot path of the reads that ask, so it costs as
// little as grpc-go lets it: the bound is rounded up to a short ladder of values
// (boundText), and the last header built for each mode is reused while its
// four values hold — no allocation, and values that HTTP/2's header
// compression (HPACK) finds in its table and sends as one-byte indexes.
type answerHeader struct {
	// always attaches the header to every answer, asked or not.
	always bool
	// age is the time since the start of the last completed own round.
	age func() time.Duration
	// hasLeader is the require-leader check's answer.
	hasLeader func() bool
	// rev is the local store's current revision, for answers that carry
	// none of their own (streams, errors).
	rev func() int64
	// last is the last header built for each mode (modeIndex).
	last [len(answerModes)]atomic.Pointer[builtHeader]
}

// answerModes are the modes an answer header tells, in modeIndex's order.
var answerModes = [...]string{modeStrong, modeWeak, modeBounded, modeForwarded}

func modeIndex(mode string) int {
	switch mode {
	case modeStrong:
		return 0
	case modeWeak:
		return 1
	case modeBounded:
		return 2
	default:
		return 3
	}
}

// builtHeader is a header and the values it was built from. Its md is
// shared by every answer that reuses it, never changed: grpc-go copies a
// header it is given (metadata.Join) before it adds anything of its own.
type builtHeader struct {
	bound  string
	leader bool
	rev    int64
	md     metadata.MD
}

// answer is what an answer's header says, taken before the answer is read:
// a weak read's bound must be the age of the round the read can rely on,
// not of one that completes while it runs.
type answer struct {
	h      *answerHeader
	mode   string
	bound  string
	leader bool
}

// begin takes mode's bound and the leader's presence now, before the read,
// if the request (its incoming metadata in ctx) asked for the header or
// the header is always sent. Strong reads and forwarded writes are
// linearizable: their bound is 0.
func (a *answerHeader) begin(ctx context.Context, mode string) answer {
	if a == nil || (!a.always && !askedForHeaders(ctx)) {
		return answer{}
	}
	bound := "0s"
	if mode == modeWeak || mode == modeBounded {
		bound = boundText(a.age())
	}
	return answer{h: a, mode: mode, bound: bound, leader: a.hasLeader()}
}

// header is the four keys for an answer whose store revision is rev (0:
// the store's current one).
func (an answer) header(rev int64) metadata.MD {
	a := an.h
	if rev <= 0 {
		rev = a.rev()
	}
	slot := &a.last[modeIndex(an.mode)]
	if b := slot.Load(); b != nil && b.bound == an.bound && b.leader == an.leader && b.rev == rev {
		return b.md
	}
	b := &builtHeader{bound: an.bound, leader: an.leader, rev: rev, md: metadata.MD{
		wire.ReadModeKey:        {an.mode},
		wire.StalenessBoundKey:  {an.bound},
		wire.KnownLeaderKey:     {strconv.FormatBool(an.leader)},
		wire.AppliedRevisionKey: {strconv.FormatInt(rev, 10)},
	}}
	slot.Store(b)
	return b.md
}

// set adds the header to a unary call's response; rev is the revision the
// response carries in its own header, if any. An answer not asked for, or
// of a nil answerHeader (unit tests' servers, --freshness-headers=off),
// sets nothing.
func (an answer) set(ctx context.Context, rev int64) {
	if an.h == nil {
		return
	}
	_ = grpc.SetHeader(ctx, an.header(rev)) // fails only once the header is sent
}

// setStream adds the header to a stream's, before its first message.
func (an answer) setStream(ss grpc.ServerStream) {
	if an.h == nil {
		return
	}
	_ = ss.SetHeader(an.header(0))
}

// askedForHeaders reports whether the request asked for the answer header:
// wire.FreshnessKey, or a probe's wire.ProbeKey. A look-up in the incoming
// metadata, which grpc-go has parsed already; nothing is copied.
func askedForHeaders(ctx context.Context) bool {
	return len(metadata.ValueFromIncomingContext(ctx, wire.FreshnessKey)) > 0 ||
		len(metadata.ValueFromIncomingContext(ctx, wire.ProbeKey)) > 0
}
