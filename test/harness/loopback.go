package harness

import (
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/loopback"
)

// The harness is the test-side half of the local topology: package loopback
// (the product's, which `replica compare --local` runs) starts the
// processes, proxies and clusters, and returns an error when it cannot;
// the harness turns those errors into test failures (t.Fatal), builds the
// binaries from this module (Binaries) and adds what only tests and
// benchmarks use (etcdctl, metrics scraping, two regions). A test reads
// harness.StartCluster(t, cfg), c.Leader(t) and r.Restart(t): everything
// it starts belongs to a loopback.Env whose Close runs at t's cleanup.

// TB is what the harness asks of its caller: *testing.T and *testing.B
// have it, and so has a Runner, which lets the benchmark (test/bench) use
// the harness outside `go test`.
type TB interface {
	Cleanup(func())
	Errorf(format string, args ...any)
	Failed() bool
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Helper()
	Logf(format string, args ...any)
	Name() string
	TempDir() string
}

type (
	ProcConfig    = loopback.ProcConfig
	Proxy         = loopback.Proxy
	Traffic       = loopback.Traffic
	ClusterConfig = loopback.ClusterConfig
	Kind          = loopback.Kind
	ReplicaConfig = loopback.ReplicaConfig
	Certs         = loopback.Certs
	Host          = loopback.Host
)

// Member kinds (loopback.Kind), and the ports a Host's processes listen
// on.
const (
	HostClientPort = loopback.HostClientPort
	HostPeerPort   = loopback.HostPeerPort

	KindPrimary = loopback.KindPrimary
	KindEtcd    = loopback.KindEtcd
	KindEtcd36  = loopback.KindEtcd36
)

var (
	ListenReserved = loopback.ListenReserved
	URL            = loopback.URL
)

// Must fails t with err, if there is one.
func Must(t TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// NewEnv returns a loopback.Env owned by t: its directory is one of t's
// temporary directories, its Close runs at t's cleanup (an error there
// fails t), and if t failed by then the end of each of its processes' logs
// is logged through t.
func NewEnv(t TB) *loopback.Env {
	t.Helper()
	e, err := loopback.NewEnv(loopback.EnvConfig{Name: t.Name(), Dir: t.TempDir(), Log: logWriter{t}, ShowLogs: t.Failed})
	Must(t, err)
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("harness: %v", err)
		}
	})
	return e
}

// logWriter writes to t's log, a Write to a line.
type logWriter struct{ t TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// StartCluster is loopback.StartCluster in an Env of t's (NewEnv), with the
// binaries built from this module (Binaries) unless cfg names others.
func StartCluster(t TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	if cfg.Bins == nil {
		cfg.Bins = Binaries(t)
	}
	c, err := loopback.StartCluster(NewEnv(t), cfg)
	Must(t, err)
	return wrapCluster(c)
}

// StartReplica is loopback.StartReplica in an Env of t's.
func StartReplica(t TB, c *Cluster, cfg ReplicaConfig) *Replica {
	t.Helper()
	r, err := loopback.StartReplica(NewEnv(t), c.Cluster, cfg)
	Must(t, err)
	return wrapReplica(r)
}

// Start is loopback.Start in an Env of t's.
func Start(t TB, cfg ProcConfig) *Proc {
	t.Helper()
	p, err := loopback.Start(NewEnv(t), cfg)
	Must(t, err)
	return &Proc{p}
}

// NewProxy is loopback.NewProxy in an Env of t's: closed at t's cleanup.
func NewProxy(t TB, target string) *Proxy {
	t.Helper()
	p, err := loopback.NewProxy(NewEnv(t), target)
	Must(t, err)
	return p
}

// NewCerts is loopback.NewCerts in an Env of t's.
func NewCerts(t TB) *Certs {
	t.Helper()
	c, err := loopback.NewCerts(NewEnv(t))
	Must(t, err)
	return c
}

// NewCertsAddressOnly is loopback.NewCertsAddressOnly in an Env of t's.
func NewCertsAddressOnly(t TB) *Certs {
	t.Helper()
	c, err := loopback.NewCertsAddressOnly(NewEnv(t))
	Must(t, err)
	return c
}

// ClientCert is c.ClientCert(cn), failing t on an error.
func ClientCert(t TB, c *Certs, cn string) (cert, key string) {
	t.Helper()
	cert, key, err := c.ClientCert(cn)
	Must(t, err)
	return cert, key
}

// MemberCert is c.MemberCert(cn), failing t on an error.
func MemberCert(t TB, c *Certs, cn string) (cert, key string) {
	t.Helper()
	cert, key, err := c.MemberCert(cn)
	Must(t, err)
	return cert, key
}

// FreePort is loopback.FreePort, failing t on an error.
func FreePort(t TB) int {
	t.Helper()
	p, err := loopback.FreePort()
	Must(t, err)
	return p
}

// FreePortRun is loopback.FreePortRun, failing t on an error.
func FreePortRun(t TB, n int) int {
	t.Helper()
	p, err := loopback.FreePortRun(n)
	Must(t, err)
	return p
}

// WaitFor polls cond until it returns true or timeout passes; then it fails
// the test, naming what was awaited and the last error (loopback.WaitFor).
// Polling a condition with a deadline is how tests here wait: never a
// fixed sleep.
func WaitFor(t TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	Must(t, loopback.WaitFor(timeout, what, cond))
}

// Fill is loopback.Fill, failing t on an error.
func Fill(t TB, cli *clientv3.Client, n int, kv func(i int) (key, value string)) {
	t.Helper()
	Must(t, loopback.Fill(cli, n, kv))
}
