package compare

import (
	"time"

	"github.com/understudy-kv/understudy/config"
)

// Report is what a run found, as --json prints it.
type Report struct {
	Config  RunInfo      `json:"config"`
	Writes  WriteStats   `json:"writes"`
	Paths   []PathReport `json:"paths"`
	Watches []WatchCheck `json:"watches"`
}

// RunInfo is the part of the configuration the numbers depend on.
type RunInfo struct {
	Local           bool         `json:"local"`
	DurationS       float64      `json:"duration_s"`
	Rate            int          `json:"rate"`
	Keys            int          `json:"keys"`
	Readers         int          `json:"readers"`
	ReadRate        int          `json:"read_rate"`
	BoundMS         float64      `json:"bound_ms"`
	Fault           config.Fault `json:"fault"`
	FaultAtS        float64      `json:"fault_at_s,omitempty"`
	FaultDurationS  float64      `json:"fault_duration_s,omitempty"`
	FaultInjectedAt float64      `json:"fault_injected_at_s,omitempty"`
	FaultHealedAt   float64      `json:"fault_healed_at_s,omitempty"`
}

// WriteStats describes the writer.
type WriteStats struct {
	Total     int     `json:"total"`
	Acked     int     `json:"acked"`
	Ambiguous int     `json:"ambiguous"`
	PerSecond float64 `json:"per_second"`
}

// PathReport is one read path over the whole run, and per phase when there
// was a fault.
type PathReport struct {
	Path Path `json:"path"`
	// Linearizable is porcupine's verdict on the path's reads with the
	// writer's puts: ok, illegal or unknown.
	Linearizable string `json:"linearizable"`
	Run          Window `json:"run"`
	// Phases are before, during and after the fault.
	Phases []Window `json:"phases,omitempty"`
	// RYW are the read-your-writes probes through the path.
	RYW RYWStats `json:"read_your_writes"`
	// BoundViolations counts reads staler than the bound (replica-bounded
	// only; any is a bug).
	BoundViolations int `json:"bound_violations"`
	// ReportedBounds counts the reads whose answer reported a staleness
	// bound (the replica's paths); ReportedBoundViolations those that
	// missed a write acknowledged longer before than that bound: the
	// replica claimed more freshness than it had (any is a bug).
	ReportedBounds          int `json:"reported_bounds"`
	ReportedBoundViolations int `json:"reported_bound_violations"`
	// TornReads are reads whose keys were not all of one revision: some
	// key older than an acknowledged put the read's own position includes.
	TornReads int `json:"torn_reads"`
}

// Window is a path's reads that were sent within [FromS, ToS).
type Window struct {
	Name  string  `json:"name"`
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
	Reads int     `json:"reads"`
	// Errors are failed reads.
	Errors int `json:"errors"`
	// UnavailableMS is how long no read sent through the path succeeded.
	UnavailableMS float64 `json:"unavailable_ms"`
	// StaleReads are successful reads that missed an acknowledged write.
	StaleReads   int       `json:"stale_reads"`
	StalenessMS  Quantiles `json:"staleness_ms"`
	StalenessRev Quantiles `json:"staleness_rev"`
	// MonotonicViolations are reads that returned an older position than
	// the same reader's previous read.
	MonotonicViolations int `json:"monotonic_violations"`
}

// RYWStats counts read-your-writes probes.
type RYWStats struct {
	Probes     int `json:"probes"`
	Violations int `json:"violations"`
	Errors     int `json:"errors"`
}

// WatchCheck compares a watch's events with the writer's history: every
// acknowledged put once, in order.
type WatchCheck struct {
	Watcher    string `json:"watcher"`
	Expected   int    `json:"expected"`
	Delivered  int    `json:"delivered"`
	Lost       int    `json:"lost"`
	Duplicated int    `json:"duplicated"`
	OutOfOrder int    `json:"out_of_order"`
	Err        string `json:"error,omitempty"`
}

// Sample is one successful read's staleness at its call time, for plots.
type Sample struct {
	At          time.Duration
	StalenessMS float64
}

// Analysis is a report with the per-read samples the plots need.
type Analysis struct {
	Report
	Samples map[Path][]Sample
	// FaultWindow is when the fault was in force, zero without one.
	FaultFrom, FaultTo time.Duration
}

// Analyze judges a history. faultFrom and faultTo are when the fault was
// injected and healed (both 0 without a fault).
func Analyze(cfg config.Compare, h *History, faultFrom, faultTo time.Duration) *Analysis {
	a := &Analysis{Samples: map[Path][]Sample{}, FaultFrom: faultFrom, FaultTo: faultTo}
	a.Config = runInfo(cfg, h, faultFrom, faultTo)
	a.Writes = writeStats(h)

	yard := newAcked(h)
	byPath := map[Path][]Read{}
	for _, r := range h.Reads {
		byPath[r.Path] = append(byPath[r.Path], r)
	}
	paths := h.Paths
	if paths == nil {
		paths = Paths
	}
	for _, p := range paths {
		a.Paths = append(a.Paths, a.analyzePath(cfg, h, yard, p, byPath[p]))
	}
	for _, name := range []string{"replica", "cascaded", "mirror"} {
		if _, ok := h.Watches[name]; !ok && name == "cascaded" {
			continue // no cascaded replica in this run
		}
		wc := checkWatch(h, h.Watches[name])
		wc.Watcher, wc.Err = name, h.WatchErrs[name]
		a.Watches = append(a.Watches, wc)
	}
	return a
}

// runInfo is the part of cfg the report's numbers depend on, with the
// run's length and, under a fault, when it was planned and when it was in
// force, so that a report can be read without the command line.
func runInfo(cfg config.Compare, h *History, faultFrom, faultTo time.Duration) RunInfo {
	at, length := cfg.FaultWindow()
	ri := RunInfo{Local: cfg.Local, DurationS: h.Elapsed.Seconds(), Rate: cfg.Rate, Keys: cfg.Keys,
		Readers: cfg.Readers, ReadRate: cfg.ReadRate, BoundMS: ms(cfg.Bound), Fault: cfg.Fault}
	if cfg.Fault != config.FaultNone {
		ri.FaultAtS, ri.FaultDurationS = at.Seconds(), length.Seconds()
		ri.FaultInjectedAt, ri.FaultHealedAt = faultFrom.Seconds(), faultTo.Seconds()
	}
	return ri
}

// writeStats counts the writer's puts after the prefill (whose writes
// happen before time 0 and are not the run's), and the acknowledged ones
// per second of the run.
func writeStats(h *History) WriteStats {
	var ws WriteStats
	for _, w := range h.Writes[h.Prefill:] {
		ws.Total++
		if w.Acked {
			ws.Acked++
		} else {
			ws.Ambiguous++
		}
	}
	ws.PerSecond = float64(ws.Acked) / h.Elapsed.Seconds()
	return ws
}

// analyzePath judges path p's reads (in each reader's order) against the
// acknowledged writes in yard, over the run and per phase of the fault,
// with p's read-your-writes probes; it adds each successful read's
// staleness to a.Samples for the plots.
func (a *Analysis) analyzePath(cfg config.Compare, h *History, yard *acked, p Path, reads []Read) PathReport {
	pr := PathReport{Path: p, Linearizable: linearizable(h, p, cfg.CheckTimeout)}
	stale := make([]staleRead, len(reads))
	for i, r := range reads {
		stale[i] = staleRead{Read: r}
		if r.OK() {
			stale[i].ms, stale[i].revs = yard.staleness(r.Call, r.Pos)
			a.Samples[p] = append(a.Samples[p], Sample{At: r.Call, StalenessMS: stale[i].ms})
			if p == PathReplicaBounded && stale[i].ms > ms(cfg.Bound) {
				pr.BoundViolations++
			}
			if r.Reported {
				pr.ReportedBounds++
			}
			if reportedBoundViolated(r, stale[i].ms) {
				pr.ReportedBoundViolations++
			}
			if yard.torn(r.Pos, r.Vals) {
				pr.TornReads++
			}
		}
	}
	markMonotonic(stale)
	down := outages(reads, h.Elapsed)
	pr.Run = window("run", stale, down, 0, h.Elapsed)
	if cfg.Fault != config.FaultNone {
		pr.Phases = []Window{
			window("before", stale, down, 0, a.FaultFrom),
			window("during", stale, down, a.FaultFrom, a.FaultTo),
			window("after", stale, down, a.FaultTo, h.Elapsed),
		}
	}
	pr.RYW = rywStats(h.Probes, p)
	return pr
}

// rywStats counts path p's read-your-writes probes among probes: those
// that failed, and those that did not read back their own put.
func rywStats(probes []Probe, p Path) RYWStats {
	var st RYWStats
	for _, pb := range probes {
		if pb.Path != p {
			continue
		}
		st.Probes++
		switch {
		case pb.Err != "":
			st.Errors++
		case !pb.Saw:
			st.Violations++
		}
	}
	return st
}

// staleRead is a read with its staleness against the acknowledged writes
// (in milliseconds and in revisions) and whether it went back on the same
// reader's previous read.
type staleRead struct {
	Read
	ms         float64
	revs       int64
	nonMonoton bool
}

// markMonotonic flags each read that returned an older position than the
// same reader's previous successful read (reads are in each reader's
// order).
func markMonotonic(rs []staleRead) {
	last := map[int]int64{}
	for i := range rs {
		if !rs[i].OK() {
			continue
		}
		if prev, ok := last[rs[i].Reader]; ok && rs[i].Pos < prev {
			rs[i].nonMonoton = true
		}
		last[rs[i].Reader] = max(last[rs[i].Reader], rs[i].Pos)
	}
}

// window summarizes the reads of rs sent within [from, to); down are the
// path's outages, whose overlap with the window counts as unavailable.
func window(name string, rs []staleRead, down []interval, from, to time.Duration) Window {
	w := Window{Name: name, FromS: from.Seconds(), ToS: to.Seconds()}
	var msv, revv []float64
	for _, r := range rs {
		if r.Call < from || r.Call >= to {
			continue
		}
		w.Reads++
		if !r.OK() {
			w.Errors++
			continue
		}
		if r.ms > 0 {
			w.StaleReads++
		}
		if r.nonMonoton {
			w.MonotonicViolations++
		}
		msv, revv = append(msv, r.ms), append(revv, float64(r.revs))
	}
	for _, iv := range down {
		w.UnavailableMS += ms(iv.overlap(from, to))
	}
	w.StalenessMS, w.StalenessRev = quantiles(msv), quantiles(revv)
	return w
}

// checkWatch compares the events a watch delivered with the writer's
// history after the prefill: each acknowledged put must arrive exactly
// once and in sequence order; an ambiguous put may arrive or not.
func checkWatch(h *History, events []Event) WatchCheck {
	var wc WatchCheck
	seen := map[int64]int{}
	var prev int64
	for _, ev := range events {
		seen[ev.Seq]++
		if seen[ev.Seq] > 1 {
			wc.Duplicated++
		}
		if ev.Seq < prev {
			wc.OutOfOrder++
		}
		prev = max(prev, ev.Seq)
		if ev.Seq > h.Prefill {
			wc.Delivered++
		}
	}
	for _, w := range h.Writes[h.Prefill:] {
		if !w.Acked {
			continue
		}
		wc.Expected++
		if seen[w.Seq] == 0 {
			wc.Lost++
		}
	}
	return wc
}

// ms is d in milliseconds, the unit the report gives durations in.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
