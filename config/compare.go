package config

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/understudy-kv/understudy/conn"
)

// Fault is what `replica compare --local` does to its topology in the
// middle of a run (--fault).
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

// CompareEndpoints name the clusters `replica compare` measures and how
// to reach them.
type CompareEndpoints struct {
	// Primary are the voters' client URLs (--primary); the writer and the
	// leader path use them.
	Primary []string
	// Replica is the replica's client URL(s) (--replica).
	Replica []string
	// MirrorDest are the client URLs of the cluster a mirror copies
	// Prefix into, under the same names (--mirror-dest).
	MirrorDest []string
	// Cascaded, if set, is a cascaded replica's client URL (--cascaded;
	// fed by the replica, or by any replica of the cluster): the
	// cascaded paths.
	Cascaded []string
	// Credentials reach all of them (etcdctl's --cacert, --cert, --key,
	// --insecure-skip-tls-verify, --user, --password, --dial-timeout;
	// UNDERSTUDY_PASSWORD or the config file keep the password out of ps).
	conn.Credentials
}

// Compare configures `replica compare`: one workload read through every
// path, judged, tabled and plotted.
type Compare struct {
	// Local starts a topology of its own on 127.0.0.1 (3 voters, a
	// replica, a mirror into a second cluster) and removes it afterwards
	// (--local). Otherwise Endpoints must name existing clusters.
	Local     bool
	Endpoints CompareEndpoints
	// Prefix is the key prefix compare owns (--prefix): it must be empty
	// at the start, and everything under it is deleted at the end. With
	// Endpoints, the mirror must copy it into MirrorDest under the same
	// name.
	Prefix string
	// Duration is how long the workload runs, fault included (--duration).
	Duration time.Duration
	// Rate is the writer's puts per second (--rate).
	Rate int
	// Keys is how many keys the writer cycles through; each read reads
	// them all (--keys).
	Keys int
	// Readers is the number of concurrent readers on each path
	// (--readers).
	Readers int
	// ReadRate is each reader's reads per second (--read-rate).
	ReadRate int
	// Bound is the staleness bound the replica-bounded path asks for
	// (--bound).
	Bound time.Duration
	// RequestTimeout bounds every request (--request-timeout).
	RequestTimeout time.Duration
	// Fault is injected at FaultAt for FaultDuration (--fault, --fault-at,
	// --fault-duration; Local only); see FaultWindow for the zeros.
	Fault         Fault
	FaultAt       time.Duration
	FaultDuration time.Duration
	// Drain bounds the wait, after the workload, for the watches and the
	// mirror to deliver the last acknowledged write (--drain).
	Drain time.Duration
	// CheckTimeout bounds porcupine's search on each path; a search that
	// runs out says "unknown" (--check-timeout).
	CheckTimeout time.Duration
	// Out is the directory the JSON report, the markdown table and the
	// plots are written to; "" writes none (--out).
	Out string
	// Doc, if set, is a Markdown file whose block between the markers
	// "<!-- replica compare: begin" and "<!-- replica compare: end -->"
	// is rewritten with this run's tables and links to its plots in Out
	// (--doc).
	Doc string
	// JSON prints the report as JSON instead of tables (--json).
	JSON bool
	// LogLevel is debug, info, warn or error (--log-level).
	LogLevel   string
	ConfigFile string
	// Command is the command line recorded in Doc's block; LoadCompare
	// sets it from the arguments.
	Command string
}

// DefaultCompare is a 20-second run at 100 puts/s into 16 keys with two
// readers per path at 50 reads/s each, no fault.
func DefaultCompare() Compare {
	return Compare{
		Endpoints:      CompareEndpoints{Credentials: conn.Credentials{DialTimeout: conn.DefaultDialTimeout}},
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
		LogLevel:       "warn",
	}
}

// NewCompareFlags registers `replica compare`'s flags, bound to cfg;
// etcdctl's names for the connection.
func NewCompareFlags(cfg *Compare) *flag.FlagSet {
	fs := flag.NewFlagSet("replica compare", flag.ContinueOnError)
	e := &cfg.Endpoints
	fs.BoolVar(&cfg.Local, "local", cfg.Local, "Start a topology of its own on 127.0.0.1 (3 voters, a replica, a mirror into a second cluster) and remove it afterwards.")
	fs.Var((*list)(&e.Primary), "primary", "Voters' client URLs, comma-separated: the writer and the leader path.")
	fs.Var((*list)(&e.Replica), "replica", "The replica's client URL.")
	fs.Var((*list)(&e.MirrorDest), "mirror-dest", "Client URLs of the cluster a mirror copies --prefix into.")
	fs.Var((*list)(&e.Cascaded), "cascaded", "A cascaded replica's client URL (optional): the cascaded-strong and cascaded-weak paths.")
	e.Credentials.Register(fs, "", "the members'")
	fs.StringVar(&cfg.Prefix, "prefix", cfg.Prefix, "Key prefix compare owns: must be empty; deleted when done.")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "How long the workload runs, fault included.")
	fs.IntVar(&cfg.Rate, "rate", cfg.Rate, "The writer's puts per second.")
	fs.IntVar(&cfg.Keys, "keys", cfg.Keys, "Keys the writer cycles through; every read reads them all.")
	fs.IntVar(&cfg.Readers, "readers", cfg.Readers, "Concurrent readers on each path.")
	fs.IntVar(&cfg.ReadRate, "read-rate", cfg.ReadRate, "Reads per second of each reader.")
	fs.DurationVar(&cfg.Bound, "bound", cfg.Bound, "Staleness bound the replica-bounded path asks for (understudy-max-staleness).")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", cfg.RequestTimeout, "Timeout of every request.")
	fs.StringVar((*string)(&cfg.Fault), "fault", string(cfg.Fault), "With --local: none, replica-partition, mirror-kill, leader-kill or quorum-loss.")
	fs.DurationVar(&cfg.FaultAt, "fault-at", cfg.FaultAt, "When the fault starts (default: a third of --duration).")
	fs.DurationVar(&cfg.FaultDuration, "fault-duration", cfg.FaultDuration, "How long the fault lasts (default: a third of --duration).")
	fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, "After the workload, how long to wait for the watches to deliver the last write before counting what is missing as lost.")
	fs.DurationVar(&cfg.CheckTimeout, "check-timeout", cfg.CheckTimeout, "Bound on porcupine's search per path; past it the verdict is unknown.")
	fs.StringVar(&cfg.Out, "out", cfg.Out, "Directory for report.json, table.md and the plots; empty writes none.")
	fs.StringVar(&cfg.Doc, "doc", cfg.Doc, "Markdown file whose block between <!-- replica compare: begin … --> and <!-- replica compare: end --> is rewritten with this run's tables and plots (docs/compare.md's section is made so).")
	fs.BoolVar(&cfg.JSON, "json", cfg.JSON, "Print the report as JSON instead of tables (no progress bar).")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, warn or error.")
	fs.StringVar(&cfg.ConfigFile, ConfigFileFlag, "", "Path to a YAML file of settings keyed by flag name. Precedence: flag > UNDERSTUDY_* environment > file > default.")
	return fs
}

// LoadCompare parses args, the UNDERSTUDY_* environment (UNDERSTUDY_PASSWORD
// is --password) and any config file into cfg, and records the command
// line in cfg.Command.
func LoadCompare(cfg *Compare, fs *flag.FlagSet, args []string) error {
	_, err := loadFlagsOnly(fs, args, nil)
	cfg.Command = strings.TrimSpace("replica compare " + strings.Join(args, " "))
	return err
}

// FaultWindow returns when the fault starts and how long it lasts: by
// default it starts a third of the way in and lasts a third of the run.
func (c Compare) FaultWindow() (at, length time.Duration) {
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
func (c Compare) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	e := c.Endpoints
	switch {
	case c.Local && (len(e.Primary) > 0 || len(e.Replica) > 0 || len(e.MirrorDest) > 0 || len(e.Cascaded) > 0):
		bad("--local starts its own topology: drop --primary, --replica, --cascaded and --mirror-dest")
	case !c.Local && (len(e.Primary) == 0 || len(e.Replica) == 0 || len(e.MirrorDest) == 0):
		bad("give --local, or --primary, --replica and --mirror-dest endpoints")
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
	if err := checkLogLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
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
