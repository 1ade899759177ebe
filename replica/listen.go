package replica

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// listen opens a listener on each of urls, which flag names.
func listen(flag string, urls []string) ([]net.Listener, error) {
	var ls []net.Listener
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("replica: --%s %q: %w", flag, s, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			closeAll(ls)
			return nil, fmt.Errorf("replica: --%s %q: want http or https", flag, s)
		}
		l, err := net.Listen("tcp", u.Host)
		if err != nil {
			closeAll(ls)
			return nil, fmt.Errorf("replica: --%s %q: %w", flag, s, err)
		}
		ls = append(ls, l)
	}
	return ls, nil
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		_ = l.Close()
	}
}

// joinsItself refuses --join URLs that lead to this replica's own client
// listeners: it would wait on itself until --join-timeout.
func joinsItself(cfg learnerConfig) error {
	own := append(slices.Clone(cfg.ListenClientURLs), cfg.AdvertiseClientURLs...)
	for _, j := range cfg.Join {
		ju, err := url.Parse(j)
		if err != nil {
			return fmt.Errorf("replica: --join %q: %w", j, err)
		}
		for _, o := range own {
			if ou, err := url.Parse(o); err == nil && sameListener(ju, ou) {
				return fmt.Errorf("replica: --join %s is this replica's own client URL %s; give the client URLs of the cluster's voters", j, o)
			}
		}
	}
	return nil
}

// sameListener reports whether a client dialing j reaches the listener of
// own: same port, and the same host, or hosts that are the same address
// (literal IPs, localhost), or own listens on every address and j is one of
// this host's.
func sameListener(j, own *url.URL) bool {
	if j.Port() != own.Port() || j.Port() == "" {
		return false
	}
	jh, oh := j.Hostname(), own.Hostname()
	if strings.EqualFold(jh, oh) {
		return true
	}
	jips, oips := hostIPs(jh), hostIPs(oh)
	for _, o := range oips {
		if o.IsUnspecified() {
			return slices.ContainsFunc(jips, isLocalIP)
		}
		if slices.ContainsFunc(jips, o.Equal) {
			return true
		}
	}
	return false
}

// hostIPs are the addresses h names without a DNS lookup: a literal IP,
// or localhost's loopback addresses; nil for other names.
func hostIPs(h string) []net.IP {
	if strings.EqualFold(h, "localhost") {
		return []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	if ip := net.ParseIP(h); ip != nil {
		return []net.IP{ip}
	}
	return nil
}

func isLocalIP(ip net.IP) bool {
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	return slices.ContainsFunc(addrs, func(a net.Addr) bool {
		n, ok := a.(*net.IPNet)
		return ok && n.IP.Equal(ip)
	})
}
