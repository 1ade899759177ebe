package readpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Rounds shared across replicas. Every ReadIndex round costs the leader the
// same (DESIGN.md), and N replicas each running their own cost it N times.
// A replica started with --read-index-via asks another replica of the same
// cluster (the "hub") for a read index instead of asking the leader: the hub
// answers after a round of its own that started after the request arrived
// (so it covers every write acknowledged before the asking replica's reads
// arrived), with its applied index, which is at least that round's read
// index; the asking replica waits until it has applied as much, then its
// reads are linearizable exactly as after a round of its own. The hub's
// rounds batch the requests of every replica that asks it, so the leader
// pays for the hub's rounds only. When the hub does not answer within
// ViaTimeout, the replica does its own round and keeps away from the hub
// for viaBackoff.

// PathReadIndex is where a replica serves read indexes to other replicas.
const PathReadIndex = "/understudy/v1/readindex"

// readIndexAnswer is PathReadIndex's answer.
type readIndexAnswer struct {
	// Cluster is the hub's cluster ID, in hex: an index from another
	// cluster's log means nothing here.
	Cluster string `json:"cluster"`
	// Index is applied at the hub after a round that started after the
	// request arrived.
	Index uint64 `json:"index,string"`
}

// readIndexHandler serves PathReadIndex: a round through fresh that starts
// after the request, then the applied index.
func readIndexHandler(fresh *Freshness, cluster func() string, applied func() uint64, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "method not allowed: "+PathReadIndex+" takes GET", http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		if err := fresh.WaitRound(ctx); err != nil {
			http.Error(w, "read index: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(readIndexAnswer{Cluster: cluster(), Index: applied()})
	})
}

// viaBackoff is how long a replica does its own rounds after its hub
// failed to answer one.
const viaBackoff = time.Second

// ViaConfig configures rounds through other replicas.
type ViaConfig struct {
	// URLs are the hubs' client URLs, tried in order.
	URLs []string
	// Timeout bounds one request to a hub; then the replica does its own
	// round.
	Timeout time.Duration
	// Client makes the requests (TLS as the replica's towards its
	// cluster); nil means http.DefaultClient.
	Client *http.Client
}

// viaRounds is a round function that obtains its read index from a hub
// and falls back to the replica's own rounds.
type viaRounds struct {
	lg        *zap.Logger
	cfg       ViaConfig
	clock     clockwork.Clock
	cluster   string
	own       func(context.Context) error
	applyWait func(index uint64) <-chan struct{}
	rounds    *prometheus.CounterVec

	mu struct {
		sync.Mutex
		avoidUntil time.Time
	}
}

func newViaRounds(lg *zap.Logger, cfg ViaConfig, clock clockwork.Clock, cluster string, own func(context.Context) error, applyWait func(uint64) <-chan struct{}, reg prometheus.Registerer) *viaRounds {
	if cfg.Client == nil {
		cfg.Client = http.DefaultClient
	}
	v := &viaRounds{lg: lg, cfg: cfg, clock: clock, cluster: cluster, own: own, applyWait: applyWait,
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "replica", Name: "read_index_rounds_total",
			Help: "ReadIndex rounds by where the read index came from: via (another replica, --read-index-via) or own (the leader; also after a hub failed).",
		}, []string{"source"}),
	}
	if reg != nil {
		reg.MustRegister(v.rounds)
	}
	return v
}

// round obtains a read index through a hub and waits until it is applied
// here; if no hub answers in time, it does the replica's own round.
func (v *viaRounds) round(ctx context.Context) error {
	if v.useHub() {
		index, err := v.ask(ctx)
		if err == nil {
			select {
			case <-v.applyWait(index):
				v.rounds.WithLabelValues("via").Inc()
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		v.avoid(err)
	}
	v.rounds.WithLabelValues("own").Inc()
	return v.own(ctx)
}

func (v *viaRounds) useHub() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return !v.clock.Now().Before(v.mu.avoidUntil)
}

func (v *viaRounds) avoid(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.mu.avoidUntil = v.clock.Now().Add(viaBackoff)
	v.lg.Warn("no read index from --read-index-via; own rounds through the leader for a while", zap.Strings("urls", v.cfg.URLs), zap.Duration("for", viaBackoff), zap.Error(err))
}

// ask tries each hub in turn, each within the timeout.
func (v *viaRounds) ask(ctx context.Context) (uint64, error) {
	var errs []error
	for _, u := range v.cfg.URLs {
		index, err := v.askOne(ctx, u)
		if err == nil {
			return index, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", u, err))
		if ctx.Err() != nil {
			break
		}
	}
	return 0, errors.Join(errs...)
}

func (v *viaRounds) askOne(ctx context.Context, base string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+PathReadIndex, nil)
	if err != nil {
		return 0, err
	}
	resp, err := v.cfg.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", resp.Status, body)
	}
	var a readIndexAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return 0, fmt.Errorf("answer %q: %w", body, err)
	}
	if a.Cluster != v.cluster {
		return 0, fmt.Errorf("hub is in cluster %s, this replica in %s", a.Cluster, v.cluster)
	}
	if a.Index == 0 {
		return 0, errors.New("hub answered index 0")
	}
	return a.Index, nil
}

// clusterHex is how PathReadIndex names a cluster.
func clusterHex(id uint64) string { return strconv.FormatUint(id, 16) }
