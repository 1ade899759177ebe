package harness

import (
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/loopback"
)

// The types a test holds: loopback's, embedded, with the methods that can
// fail taking t and failing it instead of returning an error.

// Proc is a loopback.Proc whose restarts fail t.
type Proc struct{ *loopback.Proc }

// Restart is loopback.Proc.Restart, failing t on an error.
func (p *Proc) Restart(t TB) {
	t.Helper()
	Must(t, p.Proc.Restart())
}

// RestartWithArgs is loopback.Proc.RestartWithArgs, failing t on an error.
func (p *Proc) RestartWithArgs(t TB, args []string) {
	t.Helper()
	Must(t, p.Proc.RestartWithArgs(args))
}

// RestartWithBin is loopback.Proc.RestartWithBin, failing t on an error.
func (p *Proc) RestartWithBin(t TB, bin string) {
	t.Helper()
	Must(t, p.Proc.RestartWithBin(bin))
}

// Member is a loopback.Member whose Proc is the harness's.
type Member struct {
	*loopback.Member
	// Proc is the member's process (loopback.Member.Proc).
	Proc *Proc
}

// Cluster is a loopback.Cluster whose Members are the harness's and whose
// Client, Leader and WaitLeader fail t.
type Cluster struct {
	*loopback.Cluster
	// Members are the cluster's members, in member order.
	Members []*Member
}

func wrapCluster(c *loopback.Cluster) *Cluster {
	hc := &Cluster{Cluster: c}
	for _, m := range c.Members {
		hc.Members = append(hc.Members, &Member{Member: m, Proc: &Proc{m.Proc}})
	}
	return hc
}

// member is the harness's Member for m, one of c's.
func (c *Cluster) member(m *loopback.Member) *Member {
	for _, hm := range c.Members {
		if hm.Member == m {
			return hm
		}
	}
	panic(fmt.Sprintf("harness: member %s is not one of the cluster's", m.Name))
}

// Client is loopback.Cluster.Client, failing t on an error: a client for
// all members, closed with the cluster.
func (c *Cluster) Client(t TB) *clientv3.Client {
	t.Helper()
	cli, err := c.Cluster.Client()
	Must(t, err)
	return cli
}

// Leader waits up to 30 s until the running members agree on a leader that
// is one of them, and returns it; it fails t if they do not.
func (c *Cluster) Leader(t TB) *Member {
	t.Helper()
	m, err := c.Cluster.Leader()
	Must(t, err)
	return c.member(m)
}

// WaitLeader is Leader with a given timeout.
func (c *Cluster) WaitLeader(t TB, timeout time.Duration) *Member {
	t.Helper()
	m, err := c.Cluster.WaitLeader(timeout)
	Must(t, err)
	return c.member(m)
}

// CurrentLeader is loopback.Cluster.CurrentLeader: the leader every running
// member reports, asked once, or why there is none. Use it inside WaitFor.
func (c *Cluster) CurrentLeader() (*Member, error) {
	m, err := c.Cluster.CurrentLeader()
	if err != nil {
		return nil, err
	}
	return c.member(m), nil
}

// Status asks member m, and only m, for its status.
func (c *Cluster) Status(m *Member) (*clientv3.StatusResponse, error) {
	return c.Cluster.Status(m.Member)
}

// Replica is a loopback.Replica whose Proc is the harness's and whose
// waits, cuts and restarts fail t.
type Replica struct {
	*loopback.Replica
	// Proc is the replica's process (loopback.Replica.Proc).
	Proc *Proc
}

func wrapReplica(r *loopback.Replica) *Replica {
	return &Replica{Replica: r, Proc: &Proc{r.Proc}}
}

// Restart is Proc.Restart.
func (r *Replica) Restart(t TB) {
	t.Helper()
	r.Proc.Restart(t)
}

// RestartWithArgs is Proc.RestartWithArgs.
func (r *Replica) RestartWithArgs(t TB, args []string) {
	t.Helper()
	r.Proc.RestartWithArgs(t, args)
}

// RestartWithBin is Proc.RestartWithBin.
func (r *Replica) RestartWithBin(t TB, bin string) {
	t.Helper()
	r.Proc.RestartWithBin(t, bin)
}

// WaitServing is loopback.Replica.WaitServing, failing t on an error.
func (r *Replica) WaitServing(t TB, timeout time.Duration) {
	t.Helper()
	Must(t, r.Replica.WaitServing(timeout))
}

// CutPeerLinks is loopback.Replica.CutPeerLinks, failing t on an error.
func (r *Replica) CutPeerLinks(t TB, c *Cluster) {
	t.Helper()
	Must(t, r.Replica.CutPeerLinks(c.Cluster))
}

// HealPeerLinks undoes CutPeerLinks and DelayPeerLinks.
func (r *Replica) HealPeerLinks(c *Cluster) { r.Replica.HealPeerLinks(c.Cluster) }

// DelayPeerLinks is loopback.Replica.DelayPeerLinks, failing t on an error.
func (r *Replica) DelayPeerLinks(t TB, c *Cluster, d time.Duration) {
	t.Helper()
	Must(t, r.Replica.DelayPeerLinks(c.Cluster, d))
}
