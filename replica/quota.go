package replica

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/storage"
	"go.uber.org/zap"
)

// ErrQuotaBelowVoters means --quota-backend-bytes is below a voter's quota.
var ErrQuotaBelowVoters = errors.New("replica: --quota-backend-bytes is below a voter's quota; any member over its own quota raises a NOSPACE alarm that stops writes cluster-wide, so a replica's quota must be at least the voters'")

// noQuota is a disabled quota (etcd's negative --quota-backend-bytes).
const noQuota = -1

// limit is the database size a quota lets a member reach: a disabled
// quota is never passed.
func limit(q int64) int64 {
	if q < 0 {
		return math.MaxInt64
	}
	return q
}

// quotaText writes a quota for people.
func quotaText(q int64) string {
	if q < 0 {
		return "none (disabled)"
	}
	return fmt.Sprintf("%d (%s)", q, humanize.IBytes(uint64(q)))
}

// voterQuotas asks every voter but this member (selfID; 0 before it has
// one) for its backend quota (StatusResponse's DbSizeQuota: etcd's
// default when none was given, negative when disabled), by member name.
// It tells how many voters there are besides this member, and whether the
// member named self is a voter. Voters that do not answer within a few
// seconds are left out.
func voterQuotas(ctx context.Context, cli *clientv3.Client, self string, selfID uint64) (quotas map[string]int64, others int, selfVoter bool, err error) {
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ml, err := cli.MemberList(mctx)
	if err != nil {
		return nil, 0, false, fmt.Errorf("member list: %w", err)
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	quotas = map[string]int64{}
	for _, mem := range ml.Members {
		if mem.IsLearner || len(mem.ClientURLs) == 0 {
			continue
		}
		selfVoter = selfVoter || mem.Name == self
		if mem.ID == selfID {
			continue
		}
		others++
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
	return quotas, others, selfVoter, nil
}

// voterBounds names the voters whose quotas stop their databases first
// (smallest) and last (largest); a disabled quota is never passed.
func voterBounds(voters map[string]int64) (smallest, largest string) {
	for _, n := range slices.Sorted(maps.Keys(voters)) {
		if smallest == "" || limit(voters[n]) < limit(voters[smallest]) {
			smallest = n
		}
		if largest == "" || limit(voters[n]) > limit(voters[largest]) {
			largest = n
		}
	}
	return smallest, largest
}

// decideQuota is the replica's quota at start: explicit if given (never
// below any voter's), else the largest voter's (disabled if a voter's is);
// with no voter's known, explicit or etcd's largest suggested quota — a
// replica's quota above the voters' is harmless, below them is not.
func decideQuota(explicit int64, voters map[string]int64) (quota int64, err error) {
	_, who := voterBounds(voters)
	largest := voters[who]
	switch {
	case who != "" && explicit > 0 && explicit < limit(largest):
		hint := fmt.Sprintf("give at least %d", largest)
		if largest < 0 {
			hint = "a voter without a quota needs a replica without one"
		}
		return 0, fmt.Errorf("%w: %s is below voter %s's %s; %s, or leave the flag out to take the voters'",
			ErrQuotaBelowVoters, quotaText(explicit), who, quotaText(largest), hint)
	case explicit > 0:
		return explicit, nil
	case who != "" && largest < 0:
		return noQuota, nil
	case who != "" && largest > 0:
		return largest, nil
	default:
		return storage.MaxQuotaBytes, nil
	}
}

// backendQuota asks the voters and decides. A member that is a voter
// already (a promoted replica, started again) is never refused: a voter
// that does not start costs the cluster a voter, so it takes the voters'
// largest quota instead of a smaller --quota-backend-bytes, and says so.
func backendQuota(ctx context.Context, lg *zap.Logger, cli *clientv3.Client, name string, restart bool, explicit int64) (int64, error) {
	voters, _, selfVoter, err := voterQuotas(ctx, cli, name, 0)
	if err != nil {
		lg.Warn("could not ask the voters for their backend quota", zap.Error(err))
	}
	quota, err := decideQuota(explicit, voters)
	if err != nil && restart && selfVoter {
		_, who := voterBounds(voters)
		largest := voters[who]
		lg.Warn("--quota-backend-bytes is below a voter's, but this member is a voter: taking the voters' largest quota rather than refusing to start; raise the flag",
			zap.Int64("quota-backend-bytes", explicit), zap.Int64("quota", largest), zap.Any("voters", voters))
		return largest, nil
	}
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
