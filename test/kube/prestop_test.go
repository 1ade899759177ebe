//go:build kube

package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// The reader overlay's preStop hook, `replica leave --if-scaled-down`, run
// as the pod would run it: with the reader StatefulSet, ServiceAccount, Role
// and RoleBinding applied from deploy/kubernetes to a real kube-apiserver,
// the service account's own token, and the etcdctl variables the
// StatefulSet sets. Nothing here runs pods (no controllers, no kubelet):
// the test calls the hook where kubelet would, for the pods a StatefulSet
// of that size would have, and checks the member list after each.
func TestPreStopLeavesOnlyWhenScaledDown(t *testing.T) {
	bins := kubeBinaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{Kinds: []harness.Kind{harness.KindEtcd, harness.KindEtcd, harness.KindEtcd}})
	const sts = "understudy-replica-reader"
	// understudy-replica-gone-0's StatefulSet was never created: as if
	// deleted before its pod stopped.
	for _, name := range []string{sts + "-0", sts + "-1", "understudy-replica-gone-0"} {
		harness.StartReplica(t, c, harness.ReplicaConfig{Name: name})
	}
	a := startAPIServer(t, bins.apiserver, c.Endpoints())
	k := newKubectl(t, bins.kubectl, a.URL)

	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	var items []map[string]any
	for _, o := range render(t, k, filepath.Join(root, "deploy", "kubernetes", "overlays", "reader")) {
		switch o["kind"] {
		case "ServiceAccount", "Role", "RoleBinding", "StatefulSet":
			items = append(items, o)
		}
	}
	if len(items) != 4 {
		t.Fatalf("the reader overlay renders %d of ServiceAccount, Role, RoleBinding and StatefulSet, want 4", len(items))
	}
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	k.must(t, string(list), "apply", "-f", "-")
	sa := serviceAccountDir(t, k, a, "kube-system", sts)
	k.must(t, "", "create", "serviceaccount", "nobody", "-n", "kube-system")
	nobody := serviceAccountDir(t, k, a, "kube-system", "nobody")

	hook := func(dir, pod string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, harness.Binaries(t).Replica, "leave", "--if-scaled-down", "--service-account-dir", dir, pod)
		host, port, _ := strings.Cut(strings.TrimPrefix(a.URL, "https://"), ":")
		cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST="+host, "KUBERNETES_SERVICE_PORT="+port,
			"ETCDCTL_ENDPOINTS="+strings.Join(c.Endpoints(), ","))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		t.Logf("preStop of %s: %s", pod, strings.TrimSpace(out.String()))
		return out.String(), err
	}
	members := func() []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := c.Client(t).MemberList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range resp.Members {
			names = append(names, m.Name)
		}
		return names
	}
	listed := func(name string) bool {
		for _, n := range members() {
			if n == name {
				return true
			}
		}
		return false
	}

	// A restart or a rolling update: the StatefulSet still counts both.
	for _, pod := range []string{sts + "-0", sts + "-1"} {
		if out, err := hook(sa, pod); err != nil || !strings.Contains(out, "stays") || !listed(pod) {
			t.Fatalf("preStop of %s with 2 replicas: %v, %q; members %v: want it to stay", pod, err, out, members())
		}
	}
	// A service account without the Role: the hook fails, and nothing
	// leaves on a guess.
	k.must(t, "", "scale", "statefulset", sts, "-n", "kube-system", "--replicas=1")
	if out, err := hook(nobody, sts+"-1"); err == nil || !strings.Contains(out, "403") || !listed(sts+"-1") {
		t.Fatalf("preStop of %s without rights: %v, %q; members %v: want a refusal and the member kept", sts+"-1", err, out, members())
	}
	// Scaled 2 → 1: ordinal 1 leaves, ordinal 0 stays.
	if out, err := hook(sa, sts+"-1"); err != nil || !strings.Contains(out, "leaves") || listed(sts+"-1") {
		t.Fatalf("preStop of %s after a scale to 1: %v, %q; members %v: want it removed", sts+"-1", err, out, members())
	}
	if out, err := hook(sa, sts+"-0"); err != nil || !strings.Contains(out, "stays") || !listed(sts+"-0") {
		t.Fatalf("preStop of %s after a scale to 1: %v, %q; members %v: want it kept", sts+"-0", err, out, members())
	}
	// Its StatefulSet gone (the API server's NotFound): it leaves.
	if out, err := hook(sa, "understudy-replica-gone-0"); err != nil || !strings.Contains(out, "is gone") || listed("understudy-replica-gone-0") {
		t.Fatalf("preStop of understudy-replica-gone-0, whose StatefulSet does not exist: %v, %q; members %v: want it removed", err, out, members())
	}
	// Uninstalled as `kubectl delete -k` does it: the ServiceAccount, Role
	// and RoleBinding are deleted before the StatefulSet, and the pods stop
	// after, so the hook's own token is refused (401): the last one
	// leaves too, and no voter ever did.
	for _, kind := range []string{"serviceaccount", "role", "rolebinding", "statefulset"} {
		k.must(t, "", "delete", kind, sts, "-n", "kube-system")
	}
	if out, err := hook(sa, sts+"-0"); err != nil || !strings.Contains(out, "401") || !strings.Contains(out, "leaves") || listed(sts+"-0") {
		t.Fatalf("preStop of %s after kubectl delete -k: %v, %q; members %v: want it removed", sts+"-0", err, out, members())
	}
	if got := members(); len(got) != 3 {
		t.Fatalf("members after scale-down and uninstall: %v, want the 3 voters alone", got)
	}
}

// serviceAccountDir lays out what Kubernetes mounts in a pod of service
// account name: a token the API server issued for it (TokenRequest), the
// API server's CA and the namespace.
func serviceAccountDir(t *testing.T, k *kubectl, a *apiserver, namespace, name string) string {
	t.Helper()
	dir := t.TempDir()
	token := strings.TrimSpace(k.must(t, "", "create", "token", name, "-n", namespace))
	ca, err := os.ReadFile(filepath.Join(a.CertDir, "apiserver.crt"))
	if err != nil {
		t.Fatal(err)
	}
	for file, content := range map[string][]byte{"token": []byte(token), "namespace": []byte(namespace), "ca.crt": ca} {
		if err := os.WriteFile(filepath.Join(dir, file), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
