//go:build kube

package kube

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// failoverAfter is the standby overlay's UNDERSTUDY_FAILOVER_AFTER for this
// check: longer than the 2-minute restart that must not be taken over, and
// short enough to see a takeover (the overlay's own is 10m).
const failoverAfter = 3 * time.Minute

// standby applies the standby overlay (host network, URLs naming the
// node's address) and checks issue 40's node line: voter-2 restarted after
// 2 minutes with no hold is not replaced; killed for good, it is replaced
// within --failover-after + 15 s, and the new voter keeps the quorum while
// CoreDNS is stopped. Then the runbook of docs/roles.md brings voter-2 back
// and the standby leaves.
func (n *node) standby(t *testing.T) {
	const pod = "understudy-replica-standby-0"
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	// The standby's certificate names the node's address: its URLs do.
	secret := n.run(t, "", filepath.Join(root, "scripts", "kube-pki-secret.sh"), "--ca-dir", n.env["ETCD_PKI"], "--ip", "10.123.0.1", "reader", "cascaded", "standby")
	n.kubectl(t, secret, "apply", "-f", "-")
	n.edit(t, "overlays/standby/kustomization.yaml", func(s string) string {
		return replaceLine(t, s, "      - UNDERSTUDY_FAILOVER_AFTER=", "      - UNDERSTUDY_FAILOVER_AFTER="+failoverAfter.String())
	})
	overlay := filepath.Join(n.deploy, "overlays", "standby")
	n.kubectl(t, "", "apply", "-k", overlay)
	var standbyID uint64
	harness.WaitFor(t, joinTimeout, "the standby ready, a learner", func() (bool, error) {
		p := n.pods(t, "standby")[pod]
		standbyID = n.learners(t)[pod]
		return p.ready() && standbyID != 0, fmt.Errorf("ready %v, learners %s", p.ready(), show(n.learners(t)))
	})
	t.Logf("standby %x joined at %s; %s", standbyID, "https://10.123.0.1:12380", n.roleState(t, pod))
	voters := n.voterIDs(t)

	step(t, "voter-2 restarted after 2 minutes, no hold: no takeover", func() {
		n.run(t, "", n.env["KUBE_NODE"], "voter", "2", "stop")
		stopped := time.Now()
		for time.Since(stopped) < 2*time.Minute {
			if got := n.voterIDs(t); !maps(got, voters) {
				t.Fatalf("%v after voter-2 stopped: voters %s, want %s", time.Since(stopped).Round(time.Second), show(got), show(voters))
			}
			time.Sleep(5 * time.Second) // a sampling period, not a synchronisation
		}
		t.Logf("voter-2 down for %v: standby's view: %s", time.Since(stopped).Round(time.Second), n.roleState(t, pod))
		n.run(t, "", n.env["KUBE_NODE"], "voter", "2", "start")
		harness.WaitFor(t, time.Minute, "voter-2 healthy again", func() (bool, error) {
			return n.healthy(t, "https://10.123.0.1:2479")
		})
		// Past --failover-after from the stop, with voter-2 back: still no takeover.
		for time.Since(stopped) < failoverAfter+30*time.Second {
			if got := n.voterIDs(t); !maps(got, voters) {
				t.Fatalf("%v after voter-2 stopped (back since): voters %s, want %s", time.Since(stopped).Round(time.Second), show(got), show(voters))
			}
			time.Sleep(5 * time.Second) // a sampling period
		}
		t.Logf("%v after the stop, voters unchanged %s; standby: %s", time.Since(stopped).Round(time.Second), show(n.voterIDs(t)), n.roleState(t, pod))
	})

	step(t, "voter-2 killed for good: a takeover, then the quorum without CoreDNS", func() {
		n.run(t, "", n.env["KUBE_NODE"], "voter", "2", "stop")
		stopped := time.Now()
		harness.WaitFor(t, failoverAfter+2*time.Minute, "the standby a voter in voter-2's place", func() (bool, error) {
			v := n.voterIDs(t)
			_, still := v["voter-2"]
			return v[pod] == standbyID && !still && len(v) == 3, fmt.Errorf("voters %s", show(v))
		})
		took := time.Since(stopped)
		t.Logf("takeover %v after voter-2 stopped (--failover-after %v): voters %s", took.Round(time.Second), failoverAfter, show(n.voterIDs(t)))
		if took > failoverAfter+15*time.Second+30*time.Second {
			t.Errorf("the takeover took %v, more than --failover-after + 15 s and 30 s of the checks' own polling", took)
		}
		n.kubectl(t, "", "-n", kubeSystem, "scale", "deploy", "coredns", "--replicas=0")
		harness.WaitFor(t, time.Minute, "no CoreDNS pod", func() (bool, error) {
			out := n.kubectl(t, "", "-n", kubeSystem, "get", "pods", "-l", "k8s-app=kube-dns", "-o", "name")
			return strings.TrimSpace(out) == "", fmt.Errorf("%s", out)
		})
		standbyURL := "https://10.123.0.1:12379"
		for i := 0; i < 20; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := n.etcd.Put(ctx, "/kubenode/without-dns", fmt.Sprint(i))
			cancel()
			if err != nil {
				t.Fatalf("put %d with CoreDNS stopped: %v", i, err)
			}
			if ok, err := n.healthy(t, standbyURL); !ok {
				t.Fatalf("the new voter (the standby, %s) with CoreDNS stopped: %v", standbyURL, err)
			}
			time.Sleep(time.Second) // a write a second for 20 s
		}
		t.Logf("CoreDNS stopped: 20 writes in 20 s committed by voter-1, voter-3 and the standby (%s healthy throughout)", standbyURL)
		n.kubectl(t, "", "-n", kubeSystem, "scale", "deploy", "coredns", "--replicas=1")
	})

	step(t, "the runbook: voter-2 back as a voter, the standby out", func() {
		admin := []string{"--endpoints", n.env["VOTERS"], "--cacert", filepath.Join(n.env["ETCD_PKI"], "ca.crt"),
			"--cert", filepath.Join(n.env["ETCD_PKI"], "server.crt"), "--key", filepath.Join(n.env["ETCD_PKI"], "server.key")}
		n.run(t, "", n.env["REPLICA"], append([]string{"hold", "--all", "--for", "30m", "--reason", "moving the standby back"}, admin...)...)
		n.run(t, "", n.env["KUBE_NODE"], "voter", "2", "rejoin")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := n.etcd.MemberRemove(ctx, standbyID); err != nil {
			t.Fatalf("remove the promoted standby %x: %v", standbyID, err)
		}
		n.kubectl(t, "", "delete", "-k", overlay)
		n.kubectl(t, "", "-n", kubeSystem, "delete", "pvc", "-l", "app.kubernetes.io/component=standby")
		n.run(t, "", n.env["REPLICA"], append([]string{"hold", "--release", "--all"}, admin...)...)
		got := n.voterIDs(t)
		if _, ok := got["voter-2"]; !ok || len(got) != 3 || len(n.learners(t)) != 0 {
			t.Fatalf("after the runbook: voters %s, learners %s; want voter-1..3 and no learner", show(got), show(n.learners(t)))
		}
		t.Logf("after the runbook: voters %s", show(got))
	})
}

// healthy asks a member's /health through the etcd client port.
func (n *node) healthy(t *testing.T, url string) (bool, error) {
	c := n.client(t, []string{url})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.Get(ctx, "/kubenode/health")
	return err == nil, err
}

// roleState is the standby's own `replica status` line for itself.
func (n *node) roleState(t *testing.T, pod string) string {
	out, err := n.try("", n.env["KUBECTL"], "-n", kubeSystem, "exec", pod, "--", "replica", "status")
	if err != nil {
		return err.Error()
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, pod) {
			return strings.Join(strings.Fields(line), " ")
		}
	}
	return out
}
