package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// Three primaries started with etcd's own flags form a cluster that the real
// etcdctl uses as it uses etcd.
func TestPrimaryClusterServesEtcdctl(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	eps := c.Endpoints()

	if out := harness.MustEtcdctl(t, bins, eps, "put", "foo", "bar"); strings.TrimSpace(out) != "OK" {
		t.Fatalf("put: %q", out)
	}
	if out := harness.MustEtcdctl(t, bins, eps[2:], "get", "foo"); out != "foo\nbar\n" {
		t.Fatalf("get from another member: %q", out)
	}

	// watch from revision 1 sees the put, then a new one.
	watch := harness.EtcdctlCmd(t, bins, eps[1:2], "watch", "foo", "--rev", "1")
	lines := startLines(t, watch)
	harness.MustEtcdctl(t, bins, eps, "put", "foo", "baz")
	expectLines(t, lines, "PUT", "foo", "bar", "PUT", "foo", "baz")

	table := harness.MustEtcdctl(t, bins, eps, "member", "list", "-w", "table")
	for _, m := range c.Members {
		if !strings.Contains(table, m.Name) || !strings.Contains(table, m.ClientURL) {
			t.Errorf("member list table lacks %s (%s):\n%s", m.Name, m.ClientURL, table)
		}
	}

	var st []struct {
		Endpoint string
		Status   struct {
			Header struct {
				MemberID uint64 `json:"member_id"`
			} `json:"header"`
			Leader uint64 `json:"leader"`
		}
	}
	out := harness.MustEtcdctl(t, bins, eps, "endpoint", "status", "-w", "json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("endpoint status -w json: %v\n%s", err, out)
	}
	if len(st) != 3 {
		t.Fatalf("endpoint status: %d endpoints, want 3", len(st))
	}
	for _, s := range st {
		if s.Status.Leader == 0 || s.Status.Leader != st[0].Status.Leader {
			t.Errorf("endpoint %s reports leader %x, others %x", s.Endpoint, s.Status.Leader, st[0].Status.Leader)
		}
	}
}

// Stock etcd and primary speak the same wire protocol and take the same
// flags: two etcd processes and one primary form one cluster.
func TestStockEtcdAndPrimaryFormOneCluster(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, Kinds: []harness.Kind{harness.KindEtcd, harness.KindEtcd, harness.KindPrimary}})
	var primary, etcd *harness.Member
	for i, m := range c.Members {
		switch c.Kinds[i] {
		case harness.KindPrimary:
			primary = m
		case harness.KindEtcd:
			etcd = m
		}
	}
	harness.MustEtcdctl(t, bins, []string{primary.ClientURL}, "put", "mixed", "yes")
	if out := harness.MustEtcdctl(t, bins, []string{etcd.ClientURL}, "get", "mixed", "--print-value-only"); out != "yes\n" {
		t.Fatalf("value written through primary, read from etcd: %q", out)
	}
	harness.MustEtcdctl(t, bins, []string{etcd.ClientURL}, "put", "mixed", "back")
	if out := harness.MustEtcdctl(t, bins, []string{primary.ClientURL}, "get", "mixed", "--print-value-only"); out != "back\n" {
		t.Fatalf("value written through etcd, read from primary: %q", out)
	}
	list := harness.MustEtcdctl(t, bins, []string{primary.ClientURL}, "member", "list")
	if n := strings.Count(strings.TrimSpace(list), "\n") + 1; n != 3 {
		t.Fatalf("member list has %d members, want 3:\n%s", n, list)
	}
}

// Bad input exits non-zero with one line per problem naming the flag or key,
// and never a panic or a stack trace.
func TestPrimaryBadInput(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	dir := t.TempDir()
	malformed := filepath.Join(dir, "malformed.yml")
	if err := os.WriteFile(malformed, []byte("name: [unclosed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(dir, "unreadable.yml")
	if err := os.WriteFile(unreadable, []byte("name: x\n"), 0o000); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown flag", []string{"--no-such-flag"}, []string{"--no-such-flag: unknown flag"}},
		{"malformed URL", []string{"--listen-client-urls", "http//127.0.0.1:x"}, []string{`--listen-client-urls "http//127.0.0.1:x"`}},
		{"name not in initial cluster", []string{"--name", "n9", "--initial-cluster", "n1=http://127.0.0.1:2380"}, []string{`--initial-cluster "n1=http://127.0.0.1:2380": has no member named "n9"`}},
		{"negative max-learners", []string{"--max-learners", "-1"}, []string{"--max-learners -1: must be 0 or more"}},
		{"malformed config file", []string{"--config-file", malformed}, []string{"--config-file", "not valid YAML"}},
		{"missing config file", []string{"--config-file", filepath.Join(dir, "absent.yml")}, []string{"--config-file", "cannot read"}},
		{"all at once", []string{"--no-such-flag", "--max-learners", "-1", "--name", "n9", "--initial-cluster", "n1=http://127.0.0.1:2380"},
			[]string{"--no-such-flag: unknown flag", "--max-learners -1", `has no member named "n9"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := runToExit(t, dir, bins.Primary, tc.args...)
			checkBadInput(t, code, stderr, tc.want)
		})
	}
	// Root reads any file, so only check unreadability where it holds.
	if f, err := os.Open(unreadable); err != nil {
		f.Close()
		code, stderr := runToExit(t, dir, bins.Primary, "--config-file", unreadable)
		checkBadInput(t, code, stderr, []string{"--config-file", "cannot read: permission denied"})
	} else {
		f.Close()
	}
}

func checkBadInput(t *testing.T, code int, stderr string, want []string) {
	t.Helper()
	if code == 0 {
		t.Fatalf("exit code 0 for bad input; stderr:\n%s", stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	for _, bad := range []string{"panic", "goroutine ", ".go:"} {
		if strings.Contains(stderr, bad) {
			t.Errorf("stderr has %q (a crash, not an error message):\n%s", bad, stderr)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if !strings.HasPrefix(line, "primary: --") && !strings.HasPrefix(line, "primary: config file") {
			t.Errorf("line does not name a flag or key: %q", line)
		}
	}
}

// The README's first command: a whole deployment that prints commands which
// then work as printed.
func TestDevDeploymentCommandsWork(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	base := harness.FreePortRun(t, 102)
	dir := t.TempDir()
	p := harness.Start(t, harness.ProcConfig{Name: "dev", Bin: bins.Primary, Args: []string{"--dev", "--dev-port", strconv.Itoa(base), "--dev-dir", dir}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := p.WaitLog(ctx, "Ctrl-C stops everything"); err != nil {
		t.Fatalf("dev deployment not up: %v", err)
	}
	var cmds [][]string
	for _, line := range strings.Split(p.Log(), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "go tool etcdctl ") && !strings.Contains(line, " watch ") {
			cmds = append(cmds, strings.Fields(strings.TrimPrefix(line, "go tool etcdctl ")))
		}
	}
	if len(cmds) < 4 {
		t.Fatalf("dev deployment printed %d etcdctl commands, want several:\n%s", len(cmds), p.Log())
	}
	for _, args := range cmds {
		out, err := exec.CommandContext(ctx, bins.Etcdctl, args...).CombinedOutput()
		if err != nil {
			t.Errorf("printed command `etcdctl %s` failed: %v\n%s", strings.Join(args, " "), err, out)
		}
		if args[len(args)-1] == "greeting" && args[len(args)-2] == "get" && !strings.Contains(string(out), "hello") {
			t.Errorf("`etcdctl %s` did not return the value put before: %s", strings.Join(args, " "), out)
		}
	}
	p.Stop()
	if code, _ := p.Wait(ctx); code != 0 {
		t.Errorf("dev deployment exited %d on SIGTERM, want a clean 0:\n%s", code, p.Log())
	}
}

func runToExit(t *testing.T, dir, bin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not exit: it should refuse bad input at once", bin, args)
	}
	var ee *exec.ExitError
	if err != nil && !asExitError(err, &ee) {
		t.Fatalf("run %s: %v", bin, err)
	}
	if ee != nil {
		return ee.ExitCode(), stderr.String()
	}
	return 0, stderr.String()
}

// startLines starts cmd and returns its stdout lines as they come.
func startLines(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// readUntil collects lines up to and including last, within 30 seconds.
func readUntil(t *testing.T, lines <-chan string, last string) []string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	var got []string
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("output ended before %q; got:\n%s", last, strings.Join(got, "\n"))
			}
			got = append(got, l)
			if l == last {
				return got
			}
		case <-deadline:
			t.Fatalf("no %q within 30s; got:\n%s", last, strings.Join(got, "\n"))
		}
	}
}

func expectLines(t *testing.T, lines <-chan string, want ...string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for i, w := range want {
		select {
		case got, ok := <-lines:
			if !ok {
				t.Fatalf("output ended after %d lines, want %q next", i, w)
			}
			if got != w {
				t.Fatalf("line %d = %q, want %q", i, got, w)
			}
		case <-deadline:
			t.Fatalf("no line %d (want %q) within 20s", i, w)
		}
	}
}
