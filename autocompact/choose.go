package autocompact

import (
	"fmt"
	"time"
)

// Sources of a Choice (a metric's label).
const (
	// SourceFlags: the replica's --auto-compaction-* flags; etcd's own
	// compactor runs them.
	SourceFlags = "flags"
	// SourceLearned: learned from the compactions this member applied.
	SourceLearned = "learned"
	// SourceRemembered: learned before the replica last started, and
	// kept in its data dir.
	SourceRemembered = "remembered"
	// SourceNone: no flags, and nothing learned yet.
	SourceNone = "none"
)

// Remembered is a policy learned before a restart.
type Remembered struct {
	Policy Policy
	// At is when it was learned; Why what it was learned from.
	At  time.Time
	Why string
}

// Choice is the auto-compaction a replica runs once it leads, and why.
type Choice struct {
	Run    Policy
	Source string
	// Detail is for people.
	Detail string
}

// String is what `replica status` shows: "learned periodic 5s: 4
// compactions seen: every 5s, each to the revision of 5s before".
func (c Choice) String() string {
	s := c.Source + " " + c.Run.String()
	if c.Source == SourceNone {
		s = "none"
	}
	if c.Detail != "" {
		s += ": " + c.Detail
	}
	return s
}

// Choose is the auto-compaction a replica runs once promoted and leading:
//   - its flags (flags, not Off), as etcd runs them; what the compactions
//     it applied fit is said beside them when it is not the same;
//   - else the policy learned from the compactions it applied (l), or the
//     running one (running) while the learned one is near it (within a
//     tenth: starting a periodic compactor again waits a whole retention);
//   - else the one remembered from before a restart (r);
//   - else none, and what learning has seen so far.
func Choose(flags Policy, l Learned, r Remembered, running Policy) Choice {
	if !flags.Off() {
		c := Choice{Run: flags, Source: SourceFlags}
		if l.OK && !near(l.Policy, flags) {
			c.Detail = fmt.Sprintf("unlike the compactions this member applied, which fit %s (%s)", l.Policy, l.Why)
		}
		return c
	}
	if l.OK {
		run := l.Policy
		if near(running, run) && !running.Off() {
			run = running
		}
		return Choice{Run: run, Source: SourceLearned, Detail: l.Why}
	}
	if !r.Policy.Off() {
		d := fmt.Sprintf("learned %s", r.At.UTC().Format(time.RFC3339))
		if r.Why != "" {
			d += " (" + r.Why + ")"
		}
		return Choice{Run: r.Policy, Source: SourceRemembered, Detail: d + "; learning again: " + seen(l)}
	}
	return Choice{Source: SourceNone, Detail: "no --auto-compaction-* flags; learning the voters' compaction: " + seen(l)}
}

func seen(l Learned) string {
	if l.Seen == 0 {
		return "no compaction seen yet"
	}
	return l.Why
}
