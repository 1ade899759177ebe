package config

import (
	"fmt"
	"net/url"
	"strings"
)

// checkInitialCluster checks an etcd-style "name=peerURL,…" list: it parses,
// it names this member, and this member's entries are its advertised peer
// URLs (etcd refuses to start otherwise, with a less direct message).
func checkInitialCluster(ic, name string, advertised []url.URL) []error {
	var problems []error
	mine := map[string]bool{}
	for _, entry := range strings.Split(ic, ",") {
		n, u, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok || n == "" {
			problems = append(problems, fmt.Errorf("--initial-cluster %q: entry %q must be name=peer-url", ic, entry))
			continue
		}
		if err := checkURL(u); err != nil {
			problems = append(problems, fmt.Errorf("--initial-cluster %q: member %q: %v", ic, n, err))
			continue
		}
		if n == name {
			mine[u] = true
		}
	}
	if len(problems) > 0 {
		return problems
	}
	if len(mine) == 0 {
		return []error{fmt.Errorf("--initial-cluster %q: has no member named %q (--name); add %s=<its --initial-advertise-peer-urls> or fix --name", ic, name, name)}
	}
	for _, u := range advertised {
		if !mine[u.String()] {
			return []error{fmt.Errorf("--initial-advertise-peer-urls %q: not listed for %q in --initial-cluster %q", u.String(), name, ic)}
		}
	}
	return nil
}

// checkURL accepts what etcd accepts for a member URL: http or https with a
// host and a port.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return fmt.Errorf("%q: not a URL; must be scheme://host:port, such as http://127.0.0.1:2379", s)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: scheme must be http or https", s)
	}
	if u.Hostname() == "" || u.Port() == "" {
		return fmt.Errorf("%q: must be scheme://host:port", s)
	}
	return nil
}

func checkURLs(flagName string, urls []string) []error {
	var problems []error
	for _, s := range urls {
		if err := checkURL(s); err != nil {
			problems = append(problems, fmt.Errorf("--%s: %v", flagName, err))
		}
	}
	return problems
}

var logLevels = []string{"debug", "info", "warn", "error", "panic", "fatal"}

func checkLogLevel(level string) error {
	for _, l := range logLevels {
		if level == l {
			return nil
		}
	}
	return fmt.Errorf("--log-level %q: must be one of %s", level, strings.Join(logLevels, ", "))
}
