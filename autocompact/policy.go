// Package autocompact learns a cluster's auto-compaction from the
// compactions a member applies, and chooses the auto-compaction a learner
// replica runs once promoted and leading: its --auto-compaction-* flags if
// it was given them, else what it learned. It is pure (samples in, a
// policy out; time is an input); package replica samples the member's
// store and runs etcd's own compactor (v3compactor) with the choice.
//
// What etcd's compactors propose (server/etcdserver/api/v3compactor,
// v3.7.3), which is what the learning reads back:
//   - periodic R: every R/10 (at most 6 minutes) the compactor records the
//     store's revision; every min(R, 1h) it compacts to the revision it
//     recorded R before, unless that was compacted already (no writes).
//   - revision N: every 5 minutes it compacts to the store's revision
//     minus N.
//
// Every member with the flags runs a compactor, paused unless it leads
// (etcd pauses and resumes it on each leadership change): the compactions
// a member applies are the leader's.
package autocompact

import (
	"fmt"
	"strconv"
	"time"
)

// Modes, etcd's (--auto-compaction-mode).
const (
	ModePeriodic = "periodic"
	ModeRevision = "revision"
)

// Policy is an auto-compaction policy, as etcd's --auto-compaction-mode
// and --auto-compaction-retention say it. The zero Policy compacts nothing.
type Policy struct {
	// Mode is ModePeriodic, ModeRevision, or "" for none.
	Mode string
	// Retention is how long a periodic compactor keeps revisions.
	Retention time.Duration
	// Revisions is how many revisions a revision compactor keeps.
	Revisions int64
}

// Off reports whether p compacts nothing.
func (p Policy) Off() bool {
	return p.Mode == "" || p.Mode == ModePeriodic && p.Retention <= 0 || p.Mode == ModeRevision && p.Revisions <= 0
}

func (p Policy) String() string {
	switch {
	case p.Off():
		return "none"
	case p.Mode == ModeRevision:
		return fmt.Sprintf("revision %d", p.Revisions)
	}
	return "periodic " + p.Retention.String()
}

// RetentionText is p's retention in its own words: a duration, or a number of
// revisions; "" for none (a metric's label).
func (p Policy) RetentionText() string {
	switch {
	case p.Off():
		return ""
	case p.Mode == ModeRevision:
		return strconv.FormatInt(p.Revisions, 10)
	}
	return p.Retention.String()
}

// CompactorArgs are v3compactor.New's mode and retention for p (a
// revision count goes in the duration, as etcd passes it).
func (p Policy) CompactorArgs() (string, time.Duration) {
	if p.Mode == ModeRevision {
		return ModeRevision, time.Duration(p.Revisions)
	}
	return ModePeriodic, p.Retention
}

// FromFlags is the policy etcd runs with --auto-compaction-mode mode and
// --auto-compaction-retention retention, parsed as etcd parses them
// (embed's parseCompactionRetention): an integer is hours (periodic) or
// revisions (revision), anything else a duration. "0" is none.
func FromFlags(mode, retention string) (Policy, error) {
	if mode != ModePeriodic && mode != ModeRevision {
		return Policy{}, fmt.Errorf("autocompact: --auto-compaction-mode %q: want %s or %s", mode, ModePeriodic, ModeRevision)
	}
	if n, err := strconv.ParseInt(retention, 10, 64); err == nil && n >= 0 {
		if n == 0 {
			return Policy{}, nil
		}
		if mode == ModeRevision {
			return Policy{Mode: mode, Revisions: n}, nil
		}
		return Policy{Mode: mode, Retention: time.Duration(n) * time.Hour}, nil
	}
	d, err := time.ParseDuration(retention)
	if err != nil || d < 0 || mode == ModeRevision {
		return Policy{}, fmt.Errorf("autocompact: --auto-compaction-retention %q: want hours (an integer) or a duration for %s, a number of revisions for %s", retention, ModePeriodic, ModeRevision)
	}
	if d == 0 {
		return Policy{}, nil
	}
	return Policy{Mode: mode, Retention: d}, nil
}

// near reports whether p and q are the same policy within the precision
// of learning (a tenth): the running compactor is kept then, since
// starting a periodic one again waits a whole retention first.
func near(p, q Policy) bool {
	if p.Off() || q.Off() {
		return p.Off() == q.Off()
	}
	if p.Mode != q.Mode {
		return false
	}
	a, b := float64(p.Retention), float64(q.Retention)
	if p.Mode == ModeRevision {
		a, b = float64(p.Revisions), float64(q.Revisions)
	}
	return a <= b*1.1 && b <= a*1.1
}
