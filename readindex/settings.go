package readindex

import (
	"errors"
	"fmt"
	"time"
)

// Settings are the operator's settings of the ReadIndex machinery: the one
// definition that the replica's flags fill (config.Front.ReadIndex), the
// front carries (readpath.Config) and the Tracker runs by (Config). Each
// field names its flag; Validate checks them together, once.
type Settings struct {
	// Interval is the period of background rounds while bounded reads
	// with a bound under twice IdleInterval come (--freshness-interval).
	// Each round costs the leader one heartbeat round: it is the knob
	// between bounded-read latency and leader load.
	Interval time.Duration
	// IdleInterval is their period when no such bounded read has come
	// for idleAfter (--freshness-idle-interval); 0 or less than Interval
	// means Interval always.
	IdleInterval time.Duration
	// QuietInterval is their period once no client request (any RPC or
	// gateway call; not /metrics or health probes) has come for as long
	// (--freshness-quiet-interval; see Freshness.Touch): a replica nobody
	// uses costs the leader about what a stock learner does. 0 never goes
	// quiet; see Quiet for the value in force.
	QuietInterval time.Duration
	// BatchInterval is the least time between two round starts
	// (--read-batch-interval), 0 to Interval: strong and bounded reads
	// arriving meanwhile share the next round.
	BatchInterval time.Duration
	// BatchMaxWait is the most a read waits for its round to start while
	// the round is held for the readers coming back (--read-batch-max-wait,
	// see batchPolicy), 0 to Interval; 0 holds no round back.
	BatchMaxWait time.Duration
	// ViaURLs are client URLs of other replicas of the cluster to obtain
	// read indexes from (--read-index-via, see protocol.go); empty: own
	// rounds through the leader.
	ViaURLs []string
	// ViaTimeout bounds a request to a hub, and then the wait until its
	// index is applied here (--read-index-via-timeout).
	ViaTimeout time.Duration
	// ViaInFlight is the most requests to hubs in flight at once
	// (--read-index-via-in-flight, see batchPolicy); 0 means 1.
	ViaInFlight int
}

// DefaultQuietInterval is --freshness-quiet-interval's default. A replica
// whose other freshness intervals are as slow or slower (set before quiet
// replicas existed) never goes quiet with it, rather than be refused.
const DefaultQuietInterval = 30 * time.Second

// DefaultSettings are the flags' defaults.
func DefaultSettings() Settings {
	return Settings{
		Interval:      50 * time.Millisecond,
		IdleInterval:  time.Second,
		QuietInterval: DefaultQuietInterval,
		BatchInterval: 2 * time.Millisecond,
		BatchMaxWait:  2 * time.Millisecond,
		ViaTimeout:    200 * time.Millisecond,
		ViaInFlight:   16,
	}
}

// Slowest is the slower of Interval and IdleInterval: the longest the
// background rounds are apart while the replica is not quiet.
func (s Settings) Slowest() time.Duration { return max(s.Interval, s.IdleInterval) }

// Quiet is the quiet interval in force: QuietInterval, or 0 (never quiet)
// unless it is slower than Interval and IdleInterval.
func (s Settings) Quiet() time.Duration {
	if s.QuietInterval <= s.Slowest() {
		return 0
	}
	return s.QuietInterval
}

// Validate reports every bad setting at once, each naming its flag.
func (s Settings) Validate() error {
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	if s.Interval <= 0 {
		add("--freshness-interval %v: must be more than 0", s.Interval)
	}
	if s.IdleInterval < 0 {
		add("--freshness-idle-interval %v: must be 0 (always --freshness-interval) or more", s.IdleInterval)
	}
	if s.QuietInterval < 0 || (s.QuietInterval > 0 && s.QuietInterval <= s.Slowest() && s.QuietInterval != DefaultQuietInterval) {
		add("--freshness-quiet-interval %v: must be 0 (never quiet) or more than --freshness-interval and --freshness-idle-interval (%v)", s.QuietInterval, s.Slowest())
	}
	if s.BatchInterval < 0 || s.BatchInterval > s.Interval {
		add("--read-batch-interval %v: must be between 0 and --freshness-interval (%v)", s.BatchInterval, s.Interval)
	}
	if s.BatchMaxWait < 0 || s.BatchMaxWait > s.Interval {
		add("--read-batch-max-wait %v: must be between 0 and --freshness-interval (%v)", s.BatchMaxWait, s.Interval)
	}
	if len(s.ViaURLs) > 0 && s.ViaTimeout <= 0 {
		add("--read-index-via-timeout %v: must be more than 0", s.ViaTimeout)
	}
	if s.ViaInFlight < 0 {
		add("--read-index-via-in-flight %d: must be 1 (one request at a time) or more (default 16)", s.ViaInFlight)
	}
	return errors.Join(problems...)
}
