package compare

import "time"

// Times are offsets from the start of the workload, on the measuring
// process's monotonic clock; the prefill happens before 0.

// Write is one put of the writer. Seq is written as the value; the writer
// is sequential, so Seq orders the writes as the cluster applied them.
type Write struct {
	Seq          int64
	Key          string
	Call, Return time.Duration
	// Rev is the revision the put created, when acknowledged.
	Rev int64
	// Acked is false for a put that failed: it may or may not have taken
	// effect (ambiguous).
	Acked bool
}

// Read is one read of the whole key range through one path.
type Read struct {
	Path         Path
	Reader       int
	Call, Return time.Duration
	// Pos is the largest sequence number the read returned: the position
	// in the writer's history that the path had reached.
	Pos int64
	// Vals are the values the read returned, by key index (0 for a key
	// it did not return).
	Vals []int64
	Err  string
	// Bound is the staleness bound the replica reported in the answer's
	// header (wire.StalenessBoundKey), when Reported: it claims the read
	// shows every write acknowledged more than Bound before the answer.
	Bound    time.Duration
	Reported bool
}

// OK says whether the read returned data.
func (r Read) OK() bool { return r.Err == "" }

// Event is one put event delivered by a watch, in delivery order.
type Event struct {
	Seq int64
	// Rev is the event's revision in the cluster watched.
	Rev int64
	At  time.Duration
}

// Probe is one read-your-writes probe: a put through the path's writer,
// then at once a read through the path.
type Probe struct {
	Path         Path
	Call, Return time.Duration
	// Saw is whether the read returned the value just written.
	Saw bool
	Err string
}

// History is everything one run observed.
type History struct {
	// Prefill is the number of writes made before the workload, one per
	// key (sequence numbers 1 to Prefill).
	Prefill int64
	Writes  []Write // in sequence order
	// Paths are the paths read (nil: every one of Paths).
	Paths []Path
	Reads []Read
	// Watches holds the events each watcher saw, by watcher name
	// ("replica", "cascaded" if there is one, "mirror").
	Watches map[string][]Event
	// WatchErrs holds errors that ended a watcher, by name.
	WatchErrs map[string]string
	Probes    []Probe
	// Elapsed is how long the workload ran.
	Elapsed time.Duration
}
