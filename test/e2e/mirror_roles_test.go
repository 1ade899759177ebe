package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/test/harness"
)

// TestMirrorWithItsMinimalRoles: a mirror whose source user may only read
// the mirrored prefix and "\x00understudy/mirror/", and whose destination
// user may only read and write them, copies and streams (the grants on the
// reserved prefix made as docs/operations.md says: through the JSON
// gateway, since no shell can pass its NUL byte to etcdctl). A destination
// user without the reserved prefix copies nothing and is told what to
// grant, and so is a source user without it; an application's user
// cannot write under "\x00understudy/", nor the mirror's own user outside
// "\x00understudy/mirror/".
func TestMirrorWithItsMinimalRoles(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	src := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	dst := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := src.Client(t).Put(ctx, "/m/a", "1"); err != nil {
		t.Fatal(err)
	}
	setup := func(c *harness.Cluster, role, perm string, users ...string) {
		ep := c.Endpoints()
		harness.MustEtcdctl(t, bins, ep, "user", "add", "root:rootpw")
		harness.MustEtcdctl(t, bins, ep, "user", "grant-role", "root", "root")
		harness.MustEtcdctl(t, bins, ep, "role", "add", role)
		harness.MustEtcdctl(t, bins, ep, "role", "grant-permission", role, perm, "/m/", "--prefix")
		harness.MustEtcdctl(t, bins, ep, "role", "add", "app")
		harness.MustEtcdctl(t, bins, ep, "role", "grant-permission", "app", "readwrite", "/m/", "--prefix")
		for _, u := range users {
			name, r, _ := strings.Cut(u, "=")
			harness.MustEtcdctl(t, bins, ep, "user", "add", name+":"+name+"pw")
			harness.MustEtcdctl(t, bins, ep, "user", "grant-role", name, r)
		}
		harness.MustEtcdctl(t, bins, ep, "auth", "enable")
		grantReserved(t, ep[0], role, strings.ToUpper(perm))
	}
	setup(src, "mirror-source", "read", "msrc=mirror-source", "alice=app")
	setup(dst, "mirror-dest", "readwrite", "mdst=mirror-dest", "alice=app")
	mirror := func(name, srcUser, destUser string) *harness.Proc {
		return harness.Start(t, harness.ProcConfig{Name: "mirror-" + name, Bin: bins.Replica, Args: []string{"mirror",
			"--source-endpoints", src.Endpoints()[0], "--dest-endpoints", dst.Endpoints()[0], "--name", name, "--prefix", "/m/",
			"--source-user", srcUser, "--source-password", srcUser + "pw", "--dest-user", destUser, "--dest-password", destUser + "pw"}})
	}

	// One grant less on either side: refused, naming the user, the flag
	// and the reserved prefix to grant.
	for _, short := range []struct{ name, src, dst, flag string }{{"short-dst", "msrc", "alice", "--dest-user"}, {"short-src", "alice", "mdst", "--source-user"}} {
		p := mirror(short.name, short.src, short.dst)
		if err := p.WaitLog(ctx, "permission denied"); err != nil {
			t.Fatalf("a mirror whose %s may not use the reserved prefix: %v; its log:\n%s", short.flag, err, p.Log())
		}
		if log := p.Log(); !strings.Contains(log, "alice") || !strings.Contains(log, short.flag) || !strings.Contains(log, `understudy/mirror/`) {
			t.Errorf("the refusal does not name the user, %s and the reserved prefix:\n%s", short.flag, log)
		}
		p.Kill()
	}
	asRoot := []string{"--user", "root:rootpw"}
	if got := harness.MustEtcdctl(t, bins, dst.Endpoints(), append([]string{"get", "/m/", "--prefix", "--keys-only"}, asRoot...)...); strings.TrimSpace(got) != "" {
		t.Fatalf("a mirror without rights on the reserved prefix wrote %q", got)
	}

	mirror("m", "msrc", "mdst")
	copied := func(key, val string) {
		harness.WaitFor(t, time.Minute, key+" copied by the mirror with its minimal roles", func() (bool, error) {
			out, err := harness.Etcdctl(t, bins, dst.Endpoints(), append([]string{"get", key, "--print-value-only"}, asRoot...)...)
			return err == nil && strings.TrimSpace(out) == val, fmt.Errorf("%q, %v", out, err)
		})
	}
	copied("/m/a", "1")
	rootCli := authClient(t, src.Endpoints()[0], "root", "rootpw")
	if _, err := rootCli.Put(ctx, "/m/b", "2"); err != nil {
		t.Fatal(err)
	}
	copied("/m/b", "2")

	// The scheme's edges: an application's user writes nothing under
	// \x00understudy/, and the mirror's own user nothing outside
	// \x00understudy/mirror/ there (not the failover record, not a hold).
	app := authClient(t, dst.Endpoints()[0], "alice", "alicepw")
	mirrorUser := authClient(t, dst.Endpoints()[0], "mdst", "mdstpw")
	for _, w := range []struct {
		cli  *clientv3.Client
		who  string
		keys []string
	}{
		{app, "an application's user", []string{"\x00understudy/failover-record", "\x00understudy/mirror/m/checkpoint", "\x00understudy/hold/all"}},
		{mirrorUser, "the mirror's destination user", []string{"\x00understudy/failover-record", "\x00understudy/failover-lock", "\x00understudy/hold/all"}},
	} {
		for _, key := range w.keys {
			if _, err := w.cli.Put(ctx, key, "forged"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
				t.Errorf("%s wrote %q: %v, want permission denied", w.who, key, err)
			}
		}
	}
}

// authClient is a client of endpoint logged in as user.
func authClient(t *testing.T, endpoint, user, password string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, Username: user, Password: password, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// grantReserved grants role perm (READ or READWRITE) on the prefix
// "\x00understudy/mirror/" of the cluster at endpoint, as root, through
// etcd's JSON gateway: the recipe of docs/operations.md, with the keys in
// base64.
func grantReserved(t *testing.T, endpoint, role, perm string) {
	t.Helper()
	post := func(path, token string, body any) []byte {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, endpoint+path, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %s: %s", path, resp.Status, out)
		}
		return out
	}
	var auth struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(post("/v3/auth/authenticate", "", map[string]string{"name": "root", "password": "rootpw"}), &auth); err != nil || auth.Token == "" {
		t.Fatalf("authenticate as root through the gateway: %v", err)
	}
	b64 := base64.StdEncoding.EncodeToString
	post("/v3/auth/role/grant", auth.Token, map[string]any{"name": role, "perm": map[string]string{
		"permType": perm, "key": b64([]byte("\x00understudy/mirror/")), "range_end": b64([]byte("\x00understudy/mirror0"))}})
}
