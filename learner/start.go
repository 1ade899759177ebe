package learner

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/backoff"
	"github.com/understudy-kv/understudy/membership"
)

// MembersNotAgreed reports etcd's refusal to start a joining member whose
// --initial-cluster does not match the member list of the member it asked
// (the first of the others, by peer URL, that answers; a voter or another
// replica): one that has not yet applied an add or a remove made moments
// before (this learner's own add, or another replica's join or leave)
// lists another count ("member count is unequal") or other peer URLs
// ("PeerURLs: no match found for existing member"), the texts of etcd's
// membership.ValidateClusterAndAssignIDs. It passes once that member has
// applied them.
func MembersNotAgreed(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "member count is unequal") || strings.Contains(s, "PeerURLs: no match found for existing member")
}

// PeersUnanswered reports etcd's refusal to start a joining member when no
// other member's peer URL answered its GET /members ("cannot fetch cluster
// info from peer urls", etcd's bootstrap). Beside a network cut, etcd's
// own check of a peer's certificate does that: with TLS, a member accepts
// a peer connection only when the peer's address resolves in DNS to a name
// its certificate lists (client/pkg/transport's checkCertSAN), and a new
// Kubernetes pod's name resolves some seconds after it starts. It passes
// once the name resolves.
func PeersUnanswered(err error) bool {
	return err != nil && strings.Contains(err.Error(), "cannot fetch cluster info from peer urls")
}

// InitialCluster is the --initial-cluster for member id, named name, from
// the cluster's member list now (linearizable: every add applied by the
// leader is in it).
func InitialCluster(ctx context.Context, m membership.Cluster, id uint64, name string) (string, error) {
	list, err := m.MemberList(ctx)
	if err != nil {
		return "", fmt.Errorf("learner: list members: %w", err)
	}
	for _, mem := range list.Members {
		if mem.ID == id {
			return initialCluster(list.Members, id, name), nil
		}
	}
	return "", fmt.Errorf("learner: member %x is no longer listed: it was removed while starting", id)
}

// startBackoff is the first wait between starts that MembersNotAgreed
// refused; it doubles up to startBackoffMax.
const (
	startBackoff    = 100 * time.Millisecond
	startBackoffMax = 2 * time.Second
)

// Start calls start with j's --initial-cluster and, while etcd refuses it
// because a voter has not applied the latest adds yet (MembersNotAgreed)
// or no member answered on its peer URL (PeersUnanswered), again after a
// backoff with the member list read anew, until ctx ends. Any other error
// is returned at once. start must leave nothing behind
// when it fails (the caller's embed.StartEtcd closes what it opened).
func Start[T any](ctx context.Context, lg *zap.Logger, clock clockwork.Clock, m membership.Cluster, j Joined, name string, start func(initialCluster string) (T, error)) (T, error) {
	return startMember(ctx, lg, clock, m, j, name, start)
}

// startMember is Start with its waits on clock.
func startMember[T any](ctx context.Context, lg *zap.Logger, clock clockwork.Clock, m membership.Cluster, j Joined, name string, start func(initialCluster string) (T, error)) (T, error) {
	b := backoff.Exponential{Initial: startBackoff, Max: startBackoffMax}
	initial := j.InitialCluster
	for {
		v, err := start(initial)
		why, gaveUp := refusal(err)
		if why == "" {
			return v, err
		}
		d := b.Next()
		lg.Info(why+"; starting again", zap.Error(err), zap.String("initial-cluster", initial), zap.Duration("backoff", d))
		var zero T
		// A ctx that ends as the wait does ends the starts too.
		if backoff.Wait(ctx, clock, d) != nil || ctx.Err() != nil {
			return zero, fmt.Errorf("%w (%w; %s)", err, ctx.Err(), fmt.Sprintf(gaveUp, initial))
		}
		ic, lerr := InitialCluster(ctx, m, j.ID, name)
		if lerr != nil {
			return zero, fmt.Errorf("%w (starting again: %w)", err, lerr)
		}
		initial = ic
	}
}

// refusal says why etcd refused a start that is worth making again (""
// for any other error), and the question to leave with if it never
// passes, with %s for the --initial-cluster.
func refusal(err error) (why, gaveUp string) {
	switch {
	case MembersNotAgreed(err):
		return "the member list of the member etcd asked (a voter or a replica) does not match this learner's --initial-cluster yet: a member was added or removed moments ago",
			"the other members' lists never agreed with --initial-cluster %s: is one of them cut off from the leader?"
	case PeersUnanswered(err):
		return "no member answered this learner on its peer URL: with TLS, a voter refuses a peer whose address does not resolve to a name its certificate lists yet (a new pod's DNS name takes some seconds), or the voters' peer URLs are out of reach",
			"no member of --initial-cluster %s ever answered on its peer URL: does this host's address resolve, where the voters look it up, to a name in --peer-cert-file? Do the voters' peer URLs reach them from here?"
	}
	return "", ""
}
