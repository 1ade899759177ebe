package harness

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func etcdctlArgs(endpoints []string, args []string) []string {
	return append([]string{"--endpoints", strings.Join(endpoints, ","), "--dial-timeout", "5s", "--command-timeout", "10s"}, args...)
}

func etcdctlEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "ETCDCTL_") {
			env = append(env, e)
		}
	}
	return env
}

// Etcdctl runs the real etcdctl against endpoints and returns its stdout;
// err carries stderr.
func Etcdctl(t testing.TB, bins *Bins, endpoints []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.Etcdctl, etcdctlArgs(endpoints, args)...)
	cmd.Env = etcdctlEnv()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &EtcdctlError{Args: args, Err: err, Stderr: stderr.String()}
	}
	return stdout.String(), nil
}

// EtcdctlError is a failed etcdctl run.
type EtcdctlError struct {
	Args   []string
	Err    error
	Stderr string
}

func (e *EtcdctlError) Error() string {
	return "etcdctl " + strings.Join(e.Args, " ") + ": " + e.Err.Error() + "\n" + e.Stderr
}

// MustEtcdctl is Etcdctl that fails the test on error.
func MustEtcdctl(t testing.TB, bins *Bins, endpoints []string, args ...string) string {
	t.Helper()
	out, err := Etcdctl(t, bins, endpoints, args...)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	return out
}

// EtcdctlCmd prepares a long-running etcdctl (watch, lease keep-alive) for
// the test to start and read.
func EtcdctlCmd(t testing.TB, bins *Bins, endpoints []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bins.Etcdctl, etcdctlArgs(endpoints, args)...)
	cmd.Env = etcdctlEnv()
	return cmd
}
