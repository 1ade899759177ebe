package loopback

import (
	"path/filepath"
	"strconv"
	"strings"
)

// addMembers adds c's members, one per kind of c.Kinds, each on free ports
// (url makes their client and peer URLs) or on its Host (cfg.Hosts) with its own data directory and
// the proxies cfg asks for, and returns the --initial-cluster entries that
// name them, in member order.
func (c *Cluster) addMembers(t TB, cfg ClusterConfig, url func(port int) string) []string {
	t.Helper()
	peers := make([]string, len(c.Kinds))
	for i := range len(c.Kinds) {
		m := &Member{Name: "m" + strconv.Itoa(i+1), Kind: c.Kinds[i]}
		if len(cfg.Hosts) > 0 {
			m.Host = cfg.Hosts[i]
			m.ClientURL, m.PeerURL = m.Host.ClientURL(), m.Host.PeerURL()
		} else {
			m.ClientURL, m.PeerURL = url(FreePort(t)), url(FreePort(t))
		}
		m.DataDir = filepath.Join(t.TempDir(), m.Name+".etcd")
		m.AdvertisePeerURL = m.PeerURL
		if cfg.PeerProxies {
			m.PeerProxy = NewProxy(t, strings.TrimPrefix(m.PeerURL, "http://"))
			m.AdvertisePeerURL = m.PeerProxy.URL()
		}
		if cfg.ClientProxies {
			m.ClientProxy = NewProxy(t, strings.TrimPrefix(m.ClientURL, "http://"))
		}
		c.Members = append(c.Members, m)
		peers[i] = m.Name + "=" + m.AdvertisePeerURL
	}
	return peers
}

// clusterToken is the initial cluster token of a cluster of members:
// cfg.Token, or if that is "" one unique to the cluster (after its first
// member's peer port, or its Host's address), so that a member of another
// cluster that reaches these ports is refused, not joined; named after the
// test for whoever reads the logs.
func clusterToken(t TB, cfg ClusterConfig, members []*Member) string {
	if cfg.Token != "" {
		return cfg.Token
	}
	first := strings.TrimPrefix(members[0].PeerURL, "http://127.0.0.1:") // a port, or a Host's or https URL
	return strings.NewReplacer("/", "-", " ", "-", ":", "-").Replace(t.Name() + "-" + first)
}

// memberBin is the binary member m runs, by its kind; it fails the test
// if bins has none for that kind, since the member could not start.
func memberBin(t TB, bins *Bins, m *Member) string {
	t.Helper()
	bin := bins.Primary
	switch m.Kind {
	case KindEtcd:
		bin = bins.Etcd
	case KindEtcd36:
		if bins.Etcd36 == nil {
			t.Fatalf("loopback: member %s of kind %v: no etcd %s in Bins", m.Name, m.Kind, Etcd36Version)
		}
		bin = bins.Etcd36(t)
	}
	if bin == "" {
		t.Fatalf("loopback: no binary for member %s of kind %v", m.Name, m.Kind)
	}
	return bin
}

// args are member m's flags for a new cluster whose --initial-cluster is
// peers and whose token is token, with tls's flags if the cluster serves
// https; both binaries take them, since both take etcd's flags.
func (m *Member) args(peers []string, token string, tls *Certs) []string {
	args := []string{
		"--name", m.Name,
		"--data-dir", m.DataDir,
		"--listen-client-urls", m.ClientURL,
		"--advertise-client-urls", m.advertiseClientURL(),
		"--listen-peer-urls", m.PeerURL,
		"--initial-advertise-peer-urls", m.AdvertisePeerURL,
		"--initial-cluster", strings.Join(peers, ","),
		"--initial-cluster-state", "new",
		"--initial-cluster-token", token,
		"--max-learners", strconv.Itoa(MaxLearners),
		"--log-level", "warn",
	}
	if tls != nil {
		args = append(args, tls.EtcdFlags()...)
	}
	return args
}
