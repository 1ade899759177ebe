package logging

import (
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/soheilhy/cmux"
	"go.uber.org/zap/zapcore"
)

// Kind is what an embedded member is to understudy, which decides which of
// etcd's lines apply to it.
type Kind int

const (
	// Learner is a learner replica's member: a member of the cluster that
	// serves no client itself (the replica's front does).
	Learner Kind = iota
	// Store is a cascaded replica's private store: a single member of a
	// cluster of its own, with auth off (the front checks every call), on
	// limits chosen to hold a copy (a source revision as one transaction of
	// up to 1 GiB, the source's whole size).
	Store
)

// closingMsg is the first line of embed.Etcd.Close: from it on, the member
// is on its way out, and the ends of its listeners and peer links are
// expected.
const closingMsg = "closing etcd server"

// A rule says at which level a member of a kind logs one of etcd's lines,
// matched by its exact message and, if set, by when. A demoted line keeps
// its message and fields, without a stack trace.
type rule struct {
	msg   string
	kinds []Kind // nil: every kind
	// when, if set, must hold: s is the line's situation.
	when  func(s situation) bool
	level zapcore.Level
}

// situation is what a rule may look at: the member, whether it is
// closing, and the line's "error" field (nil if none).
type situation struct {
	closing   bool
	noClients bool // the member has no client listener
	err       error
}

// rules are the lines logged at another level than etcd's, and why. A
// line that matches none is logged as etcd logs it.
var rules = []rule{
	// On every Close, etcd's peer listener's accept loop ends with the
	// listener Close itself closed, and embed logs that at error level
	// with a stack trace ("accept tcp …: use of closed network
	// connection"; etcd-io/etcd#17424). A listener closed while the member
	// is not closing is still an error.
	{msg: "setting up serving from embedded etcd failed.", level: zapcore.InfoLevel,
		when: func(s situation) bool { return s.closing && closedListener(s.err) }},
	// A learner's links to the voters end when it closes.
	{msg: "closed TCP streaming connection with remote peer", kinds: []Kind{Learner}, level: zapcore.InfoLevel, when: closing},
	{msg: "lost TCP streaming connection with remote peer", kinds: []Kind{Learner}, level: zapcore.InfoLevel, when: closing},
	{msg: "peer became inactive (message send to peer failed)", kinds: []Kind{Learner}, level: zapcore.InfoLevel, when: closing},
	// A voter that dials a learner in the moment between its transport's
	// stop and its listener's close finds no peer to take its stream.
	{msg: "failed to find remote peer in cluster", kinds: []Kind{Learner}, level: zapcore.InfoLevel, when: closing},
	// A leader (a store, a promoted replica) closed while it proposes the
	// cluster's version has that proposal cancelled.
	{msg: "failed to update cluster version", level: zapcore.InfoLevel, when: closing},
	{msg: "aborting cluster version update; server is stopped", level: zapcore.InfoLevel, when: closing},
	// A member closed soon after its start: a task it would start then
	// (etcd's GoAttach) is not.
	{msg: "server has stopped; skipping GoAttach", level: zapcore.InfoLevel, when: closing},
	// A member that joined an existing cluster learns the cluster's
	// version before it has applied an entry of a term: etcd's storage
	// version monitor finds no term in the backend and says so (a warning,
	// then an error with a stack trace), and succeeds on its next try, 4 s
	// later. A learner replica starts so every time.
	{msg: "Failed to detect schema version", level: zapcore.InfoLevel, when: missingTerm},
	{msg: "failed to update storage version", level: zapcore.InfoLevel, when: missingTerm},
	// About a client listener serving gRPC and HTTP on one port: these
	// members have no client listener (the front serves the clients).
	{msg: "Running http and grpc server on single port. This is not recommended for production.", level: zapcore.DebugLevel,
		when: func(s situation) bool { return s.noClients }},
	// A cascaded replica's store takes a source revision as one local
	// transaction, in process (no raft message crosses a network), and
	// holds what the source holds: its 1 GiB request limit and 16 GiB
	// quota are its design, not advice an operator can act on. It runs
	// with auth off and issues no token: the source's tokens are used.
	{msg: "exceeded recommended request limit", kinds: []Kind{Store}, level: zapcore.DebugLevel},
	{msg: "quota exceeds the maximum value", kinds: []Kind{Store}, level: zapcore.DebugLevel},
	{msg: "simple token is not cryptographically signed", kinds: []Kind{Store}, level: zapcore.DebugLevel},
}

func closing(s situation) bool { return s.closing }

// missingTerm: the storage version could not be told for want of a term
// (etcd's schema.UnsafeDetectSchemaVersion; its error has no sentinel).
func missingTerm(s situation) bool {
	return s.err != nil && strings.Contains(s.err.Error(), "missing term information")
}

// closedListener: err is what an accept loop returns once its listener
// was closed (net's, net/http's or cmux's way of saying so).
func closedListener(err error) bool {
	return err != nil && (errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) ||
		errors.Is(err, cmux.ErrServerClosed) || errors.Is(err, cmux.ErrListenerClosed))
}

// rulesFor are the rules that apply to kind, by message.
func rulesFor(kind Kind) map[string]rule {
	out := map[string]rule{}
	for _, r := range rules {
		if r.kinds == nil || slices.Contains(r.kinds, kind) {
			out[r.msg] = r
		}
	}
	return out
}
