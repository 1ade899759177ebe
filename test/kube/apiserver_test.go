//go:build kube

package kube

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

const (
	// buildKubeTimeout bounds scripts/build-kube.sh; a cold build of
	// kube-apiserver and kubectl takes 20-40 minutes on two busy cores, so
	// build them once beforehand (the script caches them).
	buildKubeTimeout = 60 * time.Minute
	// apiserverReadyTimeout bounds the wait for /readyz: the apiserver's
	// post-start hooks (RBAC bootstrap, priority and fairness, CRD
	// discovery) take 10-30 s on a loaded machine.
	apiserverReadyTimeout = 3 * time.Minute
	// kubectlTimeout bounds one kubectl command.
	kubectlTimeout = 2 * time.Minute
	// adminToken is the static bearer token of the user admin, in group
	// system:masters.
	adminToken = "understudy-kube-e2e-admin-token"
)

// kubeBins are the kube-apiserver and kubectl binaries.
type kubeBins struct{ apiserver, kubectl string }

var kubeBuilt struct {
	once sync.Once
	bins kubeBins
	err  error
}

// kubeBinaries runs scripts/build-kube.sh once per test process, which
// builds kube-apiserver and kubectl into its cache unless they are there.
func kubeBinaries(t *testing.T) kubeBins {
	t.Helper()
	kubeBuilt.once.Do(func() {
		start := time.Now()
		kubeBuilt.bins, kubeBuilt.err = buildKube()
		t.Logf("scripts/build-kube.sh: %v (%s, %s)", time.Since(start).Round(time.Millisecond), kubeBuilt.bins.apiserver, kubeBuilt.bins.kubectl)
	})
	if kubeBuilt.err != nil {
		t.Fatalf("%v", kubeBuilt.err)
	}
	return kubeBuilt.bins
}

func buildKube() (kubeBins, error) {
	root, err := moduleRoot()
	if err != nil {
		return kubeBins{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildKubeTimeout)
	defer cancel()
	script := filepath.Join(root, "scripts", "build-kube.sh")
	cmd := exec.CommandContext(ctx, script)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return kubeBins{}, fmt.Errorf("%s: %w\n%s", script, err, stderr.Bytes())
	}
	lines := strings.Fields(string(out))
	if len(lines) < 2 {
		return kubeBins{}, fmt.Errorf("%s printed %q, want the paths of kube-apiserver and kubectl", script, out)
	}
	return kubeBins{apiserver: lines[len(lines)-2], kubectl: lines[len(lines)-1]}, nil
}

// moduleRoot walks up from the test's directory to the one holding go.mod.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}

// apiserver is a running kube-apiserver.
type apiserver struct {
	*harness.Proc
	URL string
	// CertDir holds its self-signed serving certificate (apiserver.crt,
	// with the CA that signed it).
	CertDir string
}

// startAPIServer starts kube-apiserver on 127.0.0.1 storing in etcdServers
// and waits until its /readyz answers ok. extra flags come last (a flag
// given twice takes the last value).
func startAPIServer(t *testing.T, bin string, etcdServers []string, extra ...string) *apiserver {
	t.Helper()
	dir := t.TempDir()
	saKey := filepath.Join(dir, "sa.key")
	writeRSAKey(t, saKey)
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(adminToken+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := harness.FreePort(t)
	args := []string{
		"--etcd-servers", strings.Join(etcdServers, ","),
		"--etcd-prefix", "/registry",
		"--secure-port", strconv.Itoa(port),
		"--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1",
		"--cert-dir", filepath.Join(dir, "certs"),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", saKey,
		"--service-account-signing-key-file", saKey,
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--token-auth-file", tokens,
		"--authorization-mode", "RBAC",
		// The kubernetes Service's endpoints may not be a loopback address,
		// and nothing here uses them.
		"--endpoint-reconciler-type", "none",
		// Nothing here runs the controllers these plugins wait for.
		"--disable-admission-plugins", "ServiceAccount",
		"--profiling=false",
		"--v", "1",
	}
	args = append(args, extra...)
	a := &apiserver{
		Proc:    harness.Start(t, harness.ProcConfig{Name: "kube-apiserver", Bin: bin, Args: args}),
		URL:     "https://127.0.0.1:" + strconv.Itoa(port),
		CertDir: filepath.Join(dir, "certs"),
	}
	start := time.Now()
	harness.WaitFor(t, apiserverReadyTimeout, "kube-apiserver /readyz ok", func() (bool, error) {
		if a.Exited() {
			t.Fatalf("kube-apiserver exited before it was ready")
		}
		code, body := a.get("/readyz")
		if code != http.StatusOK {
			return false, fmt.Errorf("/readyz: %d %s", code, body)
		}
		return true, nil
	})
	t.Logf("kube-apiserver ready in %v on %s, --etcd-servers %s", time.Since(start).Round(time.Millisecond), a.URL, strings.Join(etcdServers, ","))
	return a
}

// insecureClient is for the apiserver's self-signed serving certificate.
var insecureClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
}

// get sends one GET as admin and returns the status (0 when it failed) and
// body.
func (a *apiserver) get(path string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, a.URL+path, nil)
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := insecureClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func writeRSAKey(t *testing.T, path string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// kubectl runs kubectl against one apiserver as admin.
type kubectl struct {
	bin, server, home string
}

func newKubectl(t *testing.T, bin, server string) *kubectl {
	return &kubectl{bin: bin, server: server, home: t.TempDir()}
}

// args are the connection flags every invocation gets.
func (k *kubectl) args(args ...string) []string {
	return append([]string{
		"--server", k.server, "--token", adminToken, "--insecure-skip-tls-verify",
		"--cache-dir", filepath.Join(k.home, "cache"),
	}, args...)
}

// env keeps kubectl away from the user's kubeconfig.
func (k *kubectl) env() []string {
	return []string{"KUBECONFIG=" + filepath.Join(k.home, "kubeconfig"), "HOME=" + k.home}
}

// run runs kubectl with stdin and returns its stdout, or stdout and stderr
// in the error when it fails.
func (k *kubectl) run(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, k.args(args...)...)
	cmd.Env = append(os.Environ(), k.env()...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.String(), nil
}

// must is run that fails the test on error.
func (k *kubectl) must(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := k.run(stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
