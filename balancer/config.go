package balancer

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/wire"
)

// Policy chooses which healthy replica serves a read.
type Policy string

const (
	// RoundRobin takes the replicas in turn.
	RoundRobin Policy = "round-robin"
	// LeastOutstanding takes the replica with the fewest requests in flight.
	LeastOutstanding Policy = "least-outstanding"
	// LatencyWeighted takes, of two replicas drawn at random, the one with
	// the lower recent latency times requests in flight.
	LatencyWeighted Policy = "latency-weighted"
	// ZoneAffinity keeps reads on replicas whose zone (their --zone) is
	// Config.Zone while any is healthy, least outstanding first; then on
	// any replica.
	ZoneAffinity Policy = "zone-affinity"
	// VotersOnly sends reads to the voters, in turn: replicas get nothing.
	VotersOnly Policy = "voters-only"
)

var policies = []Policy{RoundRobin, LeastOutstanding, LatencyWeighted, ZoneAffinity, VotersOnly}

// Config configures a Balancer.
type Config struct {
	// Endpoints are seeds: client URLs of any voters or replicas. The rest
	// of the cluster is discovered from them.
	Endpoints []string
	// Client is the template for the client: TLS, credentials, timeouts,
	// keep-alives and dial options are taken from it. Its Endpoints are
	// ignored.
	Client clientv3.Config
	// Policy chooses among healthy replicas; default RoundRobin.
	Policy Policy
	// Zone is this client's zone, for ZoneAffinity.
	Zone string
	// Announced is where cascaded replicas announce themselves in the
	// cluster (their --resolver-prefix, without the trailing "/"): they are
	// in no member list, and are discovered there beside the learner
	// replicas; default wire.ReplicasTarget. IgnoreAnnounced discovers
	// learner replicas only. Reading it needs read permission on that
	// prefix where auth is on.
	Announced       string
	IgnoreAnnounced bool
	// MaxStaleness is the staleness beyond which a replica is ejected (its
	// health probe is a read bounded by it); default 5s.
	MaxStaleness time.Duration
	// RefreshInterval is how often members and the leader are looked up;
	// default 500ms. It bounds how long writes keep going to a deposed
	// leader (which still forwards them).
	RefreshInterval time.Duration
	// ProbeInterval is how often replicas are probed; default 1s.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe; default 1s.
	ProbeTimeout time.Duration
	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// Registerer receives the metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Clock times the loop (refreshes, probes), the latencies and the
	// staleness the replicas report as it ages, and the budgets reads
	// used; nil is the real clock. Request timeouts are contexts, on the
	// real clock.
	Clock clockwork.Clock
}

func (c *Config) setDefaults() {
	if c.Policy == "" {
		c.Policy = RoundRobin
	}
	if c.MaxStaleness == 0 {
		c.MaxStaleness = 5 * time.Second
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = 500 * time.Millisecond
	}
	if c.ProbeInterval == 0 {
		c.ProbeInterval = time.Second
	}
	if c.Announced == "" {
		c.Announced = wire.ReplicasTarget
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = time.Second
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
}

// Validate reports every bad field at once, each with the value given and
// what would be valid. Zero durations and an empty Policy mean defaults.
func (c Config) Validate() error {
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf("balancer: "+format, a...)) }
	if len(c.Endpoints) == 0 {
		add("Endpoints is empty: give at least one client URL of a voter or replica, such as http://127.0.0.1:2379")
	}
	for _, ep := range c.Endpoints {
		if u, err := url.Parse(ep); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("Endpoints %q: want a client URL such as http://127.0.0.1:2379 (scheme http or https)", ep)
		}
	}
	if c.Policy != "" && !validPolicy(c.Policy) {
		add("Policy %q: want one of %s", c.Policy, policyList())
	}
	if c.Policy == ZoneAffinity && c.Zone == "" {
		add("Zone is empty: policy %s needs this client's zone", ZoneAffinity)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"MaxStaleness", c.MaxStaleness}, {"RefreshInterval", c.RefreshInterval}, {"ProbeInterval", c.ProbeInterval}, {"ProbeTimeout", c.ProbeTimeout}} {
		if d.v < 0 {
			add("%s %v: must be more than 0 (or 0 for the default)", d.name, d.v)
		}
	}
	return errors.Join(problems...)
}

func validPolicy(p Policy) bool {
	for _, q := range policies {
		if p == q {
			return true
		}
	}
	return false
}

func policyList() string {
	s := make([]string, len(policies))
	for i, p := range policies {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// ParsePolicy parses a policy name, as flags give it.
func ParsePolicy(s string) (Policy, error) {
	if p := Policy(s); validPolicy(p) {
		return p, nil
	}
	return "", fmt.Errorf("balancer: policy %q: want one of %s", s, policyList())
}
