//go:build kube

package kube

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// secondAPIServer runs a kube-apiserver on the host whose --etcd-servers is
// the readers' client Service alone, and runs test/kube's checks on it:
// create, consistent list and conflict; a CRD; the dry run of every
// kustomization; a watch across the readers' pods deleted and started
// again one at a time.
func (n *node) secondAPIServer(t *testing.T) {
	const svc = "understudy-replica-client-reader"
	ip := n.clusterIP(t, svc)
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	// README step 2 again, with --ip: kube-apiserver checks the replicas'
	// certificate against the address it dials.
	secret := n.run(t, "", filepath.Join(root, "scripts", "kube-pki-secret.sh"), "--ca-dir", n.env["ETCD_PKI"], "--ip", ip, "reader", "cascaded")
	n.kubectl(t, secret, "apply", "-f", "-")
	harness.WaitFor(t, 3*time.Minute, "the readers' certificate names "+ip+" (the kubelet updates the Secret's volume)", func() (bool, error) {
		conn, err := tls.Dial("tcp", ip+":2379", n.tls)
		if err != nil {
			return false, err
		}
		return true, conn.Close()
	})
	prefix := fmt.Sprintf("/registry-through-replicas-%d", time.Now().Unix())
	a := startAPIServer(t, n.env["KUBE_APISERVER"], []string{"https://" + ip + ":2379"},
		"--etcd-cafile", filepath.Join(n.env["ETCD_PKI"], "ca.crt"),
		"--etcd-certfile", n.env["APISERVER_ETCD_CERT"], "--etcd-keyfile", n.env["APISERVER_ETCD_KEY"],
		"--etcd-prefix", prefix)
	k := newKubectl(t, n.env["KUBECTL"], a.URL)
	k.must(t, "", "create", "namespace", ns)
	step(t, "create, consistent list, conflict", func() { crudAndConflict(t, k, n.etcd, prefix) })
	step(t, "CRD and custom resource", func() { customResource(t, k) })
	step(t, "kubectl apply --dry-run=server of deploy/kubernetes", func() { dryRunManifests(t, k) })
	var servers []*server
	for _, name := range []string{readerSTS + "-0", readerSTS + "-1"} {
		var uid string
		servers = append(servers, &server{
			name: name,
			stop: func(t *testing.T) {
				uid = n.pods(t, "reader")[name].Metadata.UID
				n.kubectl(t, "", "-n", kubeSystem, "delete", "pod", name, "--wait=false")
			},
			serving: func(t *testing.T) {
				n.waitReaders(t, 2, func(p map[string]pod) bool { return p[name].Metadata.UID != uid })
			},
			metricsURL: func(t *testing.T) string { return "http://" + n.pods(t, "reader")[name].Status.PodIP + ":2381" },
		})
	}
	step(t, "watch across the readers' pods deleted and started again", func() { watchAcrossRestarts(t, k, servers) })
	if a.Exited() {
		t.Fatalf("kube-apiserver exited during the checks")
	}
}

// prober asks a client Service's /readyz every 100 ms on a new
// connection (so that each ask is routed anew), and once more at once when
// one fails; it counts the asks that failed twice.
type prober struct {
	asks, failed atomic.Int64
	mu           sync.Mutex
	errs         []string
	stop         func()
}

func (n *node) probeReadyz(t *testing.T, svc string) *prober {
	cfg := n.tls.Clone()
	cfg.ServerName = svc + "." + kubeSystem + ".svc"
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	url := "https://" + n.clusterIP(t, svc) + ":2379/readyz"
	ask := func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	}
	p := &prober{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			p.asks.Add(1)
			if ask() == nil {
				continue
			}
			if err := ask(); err != nil {
				p.failed.Add(1)
				p.mu.Lock()
				p.errs = append(p.errs, time.Now().Format("15:04:05.000")+" "+err.Error())
				p.mu.Unlock()
			}
		}
	}()
	p.stop = func() { cancel(); <-done }
	return p
}

// rollingUpdate changes the StatefulSet's image (the same image under a
// second tag) while a client asks /readyz through the client Service.
func (n *node) rollingUpdate(t *testing.T, ids map[string]uint64) {
	rolled := n.env["IMAGE"] + "-rolled"
	n.run(t, "", n.env["CTR"], "-a", n.env["CONTAINERD_SOCK"], "-n", "k8s.io", "images", "tag", "--force", n.env["IMAGE"], rolled)
	p := n.probeReadyz(t, "understudy-replica-client-reader")
	start := time.Now()
	n.kubectl(t, "", "-n", kubeSystem, "set", "image", "sts/"+readerSTS, "replica="+rolled)
	got := n.waitReaders(t, 2, func(pods map[string]pod) bool {
		for _, p := range pods {
			if len(p.Spec.Containers) == 0 || p.Spec.Containers[0].Image != rolled {
				return false
			}
		}
		return len(pods) == 2
	})
	p.stop()
	t.Logf("rolling update to %s: %v; learners %s; /readyz through the Service: %d asks, %d failed twice %v",
		rolled, time.Since(start).Round(time.Second), show(got), p.asks.Load(), p.failed.Load(), p.errs)
	if !maps(got, ids) {
		t.Fatalf("after the rolling update: learners %s, want %s", show(got), show(ids))
	}
	if p.failed.Load() != 0 {
		t.Fatalf("/readyz through the Service failed twice in a row %d times during the rolling update", p.failed.Load())
	}
}

// cascaded applies the cascaded overlay beside two readers, puts a read
// load on its Service, and checks that its HPA scales it 1 → 4 → 1 with no
// read failing twice in a row and no change to the member list.
func (n *node) cascaded(t *testing.T) {
	reader, overlay := filepath.Join(n.deploy, "overlays", "reader"), filepath.Join(n.deploy, "overlays", "cascaded")
	n.kubectl(t, "", "apply", "-k", reader)
	n.waitReaders(t, 2)
	// An operator's choices for this test's scale: from 1 pod to 4, and
	// a minute's scale-down window instead of five.
	n.edit(t, "overlays/cascaded/hpa.yaml", func(s string) string {
		s = replaceLine(t, s, "  minReplicas: ", "  minReplicas: 1")
		s = replaceLine(t, s, "  maxReplicas: ", "  maxReplicas: 4")
		return replaceLine(t, s, "      stabilizationWindowSeconds: ", "      stabilizationWindowSeconds: 60")
	})
	n.kubectl(t, "", "apply", "-k", overlay)
	n.waitCascaded(t, 1, 4*time.Minute)
	before := n.members(t)
	t.Logf("cascaded: 1 pod serving; members %v", before)

	ctx, cancel := context.WithCancel(context.Background())
	var changes []string
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ctx.Err() == nil {
			if got := n.members(t); fmt.Sprint(got) != fmt.Sprint(before) {
				changes = append(changes, fmt.Sprint(got))
			}
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}()
	reads, failed, loadDone := n.readLoad(t, ctx, "understudy-replica-client-cascaded", 6)
	start := time.Now()
	n.waitCascaded(t, 4, 8*time.Minute)
	t.Logf("cascaded: 1 → 4 pods under load in %v (%d reads so far); %s", time.Since(start).Round(time.Second), reads.Load(),
		strings.TrimSpace(n.kubectl(t, "", "-n", kubeSystem, "get", "hpa", "-o", "wide")))
	cancel()
	<-loadDone
	<-watchDone
	start = time.Now()
	n.waitCascaded(t, 1, 8*time.Minute)
	t.Logf("cascaded: 4 → 1 pods after the load stopped in %v; %d reads, %d failed twice in a row; member list changes: %d",
		time.Since(start).Round(time.Second), reads.Load(), failed.Load(), len(changes))
	if len(changes) != 0 || fmt.Sprint(n.members(t)) != fmt.Sprint(before) {
		t.Fatalf("the member list changed while the cascaded replicas scaled: %v (before %v)", changes, before)
	}
	if failed.Load() != 0 {
		t.Fatalf("%d of %d reads failed twice in a row while the cascaded replicas scaled", failed.Load(), reads.Load())
	}
	n.kubectl(t, "", "delete", "-k", overlay)
	n.kubectl(t, "", "delete", "-k", reader)
	harness.WaitFor(t, 3*time.Minute, "no pod and no learner left", func() (bool, error) {
		p, c, l := n.pods(t, "reader"), n.pods(t, "cascaded"), n.learners(t)
		return len(p)+len(c)+len(l) == 0, fmt.Errorf("reader pods %d, cascaded pods %d, learners %s", len(p), len(c), show(l))
	})
	n.kubectl(t, "", "-n", kubeSystem, "delete", "pvc", "-l", "app.kubernetes.io/component=reader")
}

// waitCascaded waits until the cascaded Deployment has exactly want pods,
// all ready.
func (n *node) waitCascaded(t *testing.T, want int, timeout time.Duration) {
	t.Helper()
	harness.WaitFor(t, timeout, fmt.Sprintf("%d cascaded pods, all ready", want), func() (bool, error) {
		pods := n.pods(t, "cascaded")
		ready := 0
		for _, p := range pods {
			if p.ready() {
				ready++
			}
		}
		return len(pods) == want && ready == want, fmt.Errorf("%d pods, %d ready", len(pods), ready)
	})
}

// readLoad runs workers that read through svc until ctx ends, each on its
// own connection, dialled anew every 200 reads (so that new pods get a
// share); a read that fails is tried once more on a new connection.
func (n *node) readLoad(t *testing.T, ctx context.Context, svc string, workers int) (reads, failed *atomic.Int64, done chan struct{}) {
	reads, failed, done = &atomic.Int64{}, &atomic.Int64{}, make(chan struct{})
	newClient := n.serviceClient(t, svc)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c := newClient()
				for i := 0; i < 200 && ctx.Err() == nil; i++ {
					if err := get(ctx, c); err != nil && ctx.Err() == nil {
						_ = c.Close()
						c = newClient()
						if err := get(ctx, c); err != nil && ctx.Err() == nil {
							failed.Add(1)
							t.Logf("read failed twice: %v", err)
						}
					}
					reads.Add(1)
				}
				_ = c.Close()
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	return reads, failed, done
}

func get(ctx context.Context, c *clientv3.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.Get(ctx, "/kubenode/probe", clientv3.WithSerializable())
	return err
}
