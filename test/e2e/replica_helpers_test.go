package e2e

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/test/harness"
)

// replica is a replica process started by a test.
type replica = harness.Replica

type replicaOpts struct {
	AdvertisePeerURL string
	Extra            []string
	NoWait           bool
}

func startReplica(t *testing.T, bins *harness.Bins, c *harness.Cluster, name string, o replicaOpts) *replica {
	t.Helper()
	bins.RequireReplica(t)
	return harness.StartReplica(t, c, harness.ReplicaConfig{Name: name, AdvertisePeerURL: o.AdvertisePeerURL, Extra: append([]string{"--join-timeout", "60s"}, o.Extra...), NoWait: o.NoWait})
}

// client returns a clientv3 client that talks only to endpoints.
func client(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func memberID(t *testing.T, cli *clientv3.Client, endpoint string) (id uint64, learner bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, endpoint)
	if err != nil {
		t.Fatalf("status of %s: %v", endpoint, err)
	}
	return st.Header.MemberId, st.IsLearner
}

func asExitError(err error, target **exec.ExitError) bool { return errors.As(err, target) }
