package readindex

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// ViaConfig configures rounds through other replicas.
type ViaConfig struct {
	// URLs are the hubs' client URLs, tried in order. Each must be a
	// client URL that a member of the cluster advertises (etcdctl member
	// list); others are refused.
	URLs []string
	// Timeout bounds one request to a hub, and then the wait until its
	// index is applied here; past either, the replica does its own round.
	Timeout time.Duration
	// InFlight is the most requests to hubs in flight at once
	// (--read-index-via-in-flight, see batchPolicy); 0 means 1.
	InFlight int
	// Client makes the requests (TLS as the replica's towards its
	// cluster: a hub's certificate must verify against the cluster's CA);
	// nil means http.DefaultClient.
	Client *http.Client
	// Token, if set, logs the replica in (--user) for its requests to
	// hubs of an auth-enabled cluster; it is sent in the Authorization
	// header, as etcd's JSON gateway takes it. Without it, a hub with auth
	// on admits the replica by its client certificate only.
	Token func(ctx context.Context) (string, error)
}

// viaLocal is what the asking replica knows by its own raft.
type viaLocal struct {
	// cluster is the cluster ID, as idHex writes it.
	cluster string
	// members is the cluster's member list.
	members func() []Peer
	// term and committed are the replica's raft term and commit index.
	term, committed func() uint64
	// applyWait is closed once index is applied here.
	applyWait func(index uint64) <-chan struct{}
	// roundTook is how long the replica's own rounds take lately (its
	// round trip to the leader); nil means unknown.
	roundTook func() time.Duration
	// contact reports that the replica's raft heard from the leader
	// lately; nil means always.
	contact func() bool
}

// Reasons a hub's read index is not used (the rejections metric's label).
const (
	reasonNotMember    = "not_member"
	reasonWrongMember  = "wrong_member"
	reasonWrongCluster = "wrong_cluster"
	reasonWrongNonce   = "wrong_nonce"
	reasonStaleTerm    = "stale_term"
	reasonIndexBehind  = "index_behind"
	reasonCatchUp      = "catch_up"
	reasonSlow         = "slow"
	reasonUnreachable  = "unreachable"
	reasonRefused      = "refused"
	reasonUnauthorized = "unauthorized"
	reasonNoToken      = "no_token"
	reasonMalformed    = "malformed"
	reasonTLS          = "tls_unverified"
	reasonNoContact    = "no_leader_contact"
)

// rejection is why a hub's read index was not used.
type rejection struct {
	reason string
	err    error
}

func (r *rejection) Error() string { return r.reason + ": " + r.err.Error() }
func (r *rejection) Unwrap() error { return r.err }

func reject(reason string, format string, args ...any) *rejection {
	return &rejection{reason: reason, err: fmt.Errorf(format, args...)}
}

// viaRounds is a round function that obtains its read index from a hub
// and falls back to the replica's own rounds.
type viaRounds struct {
	lg    *zap.Logger
	cfg   ViaConfig
	clock clockwork.Clock
	local viaLocal
	own   func(context.Context) error
	m     *viaMetrics

	mu struct {
		sync.Mutex
		health *hubHealth
		// token is the login token, if haveToken ("" with auth off).
		token     string
		haveToken bool
	}
}

func newViaRounds(lg *zap.Logger, cfg ViaConfig, clock clockwork.Clock, local viaLocal, own func(context.Context) error, reg prometheus.Registerer) *viaRounds {
	if cfg.Client == nil {
		cfg.Client = http.DefaultClient
	}
	v := &viaRounds{lg: lg, cfg: cfg, clock: clock, local: local, own: own}
	v.mu.health = newHubHealth()
	v.m = newViaMetrics(reg, func() float64 {
		v.mu.Lock()
		defer v.mu.Unlock()
		return float64(v.mu.health.avoided(v.clock.Now()))
	})
	return v
}

// round obtains a read index through a hub and waits until it is applied
// here; if no hub's index can be used, it does the replica's own round and
// reports own.
func (v *viaRounds) round(ctx context.Context) (own bool, err error) {
	if v.local.contact != nil && !v.local.contact() {
		// Cut off from the leader, the replica could not tell a stale
		// hub from a fresh one; its own round fails or proves.
		v.m.rejections.WithLabelValues(reasonNoContact).Inc()
	} else {
		for _, hub := range v.cfg.URLs {
			if !v.usable(hub) {
				continue
			}
			err := v.viaHub(ctx, hub)
			if err == nil {
				v.m.rounds.WithLabelValues("via").Inc()
				return false, nil
			}
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			v.drop(hub, err)
		}
	}
	v.m.rounds.WithLabelValues("own").Inc()
	return true, v.own(ctx)
}

// viaRTTFactor is how many of the replica's own round times (its round
// trip to the leader) the timeout allows a hub at least.
const viaRTTFactor = 4

// timeout is --read-index-via-timeout, or viaRTTFactor times the replica's
// recent own round time if that is longer: a hub across a WAN answers in
// one round trip at best, and one that must wait behind its own round in
// flight in two, so a timeout made for one region would find it slow
// forever and keep every askers' reads on their own rounds.
func (v *viaRounds) timeout() time.Duration {
	if v.local.roundTook == nil {
		return v.cfg.Timeout
	}
	return max(v.cfg.Timeout, viaRTTFactor*v.local.roundTook())
}

// useHub reports whether the next round would ask a hub.
func (v *viaRounds) useHub() bool {
	if v.local.contact != nil && !v.local.contact() {
		return false
	}
	for _, hub := range v.cfg.URLs {
		if v.usable(hub) {
			return true
		}
	}
	return false
}

func (v *viaRounds) usable(hub string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.mu.health.usable(hub, v.clock.Now())
}

// drop keeps away from hub for a back-off after err.
func (v *viaRounds) drop(hub string, err error) {
	reason := reasonUnreachable
	var r *rejection
	if errors.As(err, &r) {
		reason = r.reason
	}
	v.mu.Lock()
	backoff := v.mu.health.failed(hub, v.clock.Now())
	if reason == reasonUnauthorized {
		v.mu.token, v.mu.haveToken = "", false // log in again next time
	}
	v.mu.Unlock()
	v.m.rejections.WithLabelValues(reason).Inc()
	v.lg.Warn("--read-index-via hub's read index not used; own rounds through the leader for a while",
		zap.String("hub", hub), zap.String("reason", reason), zap.Duration("for", backoff), zap.Error(err))
}

// viaHub obtains hub's read index, checks it and waits until it is applied
// here, within the timeout.
func (v *viaRounds) viaHub(ctx context.Context, hub string) error {
	member, ok := memberAt(v.local.members(), hub)
	if !ok {
		return reject(reasonNotMember, "no member of cluster %s advertises %s as its client URL", v.local.cluster, hub)
	}
	token, err := v.token(ctx)
	if err != nil {
		return reject(reasonNoToken, "logging in for the hub (--user): %w", err)
	}
	// What the replica knew before it asked: the hub's round started
	// later, so its answer may not be older.
	term, committed := v.local.term(), v.local.committed()
	nonce := newNonce()
	sent := v.clock.Now()
	a, err := v.ask(ctx, hub, token, nonce)
	if err != nil {
		return err
	}
	latency := v.clock.Since(sent)
	if err := checkAnswer(a, v.local.cluster, member.ID, nonce, term, committed); err != nil {
		return err
	}
	if err := v.catchUp(ctx, a.Index); err != nil {
		return err
	}
	v.mu.Lock()
	timeout := v.timeout()
	backoff := v.mu.health.answered(hub, v.clock.Now(), latency, timeout)
	v.mu.Unlock()
	if backoff > 0 {
		v.m.rejections.WithLabelValues(reasonSlow).Inc()
		v.lg.Warn("--read-index-via hub answers slowly; own rounds through the leader for a while",
			zap.String("hub", hub), zap.String("reason", reasonSlow), zap.Duration("latency", latency), zap.Int("in-a-row", slowStrikes),
			zap.Duration("slow-above", timeout/2), zap.Duration("for", backoff))
	}
	return nil
}

// checkAnswer refuses an answer that is not from member of cluster, not to
// the request that sent nonce, or older than what the replica knew when it
// asked (term, committed).
func checkAnswer(a Answer, cluster string, member uint64, nonce string, term, committed uint64) error {
	switch {
	case a.Cluster != cluster:
		return reject(reasonWrongCluster, "hub is in cluster %q, this replica in %s", a.Cluster, cluster)
	case a.Member != idHex(member):
		return reject(reasonWrongMember, "hub answers as member %q, but the member at its URL is %s", a.Member, idHex(member))
	case a.Nonce != nonce:
		// An answer to another request (replayed, or kept by a cache on
		// the way) proves no round that started after this one.
		return reject(reasonWrongNonce, "hub's answer carries nonce %q, the request sent %q (an answer to another request?)", a.Nonce, nonce)
	case a.Term < term:
		return reject(reasonStaleTerm, "hub answers in term %d, this replica is in term %d", a.Term, term)
	case a.Index == 0 || a.Index < committed:
		return reject(reasonIndexBehind, "hub answers index %d, below this replica's commit index %d when it asked", a.Index, committed)
	}
	return nil
}

// catchUp waits until index is applied here, within the timeout.
func (v *viaRounds) catchUp(ctx context.Context, index uint64) error {
	timeout := v.timeout()
	t := v.clock.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-v.local.applyWait(index):
		return nil
	case <-t.Chan():
		return reject(reasonCatchUp, "hub's index %d not applied here within %v (commit index %d)", index, timeout, v.local.committed())
	case <-ctx.Done():
		return ctx.Err()
	}
}

// token is the cached login token, or a new one; "" without credentials
// or with auth off.
func (v *viaRounds) token(ctx context.Context) (string, error) {
	if v.cfg.Token == nil {
		return "", nil
	}
	v.mu.Lock()
	t, ok := v.mu.token, v.mu.haveToken
	v.mu.Unlock()
	if ok {
		return t, nil
	}
	// A login is bounded as a hub's answer is: with --join unreachable it
	// must not eat the read's deadline, which the read's own round needs.
	lctx, cancel := context.WithTimeout(ctx, v.timeout())
	defer cancel()
	t, err := v.cfg.Token(lctx)
	if err != nil {
		return "", err
	}
	v.mu.Lock()
	v.mu.token, v.mu.haveToken = t, true
	v.mu.Unlock()
	return t, nil
}

// newNonce is a request's NonceParam: 128 random bits, in hex.
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// ask requests hub's read index, within the timeout.
func (v *viaRounds) ask(ctx context.Context, hub, token, nonce string) (Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, v.timeout())
	defer cancel()
	u := strings.TrimSuffix(hub, "/") + Path + "?" + url.Values{NonceParam: {nonce}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Answer{}, reject(reasonMalformed, "%w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	resp, err := v.cfg.Client.Do(req)
	if err != nil {
		return Answer{}, reject(reasonUnreachable, "%w", err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(hub, "https://") && (resp.TLS == nil || len(resp.TLS.VerifiedChains) == 0) {
		return Answer{}, reject(reasonTLS, "hub's certificate was not verified (the client skips verification?)")
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return Answer{}, reject(reasonUnreachable, "%w", err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return Answer{}, reject(reasonUnauthorized, "%s: %s (give the replica --user, or a client certificate of a user)", resp.Status, body)
	case resp.StatusCode != http.StatusOK:
		return Answer{}, reject(reasonRefused, "%s: %s", resp.Status, body)
	}
	var a Answer
	if err := json.Unmarshal(body, &a); err != nil {
		return Answer{}, reject(reasonMalformed, "answer %q: %w", body, err)
	}
	return a, nil
}
