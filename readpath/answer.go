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

// answerHeader tells, in the response header of every read, watch and
// forwarded write, how the replica served it (wire.ReadModeKey), the
// staleness it can prove (wire.StalenessBoundKey), whether it knows a
// leader (wire.KnownLeaderKey) and its store's revision
// (wire.AppliedRevisionKey): Consul's LastContact and KnownLeader on every
// answer, so that clients and balancers learn freshness from traffic.
type answerHeader struct {
	// age is the time since the start of the last completed own round.
	age func() time.Duration
	// hasLeader is the require-leader check's answer.
	hasLeader func() bool
	// rev is the local store's current revision.
	rev func() int64
	// revText is the last revision formatted, reused while it holds.
	revText atomic.Pointer[formattedRev]
}

type formattedRev struct {
	rev  int64
	text string
}

// header builds the four keys for an answer in mode. Strong reads and
// forwarded writes are linearizable: their bound is 0.
func (a *answerHeader) header(mode string) metadata.MD {
	bound := time.Duration(0)
	if mode == modeWeak || mode == modeBounded {
		bound = a.age()
	}
	leader := "false"
	if a.hasLeader() {
		leader = "true"
	}
	return metadata.MD{
		wire.ReadModeKey:        {mode},
		wire.StalenessBoundKey:  {boundText(bound)},
		wire.KnownLeaderKey:     {leader},
		wire.AppliedRevisionKey: {a.revision()},
	}
}

// boundText is d rounded up to the millisecond: never less than the bound
// the replica can prove, and the same text for every answer within one
// millisecond, which HTTP/2's header compression (HPACK) can then send as
// an index instead of the text.
func boundText(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	return ((d + time.Millisecond - 1) / time.Millisecond * time.Millisecond).String()
}

// revision is the store's revision as text, formatted once per revision.
func (a *answerHeader) revision() string {
	rev := a.rev()
	if f := a.revText.Load(); f != nil && f.rev == rev {
		return f.text
	}
	f := &formattedRev{rev: rev, text: strconv.FormatInt(rev, 10)}
	a.revText.Store(f)
	return f.text
}

// set adds the header to a unary call's response. A nil answerHeader (unit
// tests' servers) sets nothing.
func (a *answerHeader) set(ctx context.Context, mode string) {
	if a == nil {
		return
	}
	_ = grpc.SetHeader(ctx, a.header(mode)) // fails only once the header is sent
}

// setStream adds the header to a stream's, before its first message.
func (a *answerHeader) setStream(ss grpc.ServerStream, mode string) {
	if a == nil {
		return
	}
	_ = ss.SetHeader(a.header(mode))
}
