package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/storage"
	"go.uber.org/zap"
)

// ErrQuotaBelowVoters means --quota-backend-bytes is below a voter's quota.
var ErrQuotaBelowVoters = errors.New("replica: --quota-backend-bytes is below a voter's quota; any member over its own quota raises a NOSPACE alarm that stops writes cluster-wide, so a replica's quota must be at least the voters'")

// voterQuotas asks every voter for its backend quota (StatusResponse's
// DbSizeQuota, which is etcd's effective quota), by member name. Voters that
// do not answer within a few seconds are left out.
func voterQuotas(ctx context.Context, cli *clientv3.Client) (map[string]int64, error) {
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ml, err := cli.MemberList(mctx)
	if err != nil {
		return nil, fmt.Errorf("member list: %w", err)
	}
	var (
		mu     sync.Mutex
		quotas = map[string]int64{}
		wg     sync.WaitGroup
	)
	for _, mem := range ml.Members {
		if mem.IsLearner || len(mem.ClientURLs) == 0 {
			continue
		}
		wg.Go(func() {
			for _, u := range mem.ClientURLs {
				sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				st, err := cli.Status(sctx, u)
				cancel()
				if err == nil {
					mu.Lock()
					quotas[mem.Name] = st.DbSizeQuota
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return quotas, nil
}

// decideQuota is the replica's quota: explicit if given (never below any
// voter's), else the largest voter's; with no voter's known, explicit or
// etcd's largest suggested quota — a replica's quota above the voters' is
// harmless, below them is not.
func decideQuota(explicit int64, voters map[string]int64) (quota int64, err error) {
	var largest int64
	var who string
	names := make([]string, 0, len(voters))
	for n := range voters {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if voters[n] > largest {
			largest, who = voters[n], n
		}
	}
	switch {
	case explicit > 0 && explicit < largest:
		return 0, fmt.Errorf("%w: %d (%s) is below voter %s's %d (%s); give at least %d, or leave the flag out to take the voters'",
			ErrQuotaBelowVoters, explicit, humanize.IBytes(uint64(explicit)), who, largest, humanize.IBytes(uint64(largest)), largest)
	case explicit > 0:
		return explicit, nil
	case largest > 0:
		return largest, nil
	default:
		return storage.MaxQuotaBytes, nil
	}
}

// backendQuota asks the voters and decides.
func backendQuota(ctx context.Context, lg *zap.Logger, cli *clientv3.Client, explicit int64) (int64, error) {
	voters, err := voterQuotas(ctx, cli)
	if err != nil {
		lg.Warn("could not ask the voters for their backend quota", zap.Error(err))
	}
	quota, err := decideQuota(explicit, voters)
	if err != nil {
		return 0, err
	}
	if len(voters) == 0 {
		lg.Warn("no voter told its backend quota; using the larger of --quota-backend-bytes and etcd's largest suggested quota",
			zap.Int64("quota-backend-bytes", quota))
	} else {
		lg.Info("backend quota", zap.Int64("quota-backend-bytes", quota), zap.Any("voters", voters))
	}
	return quota, nil
}

// quotaGuard asks the voters for their quotas again every interval, as
// long as the replica runs. A voter restarted with a larger
// --quota-backend-bytes leaves this member's quota below it, and the
// first member over its own quota stops writes cluster-wide (NOSPACE). A
// learner then stops: it counts for no quorum, and started again it takes
// the voters' quota (or refuses a --quota-backend-bytes below it). A
// promoted member is a voter like the others and stays; it reports the
// gap (log and metric), as it would any voter's smaller quota.
type quotaGuard struct {
	lg        *zap.Logger
	cli       *clientv3.Client
	quota     int64
	every     time.Duration
	isLearner func() bool
	below     prometheus.Gauge
}

func newQuotaGuard(lg *zap.Logger, cli *clientv3.Client, quota int64, every time.Duration, isLearner func() bool, reg prometheus.Registerer) *quotaGuard {
	q := &quotaGuard{lg: lg, cli: cli, quota: quota, every: every, isLearner: isLearner,
		below: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "understudy", Subsystem: "replica", Name: "quota_below_voters",
			Help: "1 while this member's backend quota is below a voter's (a learner stops then; see --quota-check-interval), else 0."})}
	if reg != nil {
		reg.MustRegister(q.below)
	}
	return q
}

// run checks every interval until ctx ends, or returns why a learner must
// stop.
func (q *quotaGuard) run(ctx context.Context) error {
	t := time.NewTicker(q.every)
	defer t.Stop()
	wasBelow := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		voters, err := voterQuotas(ctx, q.cli)
		if err != nil {
			q.lg.Debug("could not ask the voters for their backend quota", zap.Error(err))
			continue
		}
		_, below := decideQuota(q.quota, voters)
		if below == nil {
			q.below.Set(0)
			wasBelow = false
			continue
		}
		q.below.Set(1)
		if q.isLearner() {
			return fmt.Errorf("replica: a voter's backend quota is now above this learner's %d, and the first member over its own quota stops the cluster's writes: stopping; start it again to take the voters' quota: %w", q.quota, below)
		}
		if !wasBelow {
			q.lg.Error("this member's backend quota is now below a voter's; as a voter it stays, but the first member over its own quota stops writes cluster-wide: restart it with at least the voters' quota", zap.Int64("quota-backend-bytes", q.quota), zap.Any("voters", voters), zap.Error(below))
		}
		wasBelow = true
	}
}
