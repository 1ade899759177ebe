package mirror

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jonboulle/clockwork"
	dto "github.com/prometheus/client_model/go"
	"github.com/understudy-kv/understudy/mirror/core"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestOutcome: the loop hands core.React the outcome its error names,
// wrapped or not.
func TestOutcome(t *testing.T) {
	for _, c := range []struct {
		err  error
		want core.Outcome
	}{
		{nil, core.Done},
		{fmt.Errorf("stream: %w", errCompacted), core.Compacted},
		{errLanded, core.Landed},
		{fmt.Errorf("%w: a cycle", ErrRefused), core.Fatal},
		{fmt.Errorf("commit: %w", errFenced), core.Fatal},
		{errors.New("mirror: destination transaction: context deadline exceeded"), core.Failed},
	} {
		if got := outcome(c.err); got != c.want {
			t.Errorf("outcome(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestOpsOf: a put copies, a delete deletes, and a version another mirror
// wrote deletes this mirror's copy and is counted.
func TestOpsOf(t *testing.T) {
	mr := &mirror{cfg: Config{}, ownPrefix: ownPrefix("m"), m: newMetrics(nil, clockwork.NewFakeClock())}
	kv := &mvccpb.KeyValue{Key: []byte("/s/a"), Value: []byte("v"), ModRevision: 3}
	ops := mr.opsOf([]core.Change{{Key: "/d/a", Put: kv}, {Key: "/d/b"}, {Key: "/d/c", Foreign: true}})
	if len(ops) != 3 || !ops[0].put || ops[1].put || ops[2].put || ops[2].key != "/d/c" {
		t.Fatalf("ops %+v: want a put of /d/a, deletes of /d/b and /d/c", ops)
	}
	if _, thn, _ := ops[0].op.Txn(); len(thn) != 2 || string(thn[0].KeyBytes()) != "/d/a" || string(thn[0].ValueBytes()) != "v" {
		t.Fatalf("the put writes %v, want /d/a=v and its ownership record", thn)
	}
	var d dto.Metric
	if err := mr.m.mirroredSkipped.Write(&d); err != nil {
		t.Fatal(err)
	}
	if got := d.GetCounter().GetValue(); got != 1 {
		t.Fatalf("mirrored_keys_skipped_total %v, want 1", got)
	}
}
