package deploy

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/understudy-kv/understudy/config"
)

var kubeDir = filepath.Join("..", "..", "deploy", "kubernetes")

// pkiFiles are the keys of the Secret scripts/kube-pki-secret.sh makes.
var pkiFiles = []string{"ca.crt", "server.crt", "server.key", "peer.crt", "peer.key"}

type container struct {
	Name    string   `yaml:"name"`
	Args    []string `yaml:"args"`
	Command []string `yaml:"command"`
	Env     []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom any    `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name string `yaml:"name"`
	} `yaml:"ports"`
	StartupProbe   *probe `yaml:"startupProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	VolumeMounts   []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
	Lifecycle struct {
		PreStop struct {
			Exec struct {
				Command []string `yaml:"command"`
			} `yaml:"exec"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type statefulSet struct {
	Spec struct {
		Template struct {
			Spec struct {
				Containers []container `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type kustomization struct {
	ConfigMapGenerator []struct {
		Name     string   `yaml:"name"`
		Literals []string `yaml:"literals"`
	} `yaml:"configMapGenerator"`
	NameSuffix   string `yaml:"nameSuffix"`
	Replacements []struct {
		Source struct {
			Kind string `yaml:"kind"`
			Name string `yaml:"name"`
		} `yaml:"source"`
		Targets []struct {
			FieldPaths []string `yaml:"fieldPaths"`
		} `yaml:"targets"`
	} `yaml:"replacements"`
}

// peerServiceSet says whether k's replacements copy the headless Service's
// final name into PEER_SERVICE.
func (k kustomization) peerServiceSet() bool {
	for _, r := range k.Replacements {
		if r.Source.Kind != "Service" || r.Source.Name != "understudy-replica" {
			continue
		}
		for _, tg := range r.Targets {
			if slices.ContainsFunc(tg.FieldPaths, func(p string) bool { return strings.HasSuffix(p, ".env.[name=PEER_SERVICE].value") }) {
				return true
			}
		}
	}
	return false
}

// envRef is Kubernetes' $(VAR) in args and env values.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// TestKubernetesOverlaysConfigureAValidReplica reads the StatefulSet and
// each overlay's settings as Kubernetes would hand them to the container
// (ConfigMap literals as the environment, $(VAR) expanded in env and args,
// for pod 0 of the overlay's StatefulSet) and loads them with the replica's
// own flag and environment parsing and Validate: every flag exists, every
// UNDERSTUDY_ variable names a flag, and the settings are accepted. It also
// checks that the TLS files are the Secret's, the data dir is on the PVC
// and the probes use a declared port. kubectl kustomize renders the overlays
// (scripts/check-kubernetes.sh); CI has no kubectl.
func TestKubernetesOverlaysConfigureAValidReplica(t *testing.T) {
	var sts statefulSet
	loadYAML(t, filepath.Join(kubeDir, "base", "statefulset.yaml"), &sts)
	if len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(sts.Spec.Template.Spec.Containers))
	}
	c := sts.Spec.Template.Spec.Containers[0]
	checkContainer(t, c)
	base := literals(t, filepath.Join(kubeDir, "base", "kustomization.yaml"))
	for _, overlay := range []string{"reader", "standby"} {
		t.Run(overlay, func(t *testing.T) {
			var k kustomization
			loadYAML(t, filepath.Join(kubeDir, "overlays", overlay, "kustomization.yaml"), &k)
			if k.NameSuffix != "-"+overlay {
				t.Errorf("nameSuffix %q, want -%s (scripts/kube-pki-secret.sh names pods understudy-replica-%s-N)", k.NameSuffix, overlay, overlay)
			}
			env := map[string]string{}
			for key, v := range base {
				env[key] = v
			}
			for key, v := range literals(t, filepath.Join(kubeDir, "overlays", overlay, "kustomization.yaml")) {
				env[key] = v
			}
			if !k.peerServiceSet() {
				t.Errorf("no replacement sets PEER_SERVICE to the headless Service's name")
			}
			sts := "understudy-replica-" + overlay
			env["POD_NAME"], env["POD_NAMESPACE"] = sts+"-0", "kube-system"
			for _, e := range c.Env {
				switch {
				case e.Name == "PEER_SERVICE":
					env[e.Name] = "understudy-replica" + k.NameSuffix // the replacement
				case e.ValueFrom == nil:
					env[e.Name] = expand(t, e.Value, env)
				}
			}
			var args []string
			for _, a := range c.Args {
				args = append(args, expand(t, a, env))
			}
			for key, v := range env {
				if strings.HasPrefix(key, config.EnvPrefix) {
					t.Setenv(key, v)
				}
			}
			cfg := config.DefaultReplica()
			fs := config.NewReplicaFlags(&cfg)
			for key := range env {
				name, ok := strings.CutPrefix(key, config.EnvPrefix)
				if ok && fs.Lookup(strings.ReplaceAll(strings.ToLower(name), "_", "-")) == nil {
					t.Errorf("%s names no replica flag", key)
				}
			}
			if err := config.LoadReplica(&cfg, fs, args); err != nil {
				t.Fatalf("replica %s: %v", strings.Join(args, " "), err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("replica %s: %v", strings.Join(args, " "), err)
			}
			if cfg.Learner == nil {
				t.Fatalf("replica %s: want a learner replica", strings.Join(args, " "))
			}
			l := cfg.Learner
			// The replica joins no cluster it is not told (no default --join).
			if len(l.Join) == 0 {
				t.Errorf("no --join (UNDERSTUDY_JOIN): the replica would refuse to start")
			}
			if string(l.Promotion.Role) != overlay {
				t.Errorf("role %q, want %q", l.Promotion.Role, overlay)
			}
			wantPeer := "https://" + sts + "-0." + sts + ".kube-system.svc.cluster.local:2380"
			if cfg.Name != sts+"-0" || !slices.Equal(l.AdvertisePeerURLs, []string{wantPeer}) {
				t.Errorf("name %q, peer URLs %q: want the pod's name and %s", cfg.Name, l.AdvertisePeerURLs, wantPeer)
			}
			if l.RemoveOnExit {
				t.Errorf("--remove-on-exit is set: every rescheduled pod would leave and copy the database again")
			}
			for _, f := range []string{cfg.ClientTLS.CertFile, cfg.ClientTLS.KeyFile, cfg.ClientTLS.TrustedCAFile, l.PeerTLS.CertFile, l.PeerTLS.KeyFile, l.PeerTLS.TrustedCAFile} {
				if dir, file := filepath.Split(f); dir != "/etc/kubernetes/pki/etcd/" || !slices.Contains(pkiFiles, file) {
					t.Errorf("TLS file %q is not one of the Secret's %v in /etc/kubernetes/pki/etcd", f, pkiFiles)
				}
			}
			if !strings.HasPrefix(cfg.DataDir, mountOf(c, "data")+"/") {
				t.Errorf("--data-dir %s is not under the PVC's mount %s", cfg.DataDir, mountOf(c, "data"))
			}
			checkPreStop(t, c, env)
		})
	}
}

// checkPreStop loads the preStop hook's command as `replica leave` would,
// with the container's environment (an exec hook expands no $(VAR)): it
// leaves only if scaled down, as this pod, through the voters, with the
// Secret's certificates.
func checkPreStop(t *testing.T, c container, env map[string]string) {
	t.Helper()
	cmd := c.Lifecycle.PreStop.Exec.Command
	if len(cmd) < 2 || cmd[0] != "/usr/local/bin/replica" || cmd[1] != "leave" {
		t.Fatalf("preStop %q: want /usr/local/bin/replica leave … (the image's binary)", cmd)
	}
	for _, a := range cmd {
		if strings.Contains(a, "$(") {
			t.Errorf("preStop argument %q: an exec hook does not expand $(VAR)", a)
		}
	}
	for key, v := range env {
		if strings.HasPrefix(key, config.EtcdctlEnvPrefix) || key == "POD_NAME" {
			t.Setenv(key, v)
		}
	}
	var a config.Admin
	if err := config.LoadAdmin(&a, config.NewAdminFlags(&a, "leave"), cmd[2:]); err != nil {
		t.Fatalf("preStop %q: %v", cmd, err)
	}
	if err := a.Validate(); err != nil {
		t.Fatalf("preStop %q: %v", cmd, err)
	}
	if !a.IfScaledDown || a.Target != env["POD_NAME"] {
		t.Errorf("preStop %q: --if-scaled-down %v, member %q; want it, and the pod %s", cmd, a.IfScaledDown, a.Target, env["POD_NAME"])
	}
	if got, want := strings.Join(a.Conn.Endpoints, ","), env["UNDERSTUDY_JOIN"]; got != want {
		t.Errorf("preStop's endpoints %q, want the voters, UNDERSTUDY_JOIN %q", got, want)
	}
	for _, f := range []string{a.Conn.CACert, a.Conn.Cert, a.Conn.Key} {
		if dir, file := filepath.Split(f); dir != "/etc/kubernetes/pki/etcd/" || !slices.Contains(pkiFiles, file) {
			t.Errorf("preStop's TLS file %q is not one of the Secret's %v in /etc/kubernetes/pki/etcd", f, pkiFiles)
		}
	}
}

func checkContainer(t *testing.T, c container) {
	t.Helper()
	if len(c.Command) != 0 {
		t.Errorf("command %q replaces the image's entrypoint (replica)", c.Command)
	}
	ports := map[string]bool{}
	for _, p := range c.Ports {
		ports[p.Name] = true
	}
	for name, p := range map[string]*probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		want := map[string]string{"startup": "/livez", "liveness": "/livez", "readiness": "/readyz"}[name]
		if p == nil || p.HTTPGet.Path != want || !ports[p.HTTPGet.Port] {
			t.Errorf("%s probe: want GET %s on a declared port", name, want)
		}
	}
	if mountOf(c, "etcd-pki") != "/etc/kubernetes/pki/etcd" {
		t.Errorf("the Secret is mounted at %q, want kubeadm's /etc/kubernetes/pki/etcd", mountOf(c, "etcd-pki"))
	}
}

func mountOf(c container, volume string) string {
	for _, m := range c.VolumeMounts {
		if m.Name == volume {
			return m.MountPath
		}
	}
	return ""
}

// literals are a kustomization's understudy-replica ConfigMap literals.
func literals(t *testing.T, path string) map[string]string {
	t.Helper()
	var k kustomization
	loadYAML(t, path, &k)
	m := map[string]string{}
	for _, g := range k.ConfigMapGenerator {
		if !strings.HasPrefix(g.Name, "understudy-replica") { // and -cascaded
			continue
		}
		for _, l := range g.Literals {
			key, v, ok := strings.Cut(l, "=")
			if !ok {
				t.Fatalf("%s: literal %q is not KEY=value", path, l)
			}
			m[key] = v
		}
	}
	return m
}

// expand replaces $(VAR) as the kubelet does; an undefined one fails.
func expand(t *testing.T, s string, env map[string]string) string {
	t.Helper()
	return envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		v, ok := env[name]
		if !ok {
			t.Errorf("%q refers to $(%s), which is not defined before it", s, name)
		}
		return v
	})
}

// TestKubernetesCascadedOverlayConfiguresACascadedReplica loads the
// cascaded overlay's Deployment as Kubernetes would hand it to the
// container, as TestKubernetesOverlaysConfigureAValidReplica does the
// StatefulSet: a valid cascaded replica (no member: no --join, no peer
// URLs), fed by the reader overlay's pods by the names the Secret's
// certificate lists (scripts/kube-pki-secret.sh), its data on the emptyDir.
func TestKubernetesCascadedOverlayConfiguresACascadedReplica(t *testing.T) {
	dir := filepath.Join(kubeDir, "overlays", "cascaded")
	var d statefulSet // a Deployment's pod template has the same shape
	loadYAML(t, filepath.Join(dir, "deployment.yaml"), &d)
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(d.Spec.Template.Spec.Containers))
	}
	c := d.Spec.Template.Spec.Containers[0]
	checkContainer(t, c)
	env := literals(t, filepath.Join(dir, "kustomization.yaml"))
	env["POD_NAME"], env["POD_IP"] = "understudy-replica-cascaded-7d9f8-x2x4k", "10.244.0.17"
	var args []string
	for _, a := range c.Args {
		args = append(args, expand(t, a, env))
	}
	cfg := config.DefaultReplica()
	fs := config.NewReplicaFlags(&cfg)
	for key, v := range env {
		if name, ok := strings.CutPrefix(key, config.EnvPrefix); ok {
			if fs.Lookup(strings.ReplaceAll(strings.ToLower(name), "_", "-")) == nil {
				t.Errorf("%s names no replica flag", key)
			}
			t.Setenv(key, v)
		}
	}
	if err := config.LoadReplica(&cfg, fs, args); err != nil {
		t.Fatalf("replica %s: %v", strings.Join(args, " "), err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("replica %s: %v", strings.Join(args, " "), err)
	}
	if cfg.Cascaded == nil {
		t.Fatalf("replica %s: want a cascaded replica", strings.Join(args, " "))
	}
	for i, u := range cfg.Cascaded.Upstream {
		pod := fmt.Sprintf("understudy-replica-reader-%d", i)
		if want := "https://" + pod + ".understudy-replica-reader.kube-system.svc.cluster.local:2379"; u != want {
			t.Errorf("upstream %d is %s, want the reader overlay's pod %s by the name its certificate lists: %s", i, u, pod, want)
		}
	}
	for _, f := range []string{cfg.ClientTLS.CertFile, cfg.ClientTLS.KeyFile, cfg.ClientTLS.TrustedCAFile} {
		if dir, file := filepath.Split(f); dir != "/etc/kubernetes/pki/etcd/" || !slices.Contains(pkiFiles, file) {
			t.Errorf("TLS file %q is not one of the Secret's %v in /etc/kubernetes/pki/etcd", f, pkiFiles)
		}
	}
	if !strings.HasPrefix(cfg.DataDir, mountOf(c, "data")+"/") {
		t.Errorf("--data-dir %s is not under the emptyDir's mount %s", cfg.DataDir, mountOf(c, "data"))
	}
}
