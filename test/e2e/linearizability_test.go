package e2e

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// A register per key: put sets it, get must return the latest value.
type regInput struct {
	Put   bool
	Key   string
	Value string
}

type regOutput struct {
	Value string
}

var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(regInput).Key
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range byKey {
			out = append(out, ops)
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in := input.(regInput)
		if in.Put {
			return true, in.Value
		}
		return output.(regOutput).Value == state.(string), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		if in.Put {
			return fmt.Sprintf("put(%s, %s)", in.Key, in.Value)
		}
		return fmt.Sprintf("get(%s) -> %q", in.Key, output.(regOutput).Value)
	},
}

// history runs clients that write through the voters and through the
// replica, each write followed at once by a read through the replica (the
// pattern that catches a lagging copy), and returns what they saw.
func history(t *testing.T, voters, rep *clientv3.Client, serializable bool, clients, opsPerClient int) []porcupine.Operation {
	t.Helper()
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var (
		mu  sync.Mutex
		ops []porcupine.Operation
		wg  sync.WaitGroup
	)
	record := func(op porcupine.Operation) {
		mu.Lock()
		ops = append(ops, op)
		mu.Unlock()
	}
	var readOpts []clientv3.OpOption
	if serializable {
		readOpts = append(readOpts, clientv3.WithSerializable())
	}
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range opsPerClient {
				key := fmt.Sprintf("lin/k%d", (c+i)%4)
				writer := voters
				if i%3 == 0 {
					writer = rep // some writes go through the replica
				}
				val := fmt.Sprintf("c%d-%d", c, i)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				call := now()
				_, err := writer.Put(ctx, key, val)
				ret := now()
				cancel()
				if err != nil {
					// Ambiguous: it may take effect at any later time.
					ret = math.MaxInt64
				}
				record(porcupine.Operation{ClientId: c, Input: regInput{Put: true, Key: key, Value: val}, Call: call, Output: regOutput{}, Return: ret})

				ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
				call = now()
				resp, err := rep.Get(ctx, key, readOpts...)
				ret = now()
				cancel()
				if err != nil {
					continue // a failed read observed nothing
				}
				got := ""
				if len(resp.Kvs) > 0 {
					got = string(resp.Kvs[0].Value)
				}
				record(porcupine.Operation{ClientId: c, Input: regInput{Key: key}, Call: call, Output: regOutput{Value: got}, Return: ret})
			}
		}()
	}
	wg.Wait()
	return ops
}

func check(t *testing.T, ops []porcupine.Operation) porcupine.CheckResult {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(registerModel, ops, 2*time.Minute)
	if res == porcupine.Illegal {
		path := filepath.Join(t.TempDir(), "history.html")
		if err := porcupine.VisualizePath(registerModel, info, path); err == nil {
			t.Logf("porcupine visualization of the history: %s", path)
		}
	}
	return res
}

// Strong reads through a replica are linearizable with writes made through
// the voters and through the replica; weak reads, checked the same way, are
// not — which shows the check can fail.
func TestReplicaStrongReadsAreLinearizable(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	voters := client(t, c.Endpoints()...)
	rep := client(t, r.ClientURL)

	ops := history(t, voters, rep, false, 6, 150)
	if res := check(t, ops); res != porcupine.Ok {
		t.Fatalf("strong reads through the replica: porcupine says %s over %d operations, want Ok", res, len(ops))
	}

	// The negative control: the same clients, serializable reads.
	var res porcupine.CheckResult
	for attempt := 0; attempt < 3 && res != porcupine.Illegal; attempt++ {
		res = check(t, history(t, voters, rep, true, 6, 150))
	}
	if res != porcupine.Illegal {
		t.Fatalf("weak reads under the same load: porcupine says %s, want Illegal (a stale read); the checker may be vacuous", res)
	}
}
