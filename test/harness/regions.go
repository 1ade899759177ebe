package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// RegionsConfig says what StartRegions starts.
type RegionsConfig struct {
	// Voters is the number of voting members in region A (primaries); 0
	// means 3.
	Voters int
	// ReplicaName names the replica in region B; "" means "replica-b".
	ReplicaName string
	// Others names more replicas in region B, started like it, with
	// ReplicaArgs (Regions.Others).
	Others []string
	// ReplicaArgs are extra flags for the replica in region B.
	ReplicaArgs []string
	// ClientProxies has the voters advertise a Proxy in front of their
	// client URLs (ClusterConfig.ClientProxies), which SetRTT delays for
	// the connections region B's members open: a replica that dials the
	// client URLs of the member list (a standby's role loop does) crosses
	// the WAN too, while the harness and region A reach them directly.
	ClientProxies bool
	// NoLearner leaves out the stock etcd learner in region B.
	NoLearner bool
	// Hub adds a replica in region A (Regions.Hub, advertising a client
	// proxy that SetRTT delays for region B's members) and a second
	// replica in region B (Regions.ViaReplica) that obtains its strong
	// reads' read indexes from it (--read-index-via), with ViaArgs.
	Hub     bool
	ViaArgs []string
	// JoinOnly, a voter's name, has region B's replicas --join through
	// that voter's RemoteClientURL alone; "" means every voter's.
	JoinOnly string
}

// Regions is a cluster spread over two regions: its voters in region A;
// an understudy replica and a stock etcd learner in region B, with the
// clients the caller runs there. Every link between the regions passes a
// Proxy that SetRTT delays; links inside a region are direct (or pass a
// proxy that does not delay them).
//
//   - Raft links: every voter advertises a peer proxy (ClusterConfig.
//     PeerProxies) that delays the connections region B's members open;
//     each member of B advertises one that delays the connections the
//     voters open (Proxy.DelayFrom, by process). So raft traffic between A
//     and B is delayed both ways and traffic inside either region is not.
//   - Client links from B to A: RemoteClientURL, a proxy per voter that
//     delays everything; the replica's --join goes through them too. With
//     RegionsConfig.ClientProxies, the voters' advertised client URLs
//     delay the connections region B's members open as well.
type Regions struct {
	Cluster *Cluster
	Replica *Replica
	// Learner is the stock etcd learner (nil with NoLearner), LearnerURL
	// its client URL and LearnerPeerProxy the proxy it advertises.
	Learner          *Proc
	LearnerURL       string
	LearnerPeerProxy *Proxy
	// Hub is the replica in region A and ViaReplica the one in region B
	// that asks it for read indexes (RegionsConfig.Hub), or nil.
	Hub, ViaReplica *Replica
	// Others are RegionsConfig.Others' replicas, in order.
	Others []*Replica
	// remoteClient[i] is the proxy region B's clients dial to reach
	// voter i's client URL.
	remoteClient []*Proxy
}

// StartRegions starts voters in region A, then the replica and the stock
// learner in region B, with no delay yet (SetRTT sets one), and waits until
// both serve.
func StartRegions(t TB, cfg RegionsConfig) *Regions {
	t.Helper()
	n := cfg.Voters
	if n == 0 {
		n = 3
	}
	name := cfg.ReplicaName
	if name == "" {
		name = "replica-b"
	}
	g := &Regions{Cluster: StartCluster(t, ClusterConfig{N: n, PeerProxies: true, ClientProxies: cfg.ClientProxies})}
	var join []string
	for _, m := range g.Cluster.Members {
		p := NewProxy(t, strings.TrimPrefix(m.ClientURL, "http://"))
		g.remoteClient = append(g.remoteClient, p)
		if cfg.JoinOnly == "" || cfg.JoinOnly == m.Name {
			join = append(join, p.URL())
		}
	}
	if len(join) == 0 {
		t.Fatalf("harness: RegionsConfig.JoinOnly %q names no voter of %d (m1 to m%d)", cfg.JoinOnly, n, n)
	}
	// A later --join overrides the harness's own (the voters' direct
	// client URLs): the replica reaches A's client URLs across the WAN.
	args := append([]string{"--join", strings.Join(join, ",")}, cfg.ReplicaArgs...)
	g.Replica = StartReplica(t, g.Cluster, ReplicaConfig{Name: name, PeerProxy: true, Extra: args})
	if !cfg.NoLearner {
		g.LearnerURL, g.Learner, g.LearnerPeerProxy = StartStockLearner(t, g.Cluster, "learner-b", true)
	}
	for _, other := range cfg.Others {
		g.Others = append(g.Others, StartReplica(t, g.Cluster, ReplicaConfig{Name: other, PeerProxy: true, Extra: args}))
	}
	if cfg.Hub {
		g.Hub = StartReplica(t, g.Cluster, ReplicaConfig{Name: "hub-a", ClientProxy: true, Extra: cfg.ReplicaArgs})
		// A hub across the WAN answers in one RTT or more: the default
		// --read-index-via-timeout follows the replica's own round time.
		via := append([]string{"--join", strings.Join(join, ","), "--read-index-via", g.Hub.ClientProxy.URL()}, cfg.ReplicaArgs...)
		g.ViaReplica = StartReplica(t, g.Cluster, ReplicaConfig{Name: name + "-via", PeerProxy: true, Extra: append(via, cfg.ViaArgs...)})
	}
	g.SetRTT(0, 0)
	return g
}

// RemoteClientURL is the URL region B's clients dial to reach voter m
// across the WAN.
func (g *Regions) RemoteClientURL(m *Member) string {
	for i, mm := range g.Cluster.Members {
		if mm == m {
			return g.remoteClient[i].URL()
		}
	}
	panic(fmt.Sprintf("harness: %s is not a voter of these regions", m.Name))
}

// CutClientURL blackholes the client links to voter m that region B's
// members use: its RemoteClientURL and, with RegionsConfig.ClientProxies,
// its advertised client URL (for every client: the harness dials
// Member.ClientURL directly). Its raft links are left whole.
func (g *Regions) CutClientURL(m *Member) {
	for i, mm := range g.Cluster.Members {
		if mm == m {
			g.remoteClient[i].Blackhole()
			if m.ClientProxy != nil {
				m.ClientProxy.Blackhole()
			}
			return
		}
	}
	panic(fmt.Sprintf("harness: %s is not a voter of these regions", m.Name))
}

// bMembers are the processes of region B's members and the proxies they
// advertise.
func (g *Regions) bMembers() (pids []int, proxies []*Proxy) {
	pids, proxies = []int{g.Replica.PID()}, []*Proxy{g.Replica.PeerProxy}
	if g.Learner != nil {
		pids, proxies = append(pids, g.Learner.PID()), append(proxies, g.LearnerPeerProxy)
	}
	for _, r := range g.Others {
		pids, proxies = append(pids, r.PID()), append(proxies, r.PeerProxy)
	}
	if g.ViaReplica != nil {
		pids, proxies = append(pids, g.ViaReplica.PID()), append(proxies, g.ViaReplica.PeerProxy)
	}
	return pids, proxies
}

// SetRTT delays every link between the regions by rtt/2 each way, plus up
// to jitter more per chunk (in order), on open and new connections; 0 is
// one region (links still counted by WANTraffic).
func (g *Regions) SetRTT(rtt, jitter time.Duration) {
	oneWay := rtt / 2
	bPIDs, bProxies := g.bMembers()
	for _, m := range g.Cluster.Members {
		for _, pid := range bPIDs {
			m.PeerProxy.DelayFrom(pid, oneWay)
		}
		m.PeerProxy.Jitter(jitter)
	}
	for _, p := range bProxies {
		for _, m := range g.Cluster.Members {
			p.DelayFrom(m.Proc.PID(), oneWay)
		}
		p.Jitter(jitter)
	}
	for _, p := range g.remoteClient {
		p.Delay(oneWay)
		p.Jitter(jitter)
	}
	aClient := []*Proxy{}
	for _, m := range g.Cluster.Members {
		if m.ClientProxy != nil {
			aClient = append(aClient, m.ClientProxy)
		}
	}
	if g.Hub != nil {
		aClient = append(aClient, g.Hub.ClientProxy)
	}
	for _, p := range aClient {
		for _, pid := range bPIDs {
			p.DelayFrom(pid, oneWay)
		}
		p.Jitter(jitter)
	}
}

// WANTraffic is the bytes that crossed between the regions so far: raft
// traffic (between the voters and region B's members) and client traffic
// (from region B to the voters' client URLs, remote or advertised).
func (g *Regions) WANTraffic() (raft, client Traffic) {
	for _, m := range g.Cluster.Members {
		raft = raft.Add(m.PeerProxy.TrafficFrom())
	}
	_, bProxies := g.bMembers()
	for _, p := range bProxies {
		raft = raft.Add(p.TrafficFrom())
	}
	if g.Hub != nil {
		client = client.Add(g.Hub.ClientProxy.TrafficFrom())
	}
	for _, p := range g.remoteClient {
		client = client.Add(p.Traffic())
	}
	for _, m := range g.Cluster.Members {
		if m.ClientProxy != nil {
			client = client.Add(m.ClientProxy.TrafficFrom())
		}
	}
	return raft, client
}

// StartStockLearner joins a stock etcd learner named name to c the way
// etcd documents (member add --learner, then start it with
// --initial-cluster-state existing) and waits until it has caught up. With
// peerProxy it advertises a Proxy in front of its peer URL, returned. It
// returns the learner's client URL and process.
func StartStockLearner(t TB, c *Cluster, name string, peerProxy bool) (string, *Proc, *Proxy) {
	t.Helper()
	client, p, proxy := JoinStockLearner(t, c, name, peerProxy)
	WaitCaughtUp(t, c, client)
	return client, p, proxy
}

// JoinStockLearner is StartStockLearner without the wait: the learner has
// started and catches up (WaitCaughtUp).
func JoinStockLearner(t TB, c *Cluster, name string, peerProxy bool) (string, *Proc, *Proxy) {
	t.Helper()
	peer, client := URL(FreePort(t)), URL(FreePort(t))
	adv := peer
	var proxy *Proxy
	if peerProxy {
		proxy = NewProxy(t, strings.TrimPrefix(peer, "http://"))
		adv = proxy.URL()
	}
	resp := addLearner(t, c, adv)
	waitMembersApplied(t, c, resp)
	var ic []string
	for _, m := range resp.Members {
		mname := m.Name
		if m.ID == resp.Member.ID {
			mname = name
		}
		for _, u := range m.PeerURLs {
			ic = append(ic, mname+"="+u)
		}
	}
	p := Start(t, ProcConfig{Name: name, Bin: c.Bins.Etcd, Args: []string{
		"--name", name, "--data-dir", filepath.Join(t.TempDir(), name+".etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", adv,
		"--initial-cluster", strings.Join(ic, ","), "--initial-cluster-state", "existing",
		// Every member checks the learner limit on each addition it applies:
		// a learner with a lower limit than the voters' (the bench's rigs
		// raise theirs) would refuse a later learner they accepted, and its
		// member list would lose that one. Accept all the voters accept.
		"--max-learners", "65536", "--log-level", "warn",
	}})
	return client, p, proxy
}

// nudge asks the voters for an AuthStatus, an entry that changes nothing:
// a learner caught up by a snapshot in a quiet cluster publishes itself
// only once it applies an entry after it (learner/publish.go).
func nudge(cli *clientv3.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cli.AuthStatus(ctx) // its outcome shows in the caller's next check
}

// waitMembersApplied waits until every member of resp that serves
// clients has applied the member add resp answers: a new etcd member
// started with --initial-cluster-state existing reads the member list
// from whichever listed peer answers first, learners included, and exits
// ("member count is unequal") if that one has not applied the add yet.
func waitMembersApplied(t TB, c *Cluster, resp *clientv3.MemberAddResponse) {
	t.Helper()
	cli := c.Client(t)
	WaitFor(t, time.Minute, "every member applied the learner's addition", func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		// The leader's commit index covers the add (it answered once it
		// applied it); a follower's may not yet.
		lst, err := c.Status(c.Leader(t))
		if err != nil {
			return false, err
		}
		for _, m := range resp.Members {
			if m.ID == resp.Member.ID {
				continue
			}
			if len(m.ClientURLs) == 0 {
				// A learner not yet published (the quiet-join stall:
				// WaitCaughtUp) cannot be asked; wait for it.
				nudge(cli)
				return false, fmt.Errorf("member %x has not published itself yet", m.ID)
			}
			st, err := cli.Status(ctx, m.ClientURLs[0])
			if err != nil {
				return false, fmt.Errorf("member %s: %w", m.Name, err)
			}
			if st.RaftAppliedIndex < lst.RaftIndex {
				return false, fmt.Errorf("member %s applied %d of %d", m.Name, st.RaftAppliedIndex, lst.RaftIndex)
			}
		}
		return true, nil
	})
}

// addLearner adds a learner that advertises peer, retrying while the
// cluster refuses (a learner still catching up, a leader change).
func addLearner(t TB, c *Cluster, peer string) *clientv3.MemberAddResponse {
	t.Helper()
	var resp *clientv3.MemberAddResponse
	cli := c.Client(t)
	WaitFor(t, time.Minute, "stock learner added", func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		resp, err = cli.MemberAddAsLearner(ctx, []string{peer})
		return err == nil, err
	})
	return resp
}

// WaitCaughtUp waits until the member serving client has applied what
// the first voter had committed and knows a leader. A stock learner caught
// up by a snapshot in a quiet cluster never publishes itself (etcd
// publishes a member only once it has applied an entry after the
// snapshot, learner/publish.go): while it is behind, the voters are asked
// for an AuthStatus, an entry that changes nothing, as understudy's own
// replicas do.
func WaitCaughtUp(t TB, c *Cluster, client string) {
	t.Helper()
	lc, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("harness: client of learner %s: %v", client, err)
	}
	defer lc.Close()
	cli := c.Client(t)
	WaitFor(t, 2*time.Minute, "stock learner caught up", func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := lc.Status(ctx, client)
		if err != nil {
			nudge(cli)
			return false, err
		}
		lst, err := c.Status(c.Leader(t))
		if err != nil {
			return false, err
		}
		if st.RaftAppliedIndex < lst.RaftIndex || st.Leader == 0 {
			nudge(cli)
			return false, fmt.Errorf("applied %d of %d, leader %x", st.RaftAppliedIndex, lst.RaftIndex, st.Leader)
		}
		// Published: the member list has its client URL.
		ml, err := cli.MemberList(ctx)
		if err != nil {
			return false, err
		}
		for _, m := range ml.Members {
			if m.ID == st.Header.MemberId && len(m.ClientURLs) == 0 {
				nudge(cli)
				return false, fmt.Errorf("member %x answers but has not published itself", m.ID)
			}
		}
		return true, nil
	})
}
