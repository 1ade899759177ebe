package loopback

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// addMembers adds c's members, one per kind of c.Kinds, each on free ports
// (url makes their client and peer URLs) or on its Host (cfg.Hosts) with its own data directory and
// the proxies cfg asks for, owned by e, and returns the --initial-cluster
// entries that name them, in member order.
func (c *Cluster) addMembers(e *Env, cfg ClusterConfig, url func(port int) string) ([]string, error) {
	peers := make([]string, len(c.Kinds))
	for i := range len(c.Kinds) {
		m := &Member{Name: "m" + strconv.Itoa(i+1), Kind: c.Kinds[i]}
		if len(cfg.Hosts) > 0 {
			m.Host = cfg.Hosts[i]
			m.ClientURL, m.PeerURL = m.Host.ClientURL(), m.Host.PeerURL()
		} else {
			var err error
			if m.ClientURL, m.PeerURL, err = freeURLs(url); err != nil {
				return nil, err
			}
		}
		dir, err := e.TempDir()
		if err != nil {
			return nil, err
		}
		m.DataDir = filepath.Join(dir, m.Name+".etcd")
		m.AdvertisePeerURL = m.PeerURL
		if cfg.PeerProxies {
			if m.PeerProxy, err = NewProxy(e, strings.TrimPrefix(m.PeerURL, "http://")); err != nil {
				return nil, err
			}
			m.AdvertisePeerURL = m.PeerProxy.URL()
		}
		if cfg.ClientProxies {
			if m.ClientProxy, err = NewProxy(e, strings.TrimPrefix(m.ClientURL, "http://")); err != nil {
				return nil, err
			}
		}
		c.Members = append(c.Members, m)
		peers[i] = m.Name + "=" + m.AdvertisePeerURL
	}
	return peers, nil
}

// clusterToken is the initial cluster token of a cluster of members:
// cfg.Token, or if that is "" one unique to the cluster (after its first
// member's peer port, or its Host's address), so that a member of another
// cluster that reaches these ports is refused, not joined; named after the
// Env for whoever reads the logs.
func clusterToken(e *Env, cfg ClusterConfig, members []*Member) string {
	if cfg.Token != "" {
		return cfg.Token
	}
	first := strings.TrimPrefix(members[0].PeerURL, "http://127.0.0.1:") // a port, or a Host's or https URL
	return pathSafe(e.Name() + "-" + first)
}

// memberBin is the binary member m runs, by its kind; an error if bins
// has none for that kind, since the member could not start.
func memberBin(bins *Bins, m *Member) (string, error) {
	bin := bins.Primary
	switch m.Kind {
	case KindEtcd:
		bin = bins.Etcd
	case KindEtcd36:
		if bins.Etcd36 == nil {
			return "", fmt.Errorf("loopback: member %s of kind %v: no etcd %s in Bins (Bins.Etcd36 is nil)", m.Name, m.Kind, Etcd36Version)
		}
		var err error
		if bin, err = bins.Etcd36(); err != nil {
			return "", fmt.Errorf("loopback: member %s of kind %v: %w", m.Name, m.Kind, err)
		}
	}
	if bin == "" {
		return "", fmt.Errorf("loopback: no binary for member %s of kind %v in Bins", m.Name, m.Kind)
	}
	return bin, nil
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
