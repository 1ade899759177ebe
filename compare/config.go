package compare

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/understudy-kv/understudy/conn"
)

var (
	// ErrNoTargets is returned when neither --local nor the three endpoint
	// sets are given.
	ErrNoTargets = errors.New("compare: give --local, or --primary, --replica and --mirror-dest endpoints")
	// ErrPrefixInUse is returned when the prefix to measure under already
	// holds keys: compare writes only under a prefix it owns, and deletes
	// it afterwards.
	ErrPrefixInUse = errors.New("compare: the prefix already holds keys; pick a fresh --prefix (compare deletes everything under it when done)")
)

// Fault is what compare does to the topology in the middle of a run.
type Fault string

const (
	FaultNone             Fault = "none"
	FaultReplicaPartition Fault = "replica-partition" // the replica's raft links cut
	FaultMirrorKill       Fault = "mirror-kill"       // the mirror killed, then restarted
	FaultLeaderKill       Fault = "leader-kill"       // the leader killed, then restarted
	FaultQuorumLoss       Fault = "quorum-loss"       // the leader and a follower killed, then restarted
)

// Faults lists every fault, in the order the help text gives them.
var Faults = []Fault{FaultNone, FaultReplicaPartition, FaultMirrorKill, FaultLeaderKill, FaultQuorumLoss}

// Path is one way of reading the prefix.
type Path string

const (
	PathLeader         Path = "leader"          // linearizable reads through the voters
	PathReplicaStrong  Path = "replica-strong"  // etcd's default read, on the replica
	PathReplicaWeak    Path = "replica-weak"    // serializable, on the replica
	PathReplicaBounded Path = "replica-bounded" // serializable with understudy-max-staleness
	PathCascadedStrong Path = "cascaded-strong" // etcd's default read, on a cascaded replica fed by the replica
	PathCascadedWeak   Path = "cascaded-weak"   // serializable, on the cascaded replica
	PathMirror         Path = "mirror"          // serializable, on the mirror's destination
)

// Paths lists every read path, in report order. A run against existing
// clusters reads the cascaded paths only when it is given one (--cascaded).
var Paths = []Path{PathLeader, PathReplicaStrong, PathReplicaWeak, PathReplicaBounded, PathCascadedStrong, PathCascadedWeak, PathMirror}

// Cascaded reports the paths through a cascaded replica.
func (p Path) Cascaded() bool { return p == PathCascadedStrong || p == PathCascadedWeak }

// Replica reports the paths through a replica, learner or cascaded: those
// whose answers carry a staleness bound.
func (p Path) Replica() bool {
	return p == PathReplicaStrong || p == PathReplicaWeak || p == PathReplicaBounded || p.Cascaded()
}

// Endpoints names the clusters to measure and how to reach them.
type Endpoints struct {
	// Primary are the voters' client URLs; the writer and the leader path
	// use them.
	Primary []string
	// Replica is the replica's client URL(s).
	Replica []string
	// MirrorDest are the client URLs of the cluster a mirror copies
	// Prefix into, under the same names.
	MirrorDest []string
	// Cascaded, if set, is a cascaded replica's client URL (fed by the
	// replica, or by any replica of the cluster): the cascaded paths.
	Cascaded []string
	// Credentials reach all three (etcdctl's --cacert, --cert, --key,
	// --insecure-skip-tls-verify, --user, --password).
	conn.Credentials
}

// Config says what to run.
type Config struct {
	// Local starts a topology of its own on 127.0.0.1 (3 voters, a
	// replica, a mirror into a second cluster) and removes it afterwards.
	// Otherwise Endpoints must name existing clusters.
	Local     bool
	Endpoints Endpoints
	// Prefix is the key prefix compare owns: it must be empty at the start,
	// and everything under it is deleted at the end. With Endpoints, the
	// mirror must copy it into MirrorDest under the same name.
	Prefix string
	// Duration is how long the workload runs, fault included.
	Duration time.Duration
	// Rate is the writer's puts per second.
	Rate int
	// Keys is how many keys the writer cycles through; each read reads
	// them all.
	Keys int
	// Readers is the number of concurrent readers on each path.
	Readers int
	// ReadRate is each reader's reads per second.
	ReadRate int
	// Bound is the staleness bound the replica-bounded path asks for.
	Bound time.Duration
	// RequestTimeout bounds every request.
	RequestTimeout time.Duration
	// Fault is injected at FaultAt for FaultDuration (Local only).
	Fault         Fault
	FaultAt       time.Duration
	FaultDuration time.Duration
	// Drain bounds the wait, after the workload, for the watches and the
	// mirror to deliver the last acknowledged write.
	Drain time.Duration
	// CheckTimeout bounds porcupine's search on each path; a search that
	// runs out says "unknown".
	CheckTimeout time.Duration
	// Out is the directory the JSON report, the markdown table and the
	// plots are written to; "" writes none.
	Out string
	// Doc, if set, is a Markdown file whose block between the markers
	// "<!-- replica compare: begin" and "<!-- replica compare: end -->"
	// is rewritten with this run's tables and links to its plots in Out.
	Doc string
	// Command is the command line recorded in Doc's block.
	Command string
}

// DefaultConfig is a 20-second run at 100 puts/s into 16 keys with two
// readers per path at 50 reads/s each, no fault.
func DefaultConfig() Config {
	return Config{
		Endpoints:      Endpoints{Credentials: conn.Credentials{DialTimeout: conn.DefaultDialTimeout}},
		Prefix:         "/understudy-compare/",
		Duration:       20 * time.Second,
		Rate:           100,
		Keys:           16,
		Readers:        2,
		ReadRate:       50,
		Bound:          250 * time.Millisecond,
		RequestTimeout: 3 * time.Second,
		Fault:          FaultNone,
		Drain:          30 * time.Second,
		CheckTimeout:   30 * time.Second,
		Out:            "compare-out",
	}
}

// FaultWindow returns when the fault starts and how long it lasts: by
// default it starts a third of the way in and lasts a third of the run.
func (c Config) FaultWindow() (at, length time.Duration) {
	at, length = c.FaultAt, c.FaultDuration
	if at == 0 {
		at = c.Duration / 3
	}
	if length == 0 {
		length = c.Duration / 3
	}
	return at, length
}

// Validate reports every bad field at once, naming its flag.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	e := c.Endpoints
	switch {
	case c.Local && (len(e.Primary) > 0 || len(e.Replica) > 0 || len(e.MirrorDest) > 0 || len(e.Cascaded) > 0):
		bad("--local starts its own topology: drop --primary, --replica, --cascaded and --mirror-dest")
	case !c.Local && (len(e.Primary) == 0 || len(e.Replica) == 0 || len(e.MirrorDest) == 0):
		errs = append(errs, ErrNoTargets)
	}
	for _, l := range []struct {
		flag string
		urls []string
	}{{"primary", e.Primary}, {"replica", e.Replica}, {"mirror-dest", e.MirrorDest}, {"cascaded", e.Cascaded}} {
		for _, u := range l.urls {
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				bad("--%s %q: want URLs such as http://127.0.0.1:2379, comma-separated", l.flag, u)
			}
		}
	}
	if err := e.Credentials.Validate(""); err != nil {
		errs = append(errs, err)
	}
	if c.Prefix == "" || c.Prefix == "/" {
		bad("--prefix %q: want a prefix of its own such as /understudy-compare/ (everything under it is deleted)", c.Prefix)
	}
	if c.Duration < 3*time.Second {
		bad("--duration %v: want at least 3s", c.Duration)
	}
	if c.Rate < 1 || c.Rate > 10000 {
		bad("--rate %d: want 1 to 10000 puts per second", c.Rate)
	}
	if c.Keys < 1 || c.Keys > 1000 {
		bad("--keys %d: want 1 to 1000 (each read reads them all)", c.Keys)
	}
	if c.Readers < 1 || c.Readers > 64 {
		bad("--readers %d: want 1 to 64 per path", c.Readers)
	}
	if c.ReadRate < 1 || c.ReadRate > 10000 {
		bad("--read-rate %d: want 1 to 10000 reads per second per reader", c.ReadRate)
	}
	if c.Bound <= 0 {
		bad("--bound %v: want a positive staleness bound such as 250ms", c.Bound)
	}
	if c.RequestTimeout <= 0 {
		bad("--request-timeout %v: want a positive duration", c.RequestTimeout)
	}
	if c.Drain <= 0 {
		bad("--drain %v: want a positive duration", c.Drain)
	}
	if c.CheckTimeout <= 0 {
		bad("--check-timeout %v: want a positive duration", c.CheckTimeout)
	}
	if c.Doc != "" && c.Out == "" {
		bad("--doc %s links to the plots: give --out too", c.Doc)
	}
	known := false
	for _, f := range Faults {
		known = known || f == c.Fault
	}
	switch {
	case !known:
		bad("--fault %q: want one of %s", c.Fault, faultNames())
	case c.Fault != FaultNone && !c.Local:
		bad("--fault %s: faults need the processes, so --local", c.Fault)
	case c.Fault != FaultNone:
		at, length := c.FaultWindow()
		if at < 0 || length <= 0 || at+length > c.Duration {
			bad("--fault-at %v and --fault-duration %v: the fault must start at or after 0 and end within --duration %v", at, length, c.Duration)
		}
	}
	return errors.Join(errs...)
}

func faultNames() string {
	var s []string
	for _, f := range Faults {
		s = append(s, string(f))
	}
	return strings.Join(s, ", ")
}
