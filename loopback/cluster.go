package loopback

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

const (
	// readyTimeout bounds StartCluster's wait for every member to answer
	// and agree on a leader.
	readyTimeout = 30 * time.Second
	// leaderTimeout bounds Leader's wait for an agreed leader, which covers
	// an election after the leader was killed.
	leaderTimeout = 30 * time.Second
	// rpcTimeout bounds one Status call while polling.
	rpcTimeout = 2 * time.Second
	// MaxLearners is passed to every member: etcd checks the learner
	// limit on each member, and tests attach several replicas; the bench's
	// scale scenario joins 8 stock learners (StartStockLearner) to one
	// cluster, and every one of them applies the others' joins.
	MaxLearners = 16
)

// Kind says which binary a cluster member runs.
type Kind int

const (
	// KindPrimary runs cmd/primary.
	KindPrimary Kind = iota
	// KindEtcd runs stock etcd.
	KindEtcd
	// KindEtcd36 runs stock etcd of the previous minor release
	// (Etcd36Version), built outside this module; see Bins.Etcd36.
	KindEtcd36
)

// String names the kind, as process names and errors show it.
func (k Kind) String() string {
	switch k {
	case KindPrimary:
		return "primary"
	case KindEtcd:
		return "etcd"
	case KindEtcd36:
		return "etcd-" + Etcd36Version
	default:
		return "Kind(" + strconv.Itoa(int(k)) + ")"
	}
}

// ClusterConfig says what cluster StartCluster starts.
type ClusterConfig struct {
	// Bins are the binaries the members run (required).
	Bins *Bins
	// N is the number of voting members; 0 means len(Kinds), or 3 if
	// Kinds is empty too.
	N int
	// Kinds gives each member's binary, in member order; members beyond
	// its end run KindPrimary.
	Kinds []Kind
	// ExtraArgs are appended to every member's arguments; since both
	// binaries take etcd's flags, a later flag overrides a default.
	ExtraArgs []string
	// Token is the initial cluster token; "" picks one unique to the
	// cluster.
	Token string
	// TLS, if set, serves clients and peers over https with client
	// certificates required.
	TLS *Certs
	// PeerProxies puts a Proxy in front of every member's peer URL and has
	// members advertise it, so that all raft traffic passes the proxies and
	// Proxy.BlackholeFrom can cut one process's raft links (plain http
	// only).
	PeerProxies bool
	// ClientProxies puts a Proxy in front of every member's client URL and
	// has members advertise it (member list shows the proxy), so that a
	// member's advertised client URL can be cut while the harness, which
	// dials ClientURL, still reaches it (plain http only).
	ClientProxies bool
	// Hosts, if set, puts member i on Hosts[i] (one per member), at its
	// address on etcd's default ports, instead of 127.0.0.1 (plain http,
	// no proxies).
	Hosts []Host
}

// Member is one voting member of a Cluster.
type Member struct {
	Name      string
	Kind      Kind
	ClientURL string
	PeerURL   string
	// AdvertisePeerURL is PeerURL, or the proxy in front of it
	// (ClusterConfig.PeerProxies).
	AdvertisePeerURL string
	// PeerProxy is the proxy in front of PeerURL, or nil.
	PeerProxy *Proxy
	// ClientProxy is the proxy in front of ClientURL that the member
	// advertises (ClusterConfig.ClientProxies), or nil.
	ClientProxy *Proxy
	// ID is the member id, learned once the cluster is ready.
	ID      uint64
	Proc    *Proc
	DataDir string
	// Host is where the member runs (ClusterConfig.Hosts); the zero Host
	// (no Addr) means 127.0.0.1, on ports picked at start.
	Host Host
}

// Cluster is a set of voting members started by StartCluster.
type Cluster struct {
	Members []*Member
	// Kinds is each member's kind, in member order.
	Kinds []Kind
	Bins  *Bins
	// TLS is the cluster's certificates; nil for plain http.
	TLS *Certs

	// status serves the cluster's own Status calls, each of which dials
	// the one endpoint it names.
	status *clientv3.Client
	// env owns the cluster's processes, proxies and clients.
	env *Env
}

// members is the number of members cfg asks for: N, else len(Kinds),
// else 3.
func (cfg ClusterConfig) members() int {
	switch {
	case cfg.N != 0:
		return cfg.N
	case len(cfg.Kinds) != 0:
		return len(cfg.Kinds)
	default:
		return 3
	}
}

// Validate reports every field of cfg that StartCluster could not start,
// naming it and what would be valid.
func (cfg ClusterConfig) Validate() error {
	n := cfg.members()
	var errs []error
	if cfg.Bins == nil {
		errs = append(errs, errors.New("loopback: ClusterConfig.Bins: nil; say which binaries the cluster runs"))
	}
	if n < 0 || len(cfg.Kinds) > n {
		errs = append(errs, fmt.Errorf("loopback: ClusterConfig: a cluster of N=%d with %d kinds; want N >= 0 and at most N kinds", cfg.N, len(cfg.Kinds)))
	}
	if (cfg.PeerProxies || cfg.ClientProxies) && cfg.TLS != nil {
		errs = append(errs, errors.New("loopback: ClusterConfig.PeerProxies and ClientProxies are for plain http clusters, and TLS is set"))
	}
	if len(cfg.Hosts) > 0 && len(cfg.Hosts) != n {
		errs = append(errs, fmt.Errorf("loopback: ClusterConfig.Hosts: %d hosts for %d members; want one per member", len(cfg.Hosts), n))
	}
	if len(cfg.Hosts) > 0 && (cfg.PeerProxies || cfg.ClientProxies || cfg.TLS != nil) {
		errs = append(errs, errors.New("loopback: ClusterConfig.Hosts is for plain http clusters without proxies"))
	}
	return errors.Join(errs...)
}

// StartCluster starts a new cluster of real etcd and/or primary processes on
// 127.0.0.1 (or on cfg.Hosts), owned by e, and waits until every member
// answers and all agree on a leader. On an error, what it started is
// still e's, stopped at e's Close.
func StartCluster(e *Env, cfg ClusterConfig) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cluster{Bins: cfg.Bins, Kinds: make([]Kind, cfg.members()), TLS: cfg.TLS, env: e}
	url := URL
	if cfg.TLS != nil {
		url = httpsURL
	}
	copy(c.Kinds, cfg.Kinds)

	peers, err := c.addMembers(e, cfg, url)
	if err != nil {
		return nil, err
	}
	token := clusterToken(e, cfg, c.Members)
	for _, m := range c.Members {
		bin, err := memberBin(c.Bins, m)
		if err != nil {
			return nil, err
		}
		if m.Proc, err = Start(e, ProcConfig{Name: m.Name + "-" + m.Kind.String(), Bin: bin, Args: append(m.args(peers, token, cfg.TLS), cfg.ExtraArgs...), Exec: m.Host.Exec}); err != nil {
			return nil, err
		}
	}
	if c.status, err = c.Client(); err != nil {
		return nil, err
	}
	if err := c.waitReady(); err != nil {
		return nil, err
	}
	return c, nil
}

// advertiseClientURL is the client URL the member advertises.
func (m *Member) advertiseClientURL() string {
	if m.ClientProxy != nil {
		return m.ClientProxy.URL()
	}
	return m.ClientURL
}

// waitReady waits until every member answers Status and all report the same
// leader, then records member ids. A member that exits ends the wait.
func (c *Cluster) waitReady() error {
	ids := make([]uint64, len(c.Members))
	err := WaitFor(readyTimeout, "cluster ready (every member answers Status and reports the same leader)", func() (bool, error) {
		var leader uint64
		var leaderFrom string
		for i, m := range c.Members {
			if m.Proc.Exited() {
				return false, stop{fmt.Errorf("loopback: member %s (%v) exited while the cluster was starting (%s)", m.Name, m.Kind, m.Proc.exitNote())}
			}
			st, err := c.Status(m)
			if err != nil {
				return false, err
			}
			if st.Leader == 0 {
				return false, fmt.Errorf("member %s (%s) has no leader yet", m.Name, m.ClientURL)
			}
			if leader != 0 && st.Leader != leader {
				return false, fmt.Errorf("member %s reports leader %x, member %s reports %x", m.Name, st.Leader, leaderFrom, leader)
			}
			leader, leaderFrom = st.Leader, m.Name
			ids[i] = st.Header.MemberId
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	for i, m := range c.Members {
		m.ID = ids[i]
	}
	return nil
}

// Endpoints returns every member's client URL, in member order.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.ClientURL
	}
	return eps
}

// Client returns a client for all members, closed at the Close of the Env
// that started the cluster.
func (c *Cluster) Client() (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   c.Endpoints(),
		DialTimeout: 5 * time.Second,
		// The client logs through zap from its own goroutines; a test
		// logger there could outlive the test.
		Logger: zap.NewNop(),
	}
	if c.TLS != nil {
		cfg.TLS = c.TLS.ClientConfig()
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("loopback: client for %v: %w", c.Endpoints(), err)
	}
	if err := c.env.own("client of "+strings.Join(c.Endpoints(), ","), func() error { return closeClient(cli) }); err != nil {
		return nil, err
	}
	return cli, nil
}

// closeClient closes cli; a client its user closed already is no error.
func closeClient(cli *clientv3.Client) error {
	if err := cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// Leader waits up to 30 s until the running members agree on a leader that
// is one of them, and returns it.
func (c *Cluster) Leader() (*Member, error) {
	return c.WaitLeader(leaderTimeout)
}

// WaitLeader is Leader with a given timeout.
func (c *Cluster) WaitLeader(timeout time.Duration) (*Member, error) {
	var leader *Member
	err := WaitFor(timeout, "a leader agreed on by every running member", func() (bool, error) {
		var err error
		leader, err = c.CurrentLeader()
		return err == nil, err
	})
	if err != nil {
		return nil, err
	}
	return leader, nil
}

// CurrentLeader asks every running member once and returns the leader they
// all report, or an error if they do not agree, have none, or report one
// that is not running. Use it inside WaitFor.
func (c *Cluster) CurrentLeader() (*Member, error) {
	var leader uint64
	var leaderFrom string
	for _, m := range c.Members {
		if m.Proc.Exited() {
			continue
		}
		st, err := c.Status(m)
		if err != nil {
			return nil, err
		}
		switch {
		case st.Leader == 0:
			return nil, fmt.Errorf("member %s has no leader", m.Name)
		case leader != 0 && st.Leader != leader:
			return nil, fmt.Errorf("member %s reports leader %x, member %s reports %x", m.Name, st.Leader, leaderFrom, leader)
		}
		leader, leaderFrom = st.Leader, m.Name
	}
	if leader == 0 {
		return nil, fmt.Errorf("no member is running")
	}
	for _, m := range c.Members {
		if m.ID == leader {
			if m.Proc.Exited() {
				return nil, fmt.Errorf("running members still report leader %s, which has exited", m.Name)
			}
			return m, nil
		}
	}
	return nil, fmt.Errorf("leader %x is not a member of this cluster", leader)
}

// Status asks member m, and only m, for its status.
func (c *Cluster) Status(m *Member) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	st, err := c.status.Status(ctx, m.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("member %s (%s) does not answer Status: %w", m.Name, m.ClientURL, err)
	}
	return st, nil
}

// Fill puts n keys through cli, 100 to a transaction from 8 writers; kv(i)
// names the i-th key and its value.
func Fill(cli *clientv3.Client, n int, kv func(i int) (key, value string)) error {
	const perTxn, writers = 100, 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := w * perTxn; start < n; start += writers * perTxn {
				var ops []clientv3.Op
				for i := start; i < min(start+perTxn, n); i++ {
					k, v := kv(i)
					ops = append(ops, clientv3.OpPut(k, v))
				}
				if _, err := cli.Txn(context.Background()).Then(ops...).Commit(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("loopback: fill: %w", err)
	}
	return nil
}
