package config

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// Replica configures a replica: the front every replica has (Front), and
// exactly one kind. A learner replica (Learner) is an embedded etcd member
// that joins its cluster as a learner; a cascaded replica (Cascaded,
// --upstream) copies the source cluster from upstreams' watches and is no
// member (package cascade). LoadReplica picks the kind from the flags.
type Replica struct {
	Front
	// Learner is a learner replica's settings; nil for a cascaded replica.
	Learner *Learner
	// Cascaded is a cascaded replica's settings; nil for a learner
	// replica.
	Cascaded *Cascaded
	// refused are the learner replica's settings given beside --upstream
	// (LoadReplica), which Validate reports.
	refused []error
}

// DefaultReplica is a learner replica on 127.0.0.1:2479 (clients) and :2480
// (peers), beside a default etcd or primary on 2379/2380. It joins no
// cluster: --join (or --upstream, for a cascaded replica) names the one to
// join.
func DefaultReplica() Replica {
	l := DefaultLearner()
	return Replica{Front: DefaultFront(), Learner: &l}
}

// Validate reports every problem at once, each naming its flag: the
// front's, the kind's, and those between them.
func (c Replica) Validate() error {
	problems := slices.Clone(c.refused)
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	switch {
	case c.Learner != nil && c.Cascaded != nil:
		add("config: a replica is a learner replica (Learner, --join) or a cascaded replica (Cascaded, --upstream), not both")
	case c.Learner == nil && c.Cascaded == nil:
		add("config: a replica is a learner replica (Learner, --join) or a cascaded replica (Cascaded, --upstream): set one")
	}
	problems = append(problems, c.Front.Validate())
	if c.Learner != nil {
		problems = append(problems, c.Learner.Validate())
	}
	if c.Cascaded != nil {
		problems = append(problems, c.Cascaded.Validate())
		// A cascaded replica shares no member's rounds, and copies
		// another replica, not itself.
		if len(c.ReadIndex.ViaURLs) > 0 {
			add("--read-index-via with --upstream: a cascaded replica's strong reads already go through its upstream")
		}
		for _, u := range c.Cascaded.Upstream {
			if slices.Contains(c.AdvertiseClientURLs, u) || slices.Contains(c.ListenClientURLs, u) {
				add("--upstream %s: is this replica's own client URL; name a replica or member of the source cluster", u)
			}
		}
	}
	return errors.Join(problems...)
}

// TLS is one side's certificates, as etcd names them.
type TLS struct {
	CertFile, KeyFile, TrustedCAFile string
	// ClientCertAuth requires clients to present a certificate signed by
	// TrustedCAFile.
	ClientCertAuth bool
}

// Enabled reports whether any certificate is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" || t.TrustedCAFile != "" }

// checkTLS checks one side's certificates against its URLs: https needs a
// certificate and key; a front serves one scheme.
func checkTLS(prefix, urlFlags string, t TLS, urls []string) []error {
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	https, http := 0, 0
	for _, u := range urls {
		if strings.HasPrefix(u, "https://") {
			https++
		} else {
			http++
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		add("--%scert-file %q and --%skey-file %q: give both or neither", prefix, t.CertFile, prefix, t.KeyFile)
	}
	if https > 0 && t.CertFile == "" {
		add("--%scert-file: %s are https, which needs a certificate and key (--%scert-file, --%skey-file)", prefix, urlFlags, prefix, prefix)
	}
	if https > 0 && http > 0 {
		add("%s: mix http and https; use one scheme", urlFlags)
	}
	if t.ClientCertAuth && t.TrustedCAFile == "" {
		add("--%sclient-cert-auth: needs --%strusted-ca-file", prefix, prefix)
	}
	return problems
}

// checkAdvertised refuses an unspecified address (0.0.0.0, [::]) among the
// URLs the replica publishes (advertise, from the flag of that name, or
// taken from the listen flag's when derived): it listens on every
// interface and reaches nobody, yet it would land in the member list (peer
// URLs) or be what clients and cycle checks are told (client URLs). As
// etcd, which requires --advertise-client-urls once --listen-client-urls
// is given, an unspecified listen address needs its advertise flag.
func checkAdvertised(listen, advertise string, urls []string, derived bool) []error {
	i := slices.IndexFunc(urls, unspecifiedHost)
	switch {
	case i < 0:
		return nil
	case derived:
		return []error{fmt.Errorf("--%s %s: an unspecified address listens on every interface but is no address to publish: give --%s, the URLs others reach this replica at (as etcd requires --advertise-client-urls with --listen-client-urls)",
			listen, urls[i], advertise)}
	default:
		return []error{fmt.Errorf("--%s %s: an unspecified address is no address others can reach; give this host's address or DNS name",
			advertise, urls[i])}
	}
}

// given is urls if they were given, and none if they are another flag's
// (which reports their problems).
func given(urls []string, ok bool) []string {
	if !ok {
		return nil
	}
	return urls
}

// unspecifiedHost reports a URL whose host is 0.0.0.0 or :: (checkURL
// reports one that does not parse).
func unspecifiedHost(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(u.Hostname())
	return err == nil && a.IsUnspecified()
}
