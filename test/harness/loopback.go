package harness

import (
	"github.com/understudy-kv/understudy/loopback"
)

// The harness is the test-side half of the local topology: package loopback
// (the product's, which `replica compare --local` runs) starts the
// processes, proxies and clusters; the harness builds the binaries from
// this module (Binaries) and adds what only tests and benchmarks use
// (etcdctl, metrics scraping, two regions). Its names for loopback's are
// below, so that a test reads harness.StartCluster as before.

type (
	TB            = loopback.TB
	Runner        = loopback.Runner
	Proc          = loopback.Proc
	ProcConfig    = loopback.ProcConfig
	Proxy         = loopback.Proxy
	Traffic       = loopback.Traffic
	Cluster       = loopback.Cluster
	ClusterConfig = loopback.ClusterConfig
	Member        = loopback.Member
	Kind          = loopback.Kind
	Replica       = loopback.Replica
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
	Start               = loopback.Start
	StartReplica        = loopback.StartReplica
	NewProxy            = loopback.NewProxy
	NewRunner           = loopback.NewRunner
	NewCerts            = loopback.NewCerts
	NewCertsAddressOnly = loopback.NewCertsAddressOnly
	Fill                = loopback.Fill
	FreePort            = loopback.FreePort
	FreePortRun         = loopback.FreePortRun
	ListenReserved      = loopback.ListenReserved
	URL                 = loopback.URL
	WaitFor             = loopback.WaitFor
)

// StartCluster is loopback.StartCluster with the binaries built from this
// module (Binaries) unless cfg names others.
func StartCluster(t TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	if cfg.Bins == nil {
		cfg.Bins = Binaries(t)
	}
	return loopback.StartCluster(t, cfg)
}
