package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"strings"
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
	harness.Must(t, bins.RequireReplica())
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

// authSetup are the etcdctl commands that give a cluster root, a role
// "reader" that may read pub/, a user alice (password alicepw) with it, a
// key in pub/ and one in secret/, and turn auth on.
var authSetup = [][]string{
	{"user", "add", "root:rootpw"}, {"user", "grant-role", "root", "root"},
	{"role", "add", "reader"}, {"role", "grant-permission", "reader", "read", "pub/", "--prefix"},
	{"user", "add", "alice:alicepw"}, {"user", "grant-role", "alice", "reader"},
	{"put", "pub/a", "1"}, {"put", "secret/a", "2"},
	{"auth", "enable"},
}

// httpDo sends one HTTP request and returns the status and body (status 0
// and the error's text when it fails).
func httpDo(method, url, body string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
