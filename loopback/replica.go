package loopback

import (
	"context"
	"path/filepath"
	"strings"
	"time"
)

// ReplicaConfig says how to start a replica against a cluster.
type ReplicaConfig struct {
	Name string
	// AdvertisePeerURL overrides the advertised peer URL (default: the
	// listen URL).
	AdvertisePeerURL string
	// Extra arguments come last, so they override the harness's own.
	Extra []string
	// NoWait returns at once instead of waiting until the replica serves.
	NoWait bool
	// PeerProxy advertises a Proxy in front of the replica's peer URL, so
	// that CutPeerLinks can cut the links the voters open to it.
	PeerProxy bool
	// PeerDelay, with PeerProxy and the cluster's PeerProxies, delays every
	// raft link between the replica and the voters by this much each way
	// from the start (DelayPeerLinks, set before the replica first talks).
	PeerDelay time.Duration
	// Env is added to the replica's environment.
	Env []string
	// Upstream, if set, starts a cascaded replica (--upstream) fed by
	// these client URLs instead of a learner that joins the cluster.
	Upstream []string
	// ClientProxy advertises a Proxy in front of the replica's client URL
	// (--advertise-client-urls): what other members' clients and
	// --read-index-via askers dial; the harness's own clients dial
	// ClientURL directly.
	ClientProxy bool
	// Host, if set, runs the replica there (Host), at its address on
	// etcd's default ports, instead of on 127.0.0.1 (no proxies).
	Host *Host
	// Bin is the replica binary to run; "" is the cluster's (Bins.Replica).
	Bin string
}

// Replica is a replica process.
type Replica struct {
	*Proc
	Name, ClientURL, PeerURL, DataDir string
	// PeerProxy is the proxy the replica advertises (ReplicaConfig.PeerProxy).
	PeerProxy *Proxy
	// ClientProxy is the proxy it advertises as its client URL
	// (ReplicaConfig.ClientProxy), or nil.
	ClientProxy *Proxy
}

// StartReplica starts a replica that joins c, and unless cfg.NoWait waits
// until it serves.
func StartReplica(t TB, c *Cluster, cfg ReplicaConfig) *Replica {
	t.Helper()
	c.Bins.RequireReplica(t)
	url := URL
	if c.TLS != nil {
		url = httpsURL
	}
	r := &Replica{Name: cfg.Name, DataDir: filepath.Join(t.TempDir(), cfg.Name+".replica")}
	var through []string // Host.Exec
	onHosts := c.Members[0].Host.Addr != ""
	switch {
	case (cfg.Host != nil) != onHosts:
		t.Fatalf("loopback: ReplicaConfig.Host set %v for a cluster on hosts %v: a replica runs where its voters do (both on hosts, or both on 127.0.0.1), or they cannot reach each other", cfg.Host != nil, onHosts)
	case cfg.Host != nil && (cfg.PeerProxy || cfg.ClientProxy || c.TLS != nil):
		t.Fatalf("loopback: ReplicaConfig.Host is for plain http with no proxies")
	case cfg.Host != nil:
		r.ClientURL, r.PeerURL, through = cfg.Host.ClientURL(), cfg.Host.PeerURL(), cfg.Host.Exec
	default:
		r.ClientURL, r.PeerURL = url(FreePort(t)), url(FreePort(t))
	}
	adv := r.PeerURL
	if cfg.AdvertisePeerURL != "" {
		adv = cfg.AdvertisePeerURL
	}
	if cfg.PeerProxy {
		r.PeerProxy = NewProxy(t, strings.TrimPrefix(r.PeerURL, "http://"))
		adv = r.PeerProxy.URL()
	}
	args := []string{
		"--name", cfg.Name, "--data-dir", r.DataDir,
		"--join", strings.Join(c.Endpoints(), ","),
		"--listen-peer-urls", r.PeerURL, "--initial-advertise-peer-urls", adv,
		"--listen-client-urls", r.ClientURL,
		"--join-timeout", "5m",
	}
	if len(cfg.Upstream) > 0 {
		args = []string{"--name", cfg.Name, "--data-dir", r.DataDir, "--upstream", strings.Join(cfg.Upstream, ","),
			"--listen-client-urls", r.ClientURL, "--join-timeout", "5m"}
	}
	if cfg.ClientProxy {
		r.ClientProxy = NewProxy(t, strings.TrimPrefix(r.ClientURL, "http://"))
		args = append(args, "--advertise-client-urls", r.ClientProxy.URL())
	}
	if c.TLS != nil {
		args = append(args, c.TLS.EtcdFlags()...) // the replica takes etcd's TLS flags
	}
	if cfg.PeerDelay > 0 {
		if r.PeerProxy == nil {
			t.Fatalf("loopback: ReplicaConfig.PeerDelay needs PeerProxy")
		}
		r.PeerProxy.Delay(cfg.PeerDelay)
	}
	bin := c.Bins.Replica
	if cfg.Bin != "" {
		bin = cfg.Bin
	}
	r.Proc = Start(t, ProcConfig{Name: cfg.Name, Bin: bin, Args: append(args, cfg.Extra...), Env: cfg.Env, Exec: through})
	if cfg.PeerDelay > 0 {
		// Before the replica's member starts: it first adds itself (a
		// round trip to the voters' client URLs at least).
		r.DelayPeerLinks(t, c, cfg.PeerDelay)
	}
	if !cfg.NoWait {
		r.WaitServing(t, 5*time.Minute)
	}
	return r
}

// WaitServing waits until the replica's front serves.
func (r *Replica) WaitServing(t TB, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := r.WaitLog(ctx, `"msg":"replica serving"`); err != nil {
		t.Fatalf("loopback: replica %s not serving: %v", r.Name, err)
	}
}

// CutPeerLinks cuts every raft link between r and c's voters, both ways,
// and leaves the voters' links to each other whole: the links r opens go
// through the voters' peer proxies (ClusterConfig.PeerProxies), which drop
// r's traffic; the ones the voters open reach r through its own proxy
// (ReplicaConfig.PeerProxy), blackholed. HealPeerLinks undoes it.
func (r *Replica) CutPeerLinks(t TB, c *Cluster) {
	t.Helper()
	if r.PeerProxy == nil {
		t.Fatalf("loopback: CutPeerLinks needs ReplicaConfig.PeerProxy")
	}
	for _, m := range c.Members {
		if m.PeerProxy == nil {
			t.Fatalf("loopback: CutPeerLinks needs ClusterConfig.PeerProxies")
		}
		m.PeerProxy.BlackholeFrom(r.PID())
	}
	r.PeerProxy.Blackhole()
}

// HealPeerLinks undoes CutPeerLinks.
func (r *Replica) HealPeerLinks(c *Cluster) {
	for _, m := range c.Members {
		m.PeerProxy.Heal()
	}
	r.PeerProxy.Heal()
}

// DelayPeerLinks delays every raft link between r and c's voters by d each
// way (the same proxies as CutPeerLinks); HealPeerLinks undoes it.
func (r *Replica) DelayPeerLinks(t TB, c *Cluster, d time.Duration) {
	t.Helper()
	if r.PeerProxy == nil {
		t.Fatalf("loopback: DelayPeerLinks needs ReplicaConfig.PeerProxy")
	}
	for _, m := range c.Members {
		if m.PeerProxy == nil {
			t.Fatalf("loopback: DelayPeerLinks needs ClusterConfig.PeerProxies")
		}
		m.PeerProxy.DelayFrom(r.PID(), d)
	}
	r.PeerProxy.Delay(d)
}
