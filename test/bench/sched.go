package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// hostTicks are the host's CPU time counters (/proc/stat's first line, in
// USER_HZ ticks): all of them, and those idle or waiting for I/O.
type hostTicks struct{ total, idle float64 }

func readHost() (hostTicks, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return hostTicks{}, fmt.Errorf("host CPU: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return hostTicks{}, fmt.Errorf("host CPU: /proc/stat begins %q, not the cpu line", line)
	}
	var t hostTicks
	// user nice system idle iowait irq softirq steal; guest time, after
	// them, is counted in user time already.
	for i, s := range f[1:min(len(f), 9)] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return hostTicks{}, fmt.Errorf("host CPU: /proc/stat field %d %q: %w", i+1, s, err)
		}
		t.total += v
		if i == 3 || i == 4 { // idle, iowait
			t.idle += v
		}
	}
	return t, nil
}

func mustHost(r *runner) hostTicks {
	t, err := readHost()
	if err != nil {
		r.Fatalf("%v", err)
	}
	return t
}

// busySince is the share of the host's CPU time busy since before, in %
// of all CPUs.
func (t hostTicks) busySince(before hostTicks) float64 {
	d := t.total - before.total
	if d <= 0 {
		return 0
	}
	return 100 * (d - (t.idle - before.idle)) / d
}

// schedMeter measures the CPU of a set of processes by their threads'
// schedstat (schedSeconds), and the host's.
type schedMeter struct {
	pids   map[string]int
	before map[string]float64
	host   hostTicks
}

func startSched(r *runner, pids map[string]int) *schedMeter {
	m := &schedMeter{pids: pids, before: map[string]float64{}, host: mustHost(r)}
	for role, pid := range pids {
		m.before[role] = mustSched(r, pid)
	}
	return m
}

// stop is each process's CPU-seconds since the start, and the host's CPUs
// busy meanwhile, % of all of them.
func (m *schedMeter) stop(r *runner) (map[string]float64, float64) {
	out := map[string]float64{}
	for role, pid := range m.pids {
		out[role] = mustSched(r, pid) - m.before[role]
	}
	return out, mustHost(r).busySince(m.host)
}
