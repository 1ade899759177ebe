package mirror

import (
	"context"
	"errors"
	"fmt"

	"github.com/understudy-kv/understudy/mirror/core"
	"go.uber.org/zap"
)

// Policy in the checkpoint. The checkpoint records the policy the mirror
// writes under (keep, overwrite or prune; the prefixes are recorded
// beside it and checked in preflight), so that a restart with other flags
// cannot quietly change what the mirror does to keys it did not write: a
// mirror started with --prune and restarted without it would otherwise
// leave behind the keys it had been deleting, and one restarted with
// --prune would delete keys the first run had promised to keep. The
// decision is core.DecidePolicy's (core.State.TakePolicy).

// policyRefusal words core.PolicyRefused: the checkpoint of the mirror
// named name stores policy stored, and the mirror runs with current.
func policyRefusal(stored string, current Policy, name string) error {
	return fmt.Errorf("%w: the checkpoint of mirror %q was written under policy %s (%s), and this mirror runs with policy %s (%s); restart it with %s, or give --reset-policy to write under %s from now on",
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

// checkPolicy applies core.State.TakePolicy to the loaded checkpoint: the
// mirror's policy goes into the checkpoint, written at once if it was
// adopted or reset. A write that fails is not fatal: every later
// checkpoint carries the policy too.
func (mr *mirror) checkPolicy(ctx context.Context) error {
	stored := ""
	if cp := mr.st.Checkpoint(); cp != nil {
		stored = cp.Policy
	}
	change, write := mr.st.TakePolicy(mr.cfg.Policy(), mr.cfg.ResetPolicy)
	switch change {
	case core.PolicyRefused:
		return policyRefusal(stored, mr.cfg.Policy(), mr.cfg.Name)
	case core.PolicyAdopt:
		mr.lg.Info("the checkpoint records no policy (written by an older mirror); adopting this mirror's",
			zap.String("checkpoint", mr.cpKey), zap.Stringer("policy", mr.cfg.Policy()))
	case core.PolicyReset:
		mr.lg.Warn("--reset-policy: the checkpoint's policy is replaced",
			zap.String("checkpoint", mr.cpKey), zap.String("was", stored), zap.Stringer("policy", mr.cfg.Policy()))
	}
	if !write {
		return nil
	}
	_, err := mr.commit(ctx, nil, *mr.st.Checkpoint())
	switch {
	case err == nil:
		mr.lg.Info("wrote the policy into the checkpoint", zap.Stringer("policy", mr.cfg.Policy()))
	case errors.Is(err, errFenced), errors.Is(err, ErrRefused):
		return err
	default:
		mr.lg.Warn("cannot write the policy into the checkpoint yet; the next checkpoint carries it", zap.Error(err))
	}
	return nil
}
