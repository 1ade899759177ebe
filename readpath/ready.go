package readpath

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/understudy-kv/understudy/readindex"
)

// Readiness checks of a replica, beside etcd's own readyz checks.
const (
	// checkCaughtUp: the replica has applied its log within MaxLag entries
	// of the commit index the leader told it.
	checkCaughtUp = "caught_up"
	// checkLeaderContact: the replica heard from its leader, by raft's own
	// traffic, within one election timeout.
	checkLeaderContact = "leader_contact"
	// checkFreshness: the replica's freshness (see readindex.Freshness) is within
	// MaxStaleness. It runs after etcd's checks, whose linearizable_read
	// round proves freshness as of the probe's start; failing that, a stale
	// replica (a quiet one: no client requests, so rounds far apart) does
	// a round for the probe.
	checkFreshness = "freshness"
	// etcdNonLearner is etcd's readyz check that fails every learner.
	etcdNonLearner = "non_learner"
	// etcdLinearizableRead is etcd's readyz check that does a ReadIndex
	// round (EtcdServer.LinearizableReadNotify).
	etcdLinearizableRead = "linearizable_read"
)

// ReadyConfig says when a replica is ready to serve.
type ReadyConfig struct {
	// MaxLag is the most entries between the commit index the replica knows
	// and its applied index.
	MaxLag uint64
	// MaxStaleness is the most a ready replica's freshness age may be.
	MaxStaleness time.Duration
}

// readiness is a replica's /readyz: its own checks (caught up, leader
// contact, freshness) and etcd's readyz checks but non_learner, listed
// together the way etcd lists its checks ("[+]name ok", "[-]name failed:
// reason"; exclude= and verbose work as in etcd). /readyz/<check> serves one
// check, etcd's included; /readyz/non_learner answers truthfully that a
// replica is a learner.
type readiness struct {
	cfg      ReadyConfig
	clock    clockwork.Clock
	election time.Duration
	applied  func() (applied, committed uint64)
	contact  *readindex.LeaderContact
	fresh    *readindex.Freshness
	// extra are the source's own checks (Services.Ready); proves:
	// etcd's linearizable_read check proves the store fresh
	// (Services.ProvesFreshness: not a private store's).
	extra  map[string]func() error
	proves bool
}

func (r *readiness) checks() map[string]func(context.Context) error {
	checks := r.ownChecks()
	for name, check := range r.extra {
		checks[name] = func(context.Context) error { return check() }
	}
	return checks
}

func (r *readiness) ownChecks() map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		checkCaughtUp: func(context.Context) error {
			applied, committed := r.applied()
			if committed > applied && committed-applied > r.cfg.MaxLag {
				return fmt.Errorf("applied index %d is %d entries behind commit index %d (at most %d)", applied, committed-applied, committed, r.cfg.MaxLag)
			}
			return nil
		},
		checkLeaderContact: func(context.Context) error {
			if r.contact.HeardWithin(r.election) {
				return nil
			}
			leader, at := r.contact.Last()
			if leader == 0 {
				return fmt.Errorf("no leader known")
			}
			return fmt.Errorf("leader %x last heard from %v ago (at most one election timeout, %v)", leader, r.clock.Since(at).Round(time.Millisecond), r.election)
		},
		checkFreshness: func(ctx context.Context) error {
			if r.fresh.Age() > r.cfg.MaxStaleness {
				// Rounds far apart (a quiet replica: no client asks it
				// anything, see --freshness-quiet-interval), or just
				// failing: prove freshness for the probe now, within an
				// election timeout (a probe's patience is short).
				wctx, cancel := context.WithTimeout(ctx, r.election)
				_ = r.fresh.WaitFresh(wctx, r.clock.Now().Add(-r.cfg.MaxStaleness))
				cancel()
			}
			if age := r.fresh.Age(); age > r.cfg.MaxStaleness {
				if r.fresh.AsOf().IsZero() {
					return fmt.Errorf("freshness never confirmed by a ReadIndex round")
				}
				return fmt.Errorf("fresh as of %v ago (at most %v)", age.Round(time.Millisecond), r.cfg.MaxStaleness)
			}
			return nil
		},
	}
}

// gauge is understudy_replica_ready: 1 while caught_up and leader_contact
// pass and the freshness loop keeps its own schedule (the last round within
// MaxStaleness plus the loop's period, plus how much older than its start
// the last round's proof was: an aged proof, see readindex.Proof), else 0. It does no round: a scrape
// must not wake a quiet replica (whose rounds are --freshness-quiet-interval
// apart) nor cost the leader a round, and a replica whose rounds fail or
// stop falls behind its schedule within a period. So an unready replica
// can be alerted on wherever it is scraped, not only where a kubelet
// probes /readyz.
func (r *readiness) gauge() prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "understudy", Subsystem: "replica", Name: "ready",
		Help: "1 while the replica is caught up, hears from its source and its freshness rounds keep their schedule (the last within --ready-max-staleness plus the current round period, plus the age of the proof it was answered with), else 0. A scrape does no round. docs/metrics.md says what each kind of replica checks."},
		func() float64 {
			checks := r.checks()
			for name, check := range checks {
				if name != checkFreshness && check(context.Background()) != nil {
					return 0
				}
			}
			if r.fresh.AsOf().IsZero() || r.fresh.Age() > r.cfg.MaxStaleness+r.fresh.Period()+r.fresh.ProofLag() {
				return 0
			}
			return 1
		})
}

// handler serves /readyz and /readyz/<check>; etcd serves etcd's checks.
func (r *readiness) handler(etcd http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		own := r.checks()
		name := strings.TrimPrefix(strings.TrimPrefix(req.URL.Path, "/readyz"), "/")
		if name != "" {
			check, ok := own[name]
			if !ok { // one of etcd's
				etcd.ServeHTTP(w, req)
				return
			}
			writeChecks(w, req, []string{runCheck(req.Context(), name, check)})
			return
		}
		excluded := map[string]bool{}
		for _, v := range req.URL.Query()["exclude"] {
			for _, n := range strings.Split(v, ",") {
				excluded[strings.TrimSpace(n)] = true
			}
		}
		var lines []string
		failed := false
		for name, check := range own {
			if !excluded[name] && name != checkFreshness {
				l := runCheck(req.Context(), name, check)
				failed = failed || strings.HasPrefix(l, "[-]")
				lines = append(lines, l)
			}
		}
		// etcd's linearizable_read waits up to the request timeout for a
		// leader that may be gone; when the replica's own checks already
		// failed, answer within an election timeout (a probe's patience
		// is short) and let that check say it timed out.
		ctx := req.Context()
		if failed {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, r.election)
			defer cancel()
		}
		start := r.clock.Now()
		etcdLines := r.etcdChecks(etcd, req.WithContext(ctx), excluded)
		if r.proves && slices.Contains(etcdLines, "[+]"+etcdLinearizableRead+" ok") {
			// etcd's check is a ReadIndex round through the member's
			// LinearizableReadNotify, as the replica's own rounds are,
			// started after start: the store is fresh as of start, and
			// the freshness check needs no round of its own.
			r.fresh.Proved(start)
		}
		lines = append(lines, etcdLines...)
		if !excluded[checkFreshness] {
			lines = append(lines, runCheck(req.Context(), checkFreshness, own[checkFreshness]))
		}
		slices.SortFunc(lines, func(a, b string) int { return strings.Compare(a[3:], b[3:]) })
		writeChecks(w, req, lines)
	})
}

// etcdChecks runs etcd's own /readyz, but non_learner, and returns its
// check lines.
func (r *readiness) etcdChecks(etcd http.Handler, req *http.Request, excluded map[string]bool) []string {
	q := url.Values{"verbose": {""}, "exclude": {etcdNonLearner}}
	for name := range excluded {
		if _, ours := r.checks()[name]; !ours && name != "" {
			q.Add("exclude", name)
		}
	}
	inner := req.Clone(req.Context())
	inner.URL = &url.URL{Path: "/readyz", RawQuery: q.Encode()}
	rec := httptest.NewRecorder()
	etcd.ServeHTTP(rec, inner)
	var lines []string
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "[+]") || strings.HasPrefix(l, "[-]") {
			lines = append(lines, l)
		}
	}
	return lines
}

func runCheck(ctx context.Context, name string, check func(context.Context) error) string {
	if err := check(ctx); err != nil {
		return fmt.Sprintf("[-]%s failed: %v", name, err)
	}
	return fmt.Sprintf("[+]%s ok", name)
}

// writeChecks answers as etcd's health handlers do: 503 with every line when
// a check failed; else 200, "ok", and the lines first when verbose.
func writeChecks(w http.ResponseWriter, req *http.Request, lines []string) {
	body := strings.Join(lines, "\n") + "\n"
	for _, l := range lines {
		if strings.HasPrefix(l, "[-]") {
			http.Error(w, body, http.StatusServiceUnavailable)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if _, verbose := req.URL.Query()["verbose"]; verbose {
		fmt.Fprint(w, body)
	}
	fmt.Fprint(w, "ok\n")
}
