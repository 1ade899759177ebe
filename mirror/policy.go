package mirror

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
)

// Policy in the checkpoint. The checkpoint records the policy the mirror
// writes under (keep, overwrite or prune; the prefixes are recorded
// beside it and checked in preflight), so that a restart with other flags
// cannot quietly change what the mirror does to keys it did not write: a
// mirror started with --prune and restarted without it would otherwise
// leave behind the keys it had been deleting, and one restarted with
// --prune would delete keys the first run had promised to keep.

// policyChange is what a restart does about the checkpoint's policy.
type policyChange int

const (
	// policySame: the checkpoint's policy is the mirror's.
	policySame policyChange = iota
	// policyAdopt: the checkpoint predates stored policies; the mirror
	// writes its own into it.
	policyAdopt
	// policyReset: --reset-policy replaces the checkpoint's policy.
	policyReset
)

// decidePolicy compares the policy stored in a checkpoint ("" in one
// written before policies were stored) with the mirror's, and refuses a
// different one unless reset.
func decidePolicy(stored string, current Policy, reset bool, name string) (policyChange, error) {
	switch {
	case stored == current.String():
		return policySame, nil
	case stored == "":
		return policyAdopt, nil
	case reset:
		return policyReset, nil
	}
	return policySame, fmt.Errorf("%w: the checkpoint of mirror %q was written under policy %s (%s), and this mirror runs with policy %s (%s); restart it with %s, or give --reset-policy to write under %s from now on",
		ErrRefused, name, stored, policyFlags(stored), current, policyFlags(current.String()), policyFlags(stored), current)
}

// policyFlags names the flags of a policy.
func policyFlags(p string) string {
	switch p {
	case "prune":
		return "--prune"
	case "overwrite":
		return "--overwrite"
	}
	return "neither --overwrite nor --prune"
}

// checkPolicy applies decidePolicy to the loaded checkpoint: the mirror's
// policy goes into the checkpoint in memory, and policyChange says
// whether it must be written.
func (mr *mirror) checkPolicy() (policyChange, error) {
	if mr.cp == nil {
		return policySame, nil
	}
	change, err := decidePolicy(mr.cp.Policy, mr.cfg.Policy, mr.cfg.ResetPolicy, mr.cfg.Name)
	if err != nil {
		return change, err
	}
	switch change {
	case policyAdopt:
		mr.lg.Info("the checkpoint records no policy (written by an older mirror); adopting this mirror's",
			zap.String("checkpoint", mr.cpKey), zap.Stringer("policy", mr.cfg.Policy))
	case policyReset:
		mr.lg.Warn("--reset-policy: the checkpoint's policy is replaced",
			zap.String("checkpoint", mr.cpKey), zap.String("was", mr.cp.Policy), zap.Stringer("policy", mr.cfg.Policy))
	}
	next := *mr.cp
	next.Policy = mr.cfg.Policy.String()
	mr.cp = &next
	return change, nil
}

// writePolicy writes an adopted or reset policy into the checkpoint now,
// rather than with the mirror's next change. A write that fails is not
// fatal: every later checkpoint carries the policy too.
func (mr *mirror) writePolicy(ctx context.Context) error {
	if mr.cpModRev == 0 {
		return nil // not written yet: the first write carries it
	}
	_, err := mr.commit(ctx, nil, *mr.cp)
	switch {
	case err == nil:
		mr.lg.Info("wrote the policy into the checkpoint", zap.Stringer("policy", mr.cfg.Policy))
	case errors.Is(err, errFenced), errors.Is(err, ErrRefused):
		return err
	default:
		mr.lg.Warn("cannot write the policy into the checkpoint yet; the next checkpoint carries it", zap.Error(err))
	}
	return nil
}
