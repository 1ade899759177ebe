package e2e

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/test/harness"
)

// replica is a replica process started by a test.
type replica struct {
	*harness.Proc
	Name, ClientURL, PeerURL, DataDir string
}

type replicaOpts struct {
	// AdvertisePeerURL overrides the advertised peer URL (default: the
	// listen URL).
	AdvertisePeerURL string
	Extra            []string
	// NoWait returns at once instead of waiting until it serves.
	NoWait bool
}

func startReplica(t *testing.T, bins *harness.Bins, c *harness.Cluster, name string, o replicaOpts) *replica {
	t.Helper()
	bins.RequireReplica(t)
	r := &replica{
		Name:      name,
		ClientURL: harness.URL(harness.FreePort(t)),
		PeerURL:   harness.URL(harness.FreePort(t)),
		DataDir:   filepath.Join(t.TempDir(), name+".replica"),
	}
	adv := r.PeerURL
	if o.AdvertisePeerURL != "" {
		adv = o.AdvertisePeerURL
	}
	args := []string{
		"--name", name, "--data-dir", r.DataDir,
		"--join", strings.Join(c.Endpoints(), ","),
		"--listen-peer-urls", r.PeerURL, "--initial-advertise-peer-urls", adv,
		"--listen-client-urls", r.ClientURL,
		"--join-timeout", "60s",
	}
	r.Proc = harness.Start(t, harness.ProcConfig{Name: name, Bin: bins.Replica, Args: append(args, o.Extra...)})
	if !o.NoWait {
		r.waitServing(t)
	}
	return r
}

func (r *replica) waitServing(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := r.WaitLog(ctx, `"msg":"replica serving"`); err != nil {
		t.Fatalf("replica %s not serving: %v", r.Name, err)
	}
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
