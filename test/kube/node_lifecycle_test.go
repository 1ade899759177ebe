//go:build kube

package kube

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// lifecycle installs the reader overlay and takes it through what an
// operator does to it, checking the member list after each step; full
// adds the second kube-apiserver and the rolling update.
func (n *node) lifecycle(t *testing.T, full bool) {
	overlay := filepath.Join(n.deploy, "overlays", "reader")
	start := time.Now()
	n.kubectl(t, "", "apply", "-k", overlay)
	ids := n.waitReaders(t, 2)
	t.Logf("kubectl apply -k overlays/reader: 2 readers joined and ready in %v; learners %s", time.Since(start).Round(time.Second), show(ids))
	n.readThrough(t, "understudy-replica-client-reader")
	// README step 5.
	status := n.kubectl(t, "", "-n", kubeSystem, "exec", readerSTS+"-0", "--", "replica", "status")
	t.Logf("kubectl -n kube-system exec %s-0 -- replica status:\n%s", readerSTS, status)

	if full {
		step(t, "the optional monitoring kustomization, with prometheus-operator's CRDs", func() {
			for _, crd := range []string{monitoringCRD("ServiceMonitor", "servicemonitors"), monitoringCRD("PrometheusRule", "prometheusrules")} {
				n.kubectl(t, crd, "apply", "-f", "-")
			}
			n.kubectl(t, "", "wait", "--for", "condition=Established", "--timeout", "60s", "crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")
			mon := filepath.Join(n.deploy, "monitoring")
			// Until kubectl's discovery knows the new kinds.
			harness.WaitFor(t, time.Minute, "kubectl apply -k monitoring", func() (bool, error) {
				out, err := n.try("", n.env["KUBECTL"], "apply", "-k", mon)
				if err == nil {
					t.Logf("kubectl apply -k monitoring: %s", strings.TrimSpace(out))
				}
				return err == nil, err
			})
			n.kubectl(t, "", "delete", "-k", mon)
		})
	}

	if full {
		step(t, "a second kube-apiserver through the readers' Service", func() { n.secondAPIServer(t) })
		ids = n.learners(t)
	}

	step(t, "scale 2 → 1 → 2", func() {
		n.kubectl(t, "", "-n", kubeSystem, "scale", "sts", readerSTS, "--replicas=1")
		one := n.waitReaders(t, 1)
		if one[readerSTS+"-0"] != ids[readerSTS+"-0"] {
			t.Fatalf("after scale to 1: learners %s, want %s-0 kept as %x", show(one), readerSTS, ids[readerSTS+"-0"])
		}
		t.Logf("scaled to 1: learners %s (ordinal 1 left in its preStop hook)", show(one))
		n.kubectl(t, "", "-n", kubeSystem, "scale", "sts", readerSTS, "--replicas=2")
		ids = n.waitReaders(t, 2)
		t.Logf("scaled to 2: learners %s (ordinal 1 joined anew on a fresh volume)", show(ids))
	})

	step(t, "delete pod 0: the same member comes back", func() {
		name := readerSTS + "-0"
		uid := n.pods(t, "reader")[name].Metadata.UID
		n.kubectl(t, "", "-n", kubeSystem, "delete", "pod", name)
		got := n.waitReaders(t, 2, func(p map[string]pod) bool { return p[name].Metadata.UID != uid })
		if got[name] != ids[name] {
			t.Fatalf("after deleting pod %s: learners %s, want %s still %x", name, show(got), name, ids[name])
		}
		t.Logf("pod %s deleted and back: learners %s (same ID, same data)", name, show(got))
	})

	step(t, "delete pod 1 with its volume: its stale entry is replaced", func() {
		name := readerSTS + "-1"
		uid := n.pods(t, "reader")[name].Metadata.UID
		n.kubectl(t, "", "-n", kubeSystem, "delete", "pvc", "data-"+name, "--wait=false")
		n.kubectl(t, "", "-n", kubeSystem, "delete", "pod", name)
		got := n.waitReaders(t, 2, func(p map[string]pod) bool { return p[name].Metadata.UID != uid })
		if got[name] == ids[name] {
			t.Fatalf("after deleting pod %s and its volume: learners %s, want %s under a new ID", name, show(got), name)
		}
		t.Logf("pod %s and its volume deleted: learners %s (entry %x replaced by the new pod)", name, show(got), ids[name])
		ids = got
	})

	if full {
		step(t, "rolling image update", func() { n.rollingUpdate(t, ids) })
	}

	step(t, "kubectl delete -k: no learner left", func() {
		n.kubectl(t, "", "delete", "-k", overlay)
		harness.WaitFor(t, 3*time.Minute, "the readers' pods gone and no learner listed", func() (bool, error) {
			p, l := n.pods(t, "reader"), n.learners(t)
			return len(p) == 0 && len(l) == 0, fmt.Errorf("pods %d, learners %s", len(p), show(l))
		})
		n.kubectl(t, "", "-n", kubeSystem, "delete", "pvc", "-l", "app.kubernetes.io/component=reader")
		t.Logf("uninstalled: members %s", show(n.voterIDs(t)))
	})
}

// waitReaders waits until want reader pods are ready, the learners are
// exactly those pods, and every extra condition holds; it returns the
// learners.
func (n *node) waitReaders(t *testing.T, want int, extra ...func(map[string]pod) bool) map[string]uint64 {
	t.Helper()
	var learners map[string]uint64
	harness.WaitFor(t, joinTimeout, fmt.Sprintf("%d ready readers, each the one learner of its name", want), func() (bool, error) {
		pods := n.pods(t, "reader")
		learners = n.learners(t)
		ready := 0
		for _, p := range pods {
			if p.ready() {
				ready++
			}
		}
		for _, f := range extra {
			if !f(pods) {
				return false, fmt.Errorf("pods %d (%d ready), learners %s, not yet the pods asked for", len(pods), ready, show(learners))
			}
		}
		if len(pods) != want || ready != want || len(learners) != want {
			return false, fmt.Errorf("pods %d (%d ready), learners %s", len(pods), ready, show(learners))
		}
		for name := range pods {
			if _, ok := learners[name]; !ok {
				return false, fmt.Errorf("pod %s is no learner: %s", name, show(learners))
			}
		}
		return true, nil
	})
	return learners
}

// readThrough writes through the voters and reads it back through a
// client Service, linearizable and serializable.
func (n *node) readThrough(t *testing.T, svc string) {
	t.Helper()
	c := n.serviceClient(t, svc)()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := strconv.FormatInt(time.Now().UnixNano(), 10)
	put, err := n.etcd.Put(ctx, "/kubenode/probe", want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, "/kubenode/probe")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != want {
		t.Fatalf("linearizable get through %s after a put at revision %d: %v, %v", svc, put.Header.Revision, got, err)
	}
	t.Logf("through Service %s: a put at revision %d read back linearizable at revision %d", svc, put.Header.Revision, got.Header.Revision)
}
