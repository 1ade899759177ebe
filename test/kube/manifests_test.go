//go:build kube

package kube

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// widgetCRD is a small namespaced custom resource with a schema.
const widgetCRD = `{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.e2e.understudy.io"},
  "spec": {
    "group": "e2e.understudy.io", "scope": "Namespaced",
    "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
    "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
      "type": "object",
      "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}
    }}}]
  }
}`

// monitoringCRD is a minimal CRD of the Prometheus operator's group, whose
// schema takes anything: enough for the apiserver to know the kind.
func monitoringCRD(kind, plural string) string {
	return `{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "` + plural + `.monitoring.coreos.com"},
  "spec": {
    "group": "monitoring.coreos.com", "scope": "Namespaced",
    "names": {"kind": "` + kind + `", "listKind": "` + kind + `List", "plural": "` + plural + `", "singular": "` + strings.ToLower(kind) + `"},
    "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
      "type": "object", "x-kubernetes-preserve-unknown-fields": true
    }}}]
  }
}`
}

// createCRD creates a CRD and waits until it is established and kubectl
// can create its kind.
func createCRD(t *testing.T, k *kubectl, crd string) {
	t.Helper()
	var o object
	if err := json.Unmarshal([]byte(crd), &o); err != nil {
		t.Fatal(err)
	}
	k.must(t, crd, "create", "-f", "-")
	k.must(t, "", "wait", "--for", "condition=Established", "--timeout", "60s", "crd/"+o.Metadata.Name)
}

// customResource creates a CRD, a custom resource of it, reads and lists it,
// checks that its schema refuses a wrong type, and deletes it.
func customResource(t *testing.T, k *kubectl) {
	createCRD(t, k, widgetCRD)
	w := `{"apiVersion": "e2e.understudy.io/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": "` + ns + `"}, "spec": {"size": 3}}`
	// kubectl finds the new kind by discovery, which may lag the CRD.
	harness.WaitFor(t, time.Minute, "create Widget w1", func() (bool, error) {
		_, err := k.run(w, "create", "-f", "-")
		return err == nil, err
	})
	got := k.must(t, "", "get", "widgets", "-n", ns, "-o", "jsonpath={.items[*].metadata.name}={.items[*].spec.size}")
	if got != "w1=3" {
		t.Fatalf("list widgets: %q, want w1=3", got)
	}
	bad := strings.Replace(strings.Replace(w, `"w1"`, `"w2"`, 1), `"size": 3`, `"size": "big"`, 1)
	if _, err := k.run(bad, "create", "-f", "-"); err == nil || !strings.Contains(err.Error(), "spec.size") {
		t.Fatalf("create Widget with size \"big\": want refused naming spec.size, got %v", err)
	}
	k.must(t, "", "delete", "widget", "w1", "-n", ns)
}

// dryRunManifests creates the monitoring CRDs and the namespaces the
// manifests name, has the apiserver accept every kustomization under
// deploy/kubernetes with --dry-run=server --validate=strict, and refuse a
// StatefulSet with a field that does not exist.
func dryRunManifests(t *testing.T, k *kubectl) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dirs := kustomizations(t, filepath.Join(root, "deploy", "kubernetes"))
	createCRD(t, k, monitoringCRD("ServiceMonitor", "servicemonitors"))
	createCRD(t, k, monitoringCRD("PrometheusRule", "prometheusrules"))
	created := map[string]bool{"default": true, ns: true}
	var statefulSet map[string]any
	kinds := map[string]int{}
	for _, dir := range dirs {
		rel, _ := filepath.Rel(root, dir)
		objs := render(t, k, dir)
		for _, o := range objs {
			meta, _ := o["metadata"].(map[string]any)
			if n, _ := meta["namespace"].(string); n != "" && !created[n] {
				ensureNamespace(t, k, n)
				created[n] = true
			}
			kind, _ := o["kind"].(string)
			kinds[kind]++
			if kind == "StatefulSet" && statefulSet == nil {
				statefulSet = o
			}
		}
		out, err := k.run("", "apply", "-k", dir, "--dry-run=server", "--validate=strict", "-o", "name")
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if got := len(strings.Fields(out)); got != len(objs) {
			t.Fatalf("%s: the apiserver accepted %d objects, the kustomization has %d:\n%s", rel, got, len(objs), out)
		}
		t.Logf("kubectl apply --dry-run=server --validate=strict -k %s: %d objects accepted", rel, len(objs))
	}
	for _, want := range []string{"StatefulSet", "ServiceMonitor", "PrometheusRule"} {
		if kinds[want] == 0 {
			t.Fatalf("no %s in %v (kinds: %v)", want, dirs, kinds)
		}
	}
	good, _ := json.Marshal(statefulSet)
	if _, err := k.run(string(good), "apply", "-f", "-", "--dry-run=server", "--validate=strict"); err != nil {
		t.Fatalf("the StatefulSet alone: %v", err)
	}
	statefulSet["spec"].(map[string]any)["replicaz"] = 2
	bad, _ := json.Marshal(statefulSet)
	_, err = k.run(string(bad), "apply", "-f", "-", "--dry-run=server", "--validate=strict")
	if err == nil || !strings.Contains(err.Error(), `unknown field "spec.replicaz"`) {
		t.Fatalf("the StatefulSet with spec.replicaz: want refused for the unknown field, got %v", err)
	}
	_, stderr, _ := strings.Cut(err.Error(), "stderr: ")
	t.Logf("the StatefulSet with spec.replicaz: 2 is refused: %s", firstLine(stderr))
}

// ensureNamespace creates namespace n unless it exists (the apiserver
// creates kube-system itself).
func ensureNamespace(t *testing.T, k *kubectl, n string) {
	t.Helper()
	if _, err := k.run("", "create", "namespace", n); err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
		t.Fatal(err)
	}
}

// kustomizations lists every kustomization under dir but base, which every
// overlay includes and which is not applied on its own.
func kustomizations(t *testing.T, dir string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == "kustomization.yaml" && filepath.Dir(path) != filepath.Join(dir, "base") {
			dirs = append(dirs, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("deploy/kubernetes: %v", err)
	}
	for _, want := range []string{"overlays/reader", "overlays/standby", "overlays/cascaded"} {
		if !slices.Contains(dirs, filepath.Join(dir, want)) {
			t.Fatalf("deploy/kubernetes has no %s: %v", want, dirs)
		}
	}
	return dirs
}

// render returns the objects kubectl's kustomize builds from dir.
func render(t *testing.T, k *kubectl, dir string) []map[string]any {
	t.Helper()
	out := k.must(t, "", "kustomize", dir)
	dec := yaml.NewDecoder(strings.NewReader(out))
	var objs []map[string]any
	for {
		var o map[string]any
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("kubectl kustomize %s: %v", dir, err)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	if len(objs) == 0 {
		t.Fatalf("kubectl kustomize %s: no objects", dir)
	}
	return objs
}
