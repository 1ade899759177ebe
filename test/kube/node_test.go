//go:build kube

package kube

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// The node's checks (issue 39) run against a real single-node Kubernetes
// that scripts/kube-node.sh up started on this machine: not in CI.
//
//	scripts/kube-node.sh up
//	go test -tags kube ./test/kube -run TestOnNode -kube.node /var/lib/understudy-node -v -timeout 120m
var (
	nodeDir  = flag.String("kube.node", "", "the state directory of the node scripts/kube-node.sh up started (/var/lib/understudy-node): TestOnNode runs on it")
	nodeRuns = flag.Int("kube.node.runs", 3, "how many times TestOnNode runs the reader overlay's lifecycle (install, scale, pod and volume loss, uninstall)")
)

const (
	kubeSystem = "kube-system"
	readerSTS  = "understudy-replica-reader"
	// joinTimeout bounds two readers joining on a fresh install.
	joinTimeout = 6 * time.Minute
)

// node is the running node and a copy of deploy/ set up for it as
// deploy/README.md's steps 2 and 3 say.
type node struct {
	env    map[string]string
	deploy string // the copy's deploy/kubernetes
	voters []string
	etcd   *clientv3.Client
	tls    *tls.Config
}

// TestOnNode applies the overlays to the node as a user would and checks
// what issue 39 asks: readers join and serve, a second kube-apiserver
// stores through them, scale-down, pod loss, volume loss and uninstall
// leave no learner entry and never touch a voter, a rolling update keeps
// every member and serves throughout, the cascaded overlay scales with its
// HPA under load without changing the member list, and the standby overlay
// rides out a voter's restart and replaces a dead one (node_standby_test.go).
func TestOnNode(t *testing.T) {
	if *nodeDir == "" {
		t.Skip("runs on the node of scripts/kube-node.sh up, with -kube.node /var/lib/understudy-node (CONTRIBUTING: Kubernetes node)")
	}
	n := openNode(t)
	t.Run("README step 1: --max-learners, one voter at a time", func(t *testing.T) { n.maxLearners(t) })
	voters := n.voterIDs(t)
	t.Logf("voters: %s", show(voters))
	for run := 1; run <= *nodeRuns; run++ {
		t.Run(fmt.Sprintf("lifecycle-%d", run), func(t *testing.T) { n.lifecycle(t, run == 1) })
		if got := n.voterIDs(t); !maps(got, voters) {
			t.Fatalf("after lifecycle %d the voters are %v, want %v", run, got, voters)
		}
	}
	t.Run("cascaded", func(t *testing.T) { n.cascaded(t) })
	if got := n.voterIDs(t); !maps(got, voters) {
		t.Fatalf("after the cascaded replicas the voters are %v, want %v", got, voters)
	}
	// Last: it replaces voter-2, then brings it back under a new ID.
	t.Run("standby", func(t *testing.T) { n.standby(t) })
}

func maps(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// openNode reads node.env (written by kube-node.sh up), copies
// deploy/kubernetes and sets its voters and image (README step 3), and
// connects to the voters with the node's etcd certificates.
func openNode(t *testing.T) *node {
	t.Helper()
	env := map[string]string{}
	f, err := os.Open(filepath.Join(*nodeDir, "node.env"))
	if err != nil {
		t.Fatalf("-kube.node %s: %v (run scripts/kube-node.sh up)", *nodeDir, err)
	}
	defer f.Close()
	for s := bufio.NewScanner(f); s.Scan(); {
		if k, v, ok := strings.Cut(s.Text(), "="); ok {
			env[k] = v
		}
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	n := &node{env: env, voters: strings.Split(env["VOTERS"], ",")}
	ws := t.TempDir()
	if err := os.CopyFS(ws, os.DirFS(filepath.Join(root, "deploy"))); err != nil {
		t.Fatal(err)
	}
	n.deploy = filepath.Join(ws, "kubernetes")
	name, tag, _ := strings.Cut(env["IMAGE"], ":")
	n.edit(t, "base/kustomization.yaml", func(s string) string {
		s = replaceLine(t, s, "      - UNDERSTUDY_JOIN=", "      - UNDERSTUDY_JOIN="+env["VOTERS"])
		return setImage(t, s, name, tag)
	})
	n.edit(t, "overlays/cascaded/kustomization.yaml", func(s string) string { return setImage(t, s, name, tag) })

	pool := x509.NewCertPool()
	ca, err := os.ReadFile(filepath.Join(env["ETCD_PKI"], "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair(filepath.Join(env["ETCD_PKI"], "server.crt"), filepath.Join(env["ETCD_PKI"], "server.key"))
	if err != nil {
		t.Fatal(err)
	}
	n.tls = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	n.etcd = n.client(t, n.voters)
	// README step 2: the replicas' certificates, signed by the etcd CA.
	secret := n.run(t, "", filepath.Join(root, "scripts", "kube-pki-secret.sh"), "--ca-dir", env["ETCD_PKI"], "reader", "cascaded")
	n.kubectl(t, secret, "apply", "-f", "-")
	return n
}

// client is an etcd client of endpoints.
func (n *node) client(t *testing.T, endpoints []string, opts ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: n.tls.Clone(), DialTimeout: 5 * time.Second, DialOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// serviceClient is an etcd client of a client Service by its DNS name,
// which the replicas' certificate names (clientv3 checks a certificate
// against the endpoint's host, not tls.Config.ServerName); the name is
// dialled at the Service's ClusterIP, since this host does not resolve the
// cluster's names.
func (n *node) serviceClient(t *testing.T, svc string) func() *clientv3.Client {
	host, ip := svc+"."+kubeSystem+".svc", n.clusterIP(t, svc)
	dial := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		if h, port, err := net.SplitHostPort(addr); err == nil && h == host {
			addr = net.JoinHostPort(ip, port)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	})
	return func() *clientv3.Client { return n.client(t, []string{"https://" + host + ":2379"}, dial) }
}

func (n *node) edit(t *testing.T, rel string, f func(string) string) {
	t.Helper()
	p := filepath.Join(n.deploy, rel)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(f(string(b))), 0o644); err != nil {
		t.Fatal(err)
	}
}

func replaceLine(t *testing.T, s, prefix, line string) string {
	t.Helper()
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			lines[i] = line
			return strings.Join(lines, "\n")
		}
	}
	t.Fatalf("no line starting %q", prefix)
	return ""
}

// setImage is `kustomize edit set image understudy=name:tag`.
func setImage(t *testing.T, s, name, tag string) string {
	s = replaceLine(t, s, "    newName: ", "    newName: "+name)
	return replaceLine(t, s, "    newTag: ", "    newTag: "+tag)
}

// run runs a command and returns its stdout.
func (n *node) run(t *testing.T, stdin, bin string, args ...string) string {
	t.Helper()
	out, err := n.try(stdin, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (n *node) try(stdin, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+n.env["KUBECONFIG"])
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

func (n *node) kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	return n.run(t, stdin, n.env["KUBECTL"], args...)
}

// member is one entry of the voters' member list.
type member struct {
	id      uint64
	learner bool
}

func (n *node) members(t *testing.T) map[string]member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.etcd.MemberList(ctx)
	if err != nil {
		t.Fatalf("member list: %v", err)
	}
	out := map[string]member{}
	for _, m := range resp.Members {
		name := m.Name
		if name == "" {
			name = fmt.Sprintf("(never started %x)", m.ID)
		}
		out[name] = member{m.ID, m.IsLearner}
	}
	return out
}

func (n *node) voterIDs(t *testing.T) map[string]uint64 {
	out := map[string]uint64{}
	for name, m := range n.members(t) {
		if !m.learner {
			out[name] = m.id
		}
	}
	return out
}

func (n *node) learners(t *testing.T) map[string]uint64 {
	out := map[string]uint64{}
	for name, m := range n.members(t) {
		if m.learner {
			out[name] = m.id
		}
	}
	return out
}

func show(m map[string]uint64) string {
	var s []string
	for name, id := range m {
		s = append(s, fmt.Sprintf("%s=%x", name, id))
	}
	sort.Strings(s)
	return "[" + strings.Join(s, " ") + "]"
}

// pod is what the checks read of one.
type pod struct {
	Metadata struct {
		Name              string            `json:"name"`
		UID               string            `json:"uid"`
		DeletionTimestamp *string           `json:"deletionTimestamp"`
		Annotations       map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Containers []struct {
			Image string `json:"image"`
		} `json:"containers"`
	} `json:"spec"`
	Status struct {
		PodIP      string `json:"podIP"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
	} `json:"status"`
}

func (p pod) ready() bool {
	if p.Metadata.DeletionTimestamp != nil {
		return false
	}
	return slices.ContainsFunc(p.Status.Conditions, func(c struct {
		Type   string `json:"type"`
		Status string `json:"status"`
	}) bool {
		return c.Type == "Ready" && c.Status == "True"
	})
}

// pods lists the pods of one component (reader, cascaded) by name.
func (n *node) pods(t *testing.T, component string) map[string]pod {
	t.Helper()
	var list struct{ Items []pod }
	out := n.kubectl(t, "", "-n", kubeSystem, "get", "pods", "-l", "app.kubernetes.io/component="+component, "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	m := map[string]pod{}
	for _, p := range list.Items {
		m[p.Metadata.Name] = p
	}
	return m
}

// clusterIP is a Service's.
func (n *node) clusterIP(t *testing.T, svc string) string {
	return strings.TrimSpace(n.kubectl(t, "", "-n", kubeSystem, "get", "service", svc, "-o", "jsonpath={.spec.clusterIP}"))
}
