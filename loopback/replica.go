package loopback

import (
	"context"
	"errors"
	"fmt"
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

// check reports every field of cfg that StartReplica could not start
// against c.
func (cfg ReplicaConfig) check(c *Cluster) error {
	var errs []error
	if cfg.Bin == "" {
		if err := c.Bins.RequireReplica(); err != nil {
			errs = append(errs, err)
		}
	}
	onHosts := c.Members[0].Host.Addr != ""
	if (cfg.Host != nil) != onHosts {
		errs = append(errs, fmt.Errorf("loopback: ReplicaConfig.Host set %v for a cluster on hosts %v: a replica runs where its voters do (both on hosts, or both on 127.0.0.1), or they cannot reach each other", cfg.Host != nil, onHosts))
	}
	if cfg.Host != nil && (cfg.PeerProxy || cfg.ClientProxy || c.TLS != nil) {
		errs = append(errs, errors.New("loopback: ReplicaConfig.Host is for plain http with no proxies"))
	}
	if cfg.PeerDelay > 0 && !cfg.PeerProxy {
		errs = append(errs, errors.New("loopback: ReplicaConfig.PeerDelay needs PeerProxy"))
	}
	return errors.Join(errs...)
}

// StartReplica starts a replica that joins c, owned by e, and unless
// cfg.NoWait waits until it serves. On an error, what it started is still
// e's, stopped at e's Close.
func StartReplica(e *Env, c *Cluster, cfg ReplicaConfig) (*Replica, error) {
	if err := cfg.check(c); err != nil {
		return nil, err
	}
	url := URL
	if c.TLS != nil {
		url = httpsURL
	}
	dir, err := e.TempDir()
	if err != nil {
		return nil, err
	}
	r := &Replica{Name: cfg.Name, DataDir: filepath.Join(dir, cfg.Name+".replica")}
	var through []string // Host.Exec
	if cfg.Host != nil {
		r.ClientURL, r.PeerURL, through = cfg.Host.ClientURL(), cfg.Host.PeerURL(), cfg.Host.Exec
	} else {
		if r.ClientURL, r.PeerURL, err = freeURLs(url); err != nil {
			return nil, err
		}
	}
	adv := r.PeerURL
	if cfg.AdvertisePeerURL != "" {
		adv = cfg.AdvertisePeerURL
	}
	if cfg.PeerProxy {
		if r.PeerProxy, err = NewProxy(e, strings.TrimPrefix(r.PeerURL, "http://")); err != nil {
			return nil, err
		}
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
		if r.ClientProxy, err = NewProxy(e, strings.TrimPrefix(r.ClientURL, "http://")); err != nil {
			return nil, err
		}
		args = append(args, "--advertise-client-urls", r.ClientProxy.URL())
	}
	if c.TLS != nil {
		args = append(args, c.TLS.EtcdFlags()...) // the replica takes etcd's TLS flags
	}
	if cfg.PeerDelay > 0 {
		r.PeerProxy.Delay(cfg.PeerDelay)
	}
	bin := c.Bins.Replica
	if cfg.Bin != "" {
		bin = cfg.Bin
	}
	if r.Proc, err = Start(e, ProcConfig{Name: cfg.Name, Bin: bin, Args: append(args, cfg.Extra...), Env: cfg.Env, Exec: through}); err != nil {
		return nil, err
	}
	if cfg.PeerDelay > 0 {
		// Before the replica's member starts: it first adds itself (a
		// round trip to the voters' client URLs at least).
		if err := r.DelayPeerLinks(c, cfg.PeerDelay); err != nil {
			return nil, err
		}
	}
	if !cfg.NoWait {
		if err := r.WaitServing(5 * time.Minute); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// WaitServing waits until the replica's front serves, or returns why not
// within timeout (it exited, say).
func (r *Replica) WaitServing(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := r.WaitLog(ctx, `"msg":"replica serving"`); err != nil {
		if r.Exited() {
			return fmt.Errorf("loopback: replica %s not serving: %w (%s)", r.Name, err, r.exitNote())
		}
		return fmt.Errorf("loopback: replica %s not serving: %w", r.Name, err)
	}
	return nil
}

// peerLinks checks that r and c's voters have the proxies that cut or
// delay their raft links (op names the caller).
func (r *Replica) peerLinks(op string, c *Cluster) error {
	var errs []error
	if r.PeerProxy == nil {
		errs = append(errs, fmt.Errorf("loopback: %s needs ReplicaConfig.PeerProxy", op))
	}
	for _, m := range c.Members {
		if m.PeerProxy == nil {
			errs = append(errs, fmt.Errorf("loopback: %s needs ClusterConfig.PeerProxies", op))
			break
		}
	}
	return errors.Join(errs...)
}

// CutPeerLinks cuts every raft link between r and c's voters, both ways,
// and leaves the voters' links to each other whole: the links r opens go
// through the voters' peer proxies (ClusterConfig.PeerProxies), which drop
// r's traffic; the ones the voters open reach r through its own proxy
// (ReplicaConfig.PeerProxy), blackholed. HealPeerLinks undoes it. Without
// those proxies it cuts nothing and returns an error.
func (r *Replica) CutPeerLinks(c *Cluster) error {
	if err := r.peerLinks("CutPeerLinks", c); err != nil {
		return err
	}
	for _, m := range c.Members {
		m.PeerProxy.BlackholeFrom(r.PID())
	}
	r.PeerProxy.Blackhole()
	return nil
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
func (r *Replica) DelayPeerLinks(c *Cluster, d time.Duration) error {
	if err := r.peerLinks("DelayPeerLinks", c); err != nil {
		return err
	}
	for _, m := range c.Members {
		m.PeerProxy.DelayFrom(r.PID(), d)
	}
	r.PeerProxy.Delay(d)
	return nil
}
