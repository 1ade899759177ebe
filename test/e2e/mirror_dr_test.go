package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/mirror"
	"github.com/understudy-kv/understudy/test/harness"
)

// waitPolicy waits until the checkpoint of the mirror named name records
// policy.
func (p *mirrorPair) waitPolicy(t *testing.T, name, policy string) {
	t.Helper()
	harness.WaitFor(t, time.Minute, "checkpoint "+name+" records policy "+policy, func() (bool, error) {
		cp := p.checkpoint(t, name)
		return cp != nil && cp.Policy == policy, nil
	})
}

// TestMirrorRefusesAnotherPolicy: the checkpoint records the policy the
// mirror ran under; a restart with a different --prune is refused, naming
// both, and leaves the checkpoint alone; --reset-policy adopts the new
// one; a checkpoint written before policies were recorded adopts the
// flags of the restart and records them.
func TestMirrorRefusesAnotherPolicy(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	fill(t, p.s, "p/", 100)
	proc := p.start(t, "--prefix", "p/", "--prune")
	p.waitCaughtUp(t, "default")
	p.waitPolicy(t, "default", "prune")
	proc.Stop()
	before := p.checkpoint(t, "default")

	p.wantRefused(t, p.args("--prefix", "p/"), "policy prune (--prune)", "policy keep (neither --overwrite nor --prune)", "--reset-policy")
	p.wantRefused(t, p.args("--prefix", "p/", "--overwrite"), "policy prune (--prune)", "policy overwrite (--overwrite)")
	if after := p.checkpoint(t, "default"); *after != *before {
		t.Fatalf("a refused restart changed the checkpoint: %+v, was %+v", after, before)
	}

	proc = p.start(t, "--prefix", "p/", "--reset-policy")
	p.waitPolicy(t, "default", "keep")
	proc.Stop()
	p.wantRefused(t, p.args("--prefix", "p/", "--prune"), "policy keep", "policy prune (--prune)")

	// A checkpoint of an older mirror: no policy.
	cp := p.checkpoint(t, "default")
	cp.Policy = ""
	writeCheckpoint(t, p, "default", cp)
	proc = p.start(t, "--prefix", "p/", "--prune")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := proc.WaitLog(ctx, "records no policy"); err != nil {
		t.Fatalf("the mirror did not say it adopts its policy: %v", err)
	}
	p.waitPolicy(t, "default", "prune")
	proc.Stop()
	p.wantRefused(t, p.args("--prefix", "p/"), "policy prune (--prune)")
}

// writeCheckpoint replaces a mirror's checkpoint, as an older mirror
// would have written it.
func writeCheckpoint(t *testing.T, p *mirrorPair, name string, cp *mirror.Checkpoint) {
	t.Helper()
	b, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.d.Put(context.Background(), mirror.CheckpointKey(name), string(b)); err != nil {
		t.Fatal(err)
	}
}
