package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// Stock etcd only: the harness must work before cmd/primary does.
func TestEtcdClusterLeaderKill(t *testing.T) {
	bins := Binaries(t)
	c := StartCluster(t, ClusterConfig{N: 3, Kinds: []Kind{KindEtcd, KindEtcd, KindEtcd}})
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatalf("put: %v", err)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
		t.Fatalf("get: %v %v", resp, err)
	}

	var st []struct {
		Endpoint string
		Status   struct {
			Header struct {
				MemberID uint64 `json:"member_id"`
			} `json:"header"`
			Leader uint64 `json:"leader"`
		}
	}
	out := MustEtcdctl(t, bins, c.Endpoints(), "endpoint", "status", "-w", "json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("endpoint status -w json: %v\n%s", err, out)
	}
	if len(st) != 3 {
		t.Fatalf("endpoint status: %d endpoints, want 3:\n%s", len(st), out)
	}
	old := c.Leader(t)
	for _, s := range st {
		if s.Status.Leader != old.ID {
			t.Errorf("etcdctl: %s reports leader %x, harness found %s (%x)", s.Endpoint, s.Status.Leader, old.Name, old.ID)
		}
	}

	old.Proc.Kill()
	var next string
	WaitFor(t, 30*time.Second, "a new leader after killing "+old.Name, func() (bool, error) {
		m, err := c.CurrentLeader()
		if err != nil {
			return false, err
		}
		if m == old {
			return false, fmt.Errorf("%s is still the leader", m.Name)
		}
		next = m.Name
		return true, nil
	})
	if l := c.Leader(t); l.Name != next || l == old {
		t.Fatalf("Leader() = %s, WaitFor saw %s", l.Name, next)
	}
	if _, err := cli.Put(ctx, "k", "v2"); err != nil {
		t.Fatalf("put after the leader was killed: %v", err)
	}

	// The killed member comes back as the same member, with its data.
	old.Proc.Restart(t)
	WaitFor(t, 30*time.Second, old.Name+" back with the latest value", func() (bool, error) {
		out, err := Etcdctl(t, bins, []string{old.ClientURL}, "get", "k", "--print-value-only", "--consistency", "s")
		return out == "v2\n", err
	})
}
