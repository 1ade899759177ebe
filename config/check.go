package config

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
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

// checkPlainHTTP refuses https:// in a listener that serves plain HTTP
// only (the metrics listeners): serving it unencrypted would be a lie.
func checkPlainHTTP(flagName string, urls []string) []error {
	var problems []error
	for _, s := range urls {
		if strings.HasPrefix(strings.ToLower(s), "https://") {
			problems = append(problems, fmt.Errorf("--%s %s: this listener serves plain HTTP only; give http:// (put it behind a TLS proxy, or on a private address)", flagName, s))
		}
	}
	return problems
}

// checkCompaction checks etcd's --auto-compaction-mode and
// --auto-compaction-retention as etcd parses them: periodic takes hours
// (an integer) or a duration, revision an integer.
func checkCompaction(mode, retention string) error {
	switch mode {
	case "periodic":
		if h, err := strconv.Atoi(retention); err == nil && h >= 0 {
			return nil
		}
		if d, err := time.ParseDuration(retention); err != nil || d < 0 {
			return fmt.Errorf("--auto-compaction-retention %q: want hours (an integer) or a duration such as 30m for --auto-compaction-mode periodic", retention)
		}
	case "revision":
		if n, err := strconv.ParseInt(retention, 10, 64); err != nil || n < 0 {
			return fmt.Errorf("--auto-compaction-retention %q: want a number of revisions for --auto-compaction-mode revision", retention)
		}
	default:
		return fmt.Errorf("--auto-compaction-mode %q: want periodic or revision", mode)
	}
	return nil
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
