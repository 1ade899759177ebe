//go:build kube

package kube

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// maxLearners is deploy/README.md's step 1 on the node, whose voters are
// static pods as kubeadm's etcd: --max-learners=8 into the
// ClusterConfiguration with kubectl edit, then into each voter's manifest,
// one voter at a time, each followed by the README's health check run in
// that voter's pod. A voter that has the flag already is left alone.
func (n *node) maxLearners(t *testing.T) {
	dir := t.TempDir()
	editor := filepath.Join(dir, "editor.py")
	// An editor that adds the README's extraArgs under etcd.local.
	script := `import re, sys
p = sys.argv[1]
s = open(p).read()
if "name: max-learners" not in s:
    s = re.sub(r"^(\s*)local:\n", lambda m: m.group(0) + m.group(1) + "  extraArgs:\n" + m.group(1) + "    - name: max-learners\n" + m.group(1) + "      value: \"8\"\n", s, count=1, flags=re.M)
open(p, "w").write(s)
`
	if err := os.WriteFile(editor, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBE_EDITOR", "python3 "+editor)
	out, err := n.try("", n.env["KUBECTL"], "-n", kubeSystem, "edit", "cm", "kubeadm-config")
	if err != nil && !strings.Contains(err.Error(), "Edit cancelled, no changes made") {
		t.Fatalf("kubectl -n kube-system edit cm kubeadm-config: %v", err)
	}
	cfg := n.kubectl(t, "", "-n", kubeSystem, "get", "cm", "kubeadm-config", "-o", "jsonpath={.data.ClusterConfiguration}")
	if !strings.Contains(cfg, "name: max-learners") || !strings.Contains(cfg, `value: "8"`) {
		t.Fatalf("kubeadm-config after the edit (%s):\n%s", strings.TrimSpace(out), cfg)
	}
	t.Logf("kubectl -n kube-system edit cm kubeadm-config: %s", strings.TrimSpace(out))
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("voter-%d", i)
		manifest := filepath.Join(n.env["STATIC_PODS"], "etcd-"+name+".yaml")
		b, err := os.ReadFile(manifest)
		if err != nil {
			t.Fatalf("%s's manifest: %v", name, err)
		}
		if strings.Contains(string(b), "--max-learners=8") {
			t.Logf("%s: --max-learners=8 already in %s", name, manifest)
			continue
		}
		pod := "etcd-" + name + "-node1"
		before := n.staticPod(t, pod).Metadata.Annotations["kubernetes.io/config.hash"]
		flagLine := "        - --name=" + name + "\n"
		if !strings.Contains(string(b), flagLine) {
			t.Fatalf("%s: no %q line to add the flag after", manifest, strings.TrimSpace(flagLine))
		}
		edited := strings.Replace(string(b), flagLine, flagLine+"        - --max-learners=8\n", 1)
		if err := os.WriteFile(manifest, []byte(edited), 0o600); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		port := 2279 + 100*i
		harness.WaitFor(t, 3*time.Minute, name+" restarted by the kubelet and healthy with every member", func() (bool, error) {
			p := n.staticPod(t, pod)
			if p.Metadata.Annotations["kubernetes.io/config.hash"] == before || !p.ready() {
				return false, fmt.Errorf("%s not yet restarted and ready", pod)
			}
			// README step 1's check, in that voter's pod.
			out, err := n.try("", n.env["KUBECTL"], "-n", kubeSystem, "exec", pod, "--", "etcdctl",
				"--endpoints", fmt.Sprintf("https://127.0.0.1:%d", port), "--cacert", "/etc/kubernetes/pki/etcd/ca.crt",
				"--cert", "/etc/kubernetes/pki/etcd/server.crt", "--key", "/etc/kubernetes/pki/etcd/server.key", "endpoint", "health", "--cluster")
			if err != nil {
				return false, err
			}
			t.Logf("%s restarted with --max-learners=8 in %v; endpoint health --cluster:\n%s", name, time.Since(start).Round(time.Second), strings.TrimSpace(out))
			return true, nil
		})
	}
}

// staticPod is a voter's mirror pod as the API server shows it (a zero pod
// while there is none).
func (n *node) staticPod(t *testing.T, name string) pod {
	var p pod
	out, err := n.try("", n.env["KUBECTL"], "-n", kubeSystem, "get", "pod", name, "-o", "json")
	if err != nil {
		return p
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	return p
}
