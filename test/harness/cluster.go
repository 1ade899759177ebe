package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Kind is what runs a voting member.
type Kind int

const (
	// KindPrimary is understudy's primary.
	KindPrimary Kind = iota
	// KindEtcd is stock etcd v3.7, built from this module's graph.
	KindEtcd
)

func (k Kind) String() string {
	if k == KindEtcd {
		return "etcd"
	}
	return "primary"
}

// ClusterConfig describes a cluster of voters.
type ClusterConfig struct {
	// N is the number of members (default 3).
	N int
	// Kinds gives each member's kind; default all primary.
	Kinds []Kind
	// ExtraArgs go to every member, after the harness's own (a later flag
	// wins, so they can override).
	ExtraArgs []string
	// Token is the initial cluster token (default: the test's name).
	Token string
}

// Member is one voting member.
type Member struct {
	Name               string
	ClientURL, PeerURL string
	DataDir            string
	Proc               *Proc
}

// Cluster is a running cluster of voters.
type Cluster struct {
	Members []*Member
	Kinds   []Kind
	t       testing.TB
}

// StartCluster starts the voters with etcd's own flags and waits until every
// member answers and all agree on a leader.
func StartCluster(t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	bins := Binaries(t)
	if cfg.N == 0 {
		cfg.N = 3
	}
	if cfg.Token == "" {
		cfg.Token = strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	}
	c := &Cluster{t: t}
	var ic []string
	for i := range cfg.N {
		m := &Member{
			Name:      fmt.Sprintf("m%d", i+1),
			ClientURL: URL(FreePort(t)),
			PeerURL:   URL(FreePort(t)),
		}
		m.DataDir = filepath.Join(t.TempDir(), m.Name+".etcd")
		c.Members = append(c.Members, m)
		kind := KindPrimary
		if i < len(cfg.Kinds) {
			kind = cfg.Kinds[i]
		}
		c.Kinds = append(c.Kinds, kind)
		ic = append(ic, m.Name+"="+m.PeerURL)
	}
	for i, m := range c.Members {
		bin := bins.Primary
		if c.Kinds[i] == KindEtcd {
			bin = bins.Etcd
		}
		args := []string{
			"--name", m.Name, "--data-dir", m.DataDir,
			"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.PeerURL, "--initial-advertise-peer-urls", m.PeerURL,
			"--initial-cluster", strings.Join(ic, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", cfg.Token,
			"--max-learners", "4", "--log-level", "warn",
		}
		m.Proc = Start(t, ProcConfig{Name: m.Name + "-" + c.Kinds[i].String(), Bin: bin, Args: append(args, cfg.ExtraArgs...)})
	}
	c.WaitLeader(t, 60*time.Second)
	return c
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// Client returns a client of every member, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("harness: client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// WaitLeader waits until every running member answers Status and all report
// the same leader, and returns that leader.
func (c *Cluster) WaitLeader(t testing.TB, timeout time.Duration) *Member {
	t.Helper()
	cli := c.Client(t)
	var leader *Member
	WaitFor(t, timeout, "cluster agrees on a leader", func() (bool, error) {
		var lead uint64
		for _, m := range c.Members {
			if m.Proc.Exited() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := cli.Status(ctx, m.ClientURL)
			cancel()
			if err != nil {
				return false, fmt.Errorf("%s: %w", m.Name, err)
			}
			if st.Leader == 0 || (lead != 0 && st.Leader != lead) {
				return false, fmt.Errorf("%s sees leader %x, others %x", m.Name, st.Leader, lead)
			}
			lead = st.Leader
			if st.Header.MemberId == st.Leader {
				leader = m
			}
		}
		return leader != nil, fmt.Errorf("the leader %x is not among the running members", lead)
	})
	return leader
}

// Leader returns the current leader.
func (c *Cluster) Leader(t testing.TB) *Member { return c.WaitLeader(t, 30*time.Second) }
