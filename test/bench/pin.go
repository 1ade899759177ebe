package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinCPU sets the CPU affinity of every thread of process pid to cpu.
// Threads the process starts later inherit it from the thread that starts
// them, and processes it starts from theirs.
func pinCPU(pid, cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return pinSet(pid, &set)
}

// isolateLeader gives the leader (leaderPID) a CPU of its own and every
// other process of the scenario — this one, and so everything it starts
// from now on, and others — the rest: its CPU per operation then measures
// its own work, not how much of a shared CPU the others left it (with the
// mirror and its destination on the same two CPUs, a leader squeezed for
// CPU batched more and spent less per put, whatever the mirror watched).
// It does nothing on a machine of one CPU; undo restores every CPU to
// this process.
func isolateLeader(leaderPID int, others ...int) (how string, undo func(), err error) {
	n := runtime.NumCPU()
	if n < 2 {
		return "not pinned (one CPU)", func() {}, nil
	}
	var rest unix.CPUSet
	for c := 1; c < n; c++ {
		rest.Set(c)
	}
	all := append([]int{os.Getpid()}, others...)
	for _, pid := range all {
		if err := pinSet(pid, &rest); err != nil {
			return "", nil, err
		}
	}
	if err := pinCPU(leaderPID, 0); err != nil {
		return "", nil, err
	}
	undo = func() {
		var every unix.CPUSet
		for c := range n {
			every.Set(c)
		}
		_ = pinSet(os.Getpid(), &every)
	}
	return fmt.Sprintf("the leader alone on CPU 0, every other process on CPUs 1–%d", n-1), undo, nil
}

func pinSet(pid int, set *unix.CPUSet) error {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil || len(tasks) == 0 {
		return fmt.Errorf("pin %d: no threads (%v)", pid, err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(filepath.Base(t))
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil {
			return fmt.Errorf("pin thread %d of %d: %w", tid, pid, err)
		}
	}
	return nil
}
