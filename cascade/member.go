package cascade

import (
	"context"
	"fmt"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/readindex"
	"github.com/understudy-kv/understudy/wire"
)

// prover is the store as the ReadIndex machinery needs it
// (readindex.Source): a round asks an upstream for a linearizable revision
// (a strong Range: on a replica upstream, one of its own rounds, shared by
// every read waiting there; on a member, a linearizable read) and waits
// until the store holds it — but a quiet replica's background round may
// take less (aged). Every write acknowledged before the round began is at
// or below that revision, so a local read after it is linearizable, as
// after a learner replica's round. Who proves it is the upstream followed
// (Lead: its number in --upstream, from 1; 0 while none is), and contact
// is what the upstreams sent.
type prover struct{ s *Store }

var (
	_ readindex.Prover        = prover{}
	_ readindex.ContactSource = prover{}
)

// Rounds is the store as the front's ReadIndex machinery needs it. It has
// no raft: rounds through hubs are a learner replica's.
func (s *Store) Rounds() readindex.Source {
	p := prover{s}
	return readindex.Source{Prover: p, Lead: s.lead.Load, Contact: p}
}

// Prove asks the upstream followed for a linearizable revision and waits
// until the store holds it; a background round that may take an aged
// proof asks for less first (aged).
func (m prover) Prove(ctx context.Context, req readindex.ProofRequest) (readindex.Proof, error) {
	if err := m.s.Fenced(); err != nil {
		return readindex.Proof{}, err
	}
	if req.Background {
		if req.AcceptAged > 0 && m.s.clock.Now().UnixNano() >= m.s.noBoundUntil.Load() {
			if d, ok := m.aged(ctx, req.AcceptAged); ok {
				return readindex.Proof{Aged: true, Age: d}, nil
			}
		}
		ctx = background(ctx)
	}
	url, cli, session := m.s.proofClient()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(session, cancel) // u no longer followed: ask the next
	defer stop()
	atAsk := m.s.Revision()
	asked := m.s.clock.Now()
	resp, err := cli.Get(ctx, probeKey, clientv3.WithCountOnly())
	if err != nil {
		return readindex.Proof{}, fmt.Errorf("cascade: a linearizable revision from --upstream %s: %w", url, err)
	}
	answered := m.s.clock.Now()
	m.s.m.proofSeconds.WithLabelValues("upstream").Observe(answered.Sub(asked).Seconds())
	if err := m.s.checkHeader(url, "a linearizable read (a strong read's proof)", resp.Header, atAsk, true); err != nil {
		return readindex.Proof{}, err
	}
	err = m.s.WaitRevision(ctx, resp.Header.Revision)
	if err == nil {
		m.s.m.proofSeconds.WithLabelValues("apply").Observe(m.s.clock.Since(answered).Seconds())
	}
	return readindex.Proof{}, err
}

// proofClient is the client proofs ask: the upstream whose watch the store
// follows (alive, and of the store's history, checked), for as long as
// the returned context lives; else any, with a context that never ends.
func (s *Store) proofClient() (string, *clientv3.Client, context.Context) {
	if f := s.followed.Load(); f != nil {
		return f.u.url, f.u.cli, f.ctx
	}
	return strings.Join(s.cfg.Upstreams, ","), s.all, context.Background()
}

// noBoundFor is how long a cascaded replica asks for strong reads alone
// after an upstream's answer told no bound (aged).
const noBoundFor = 10 * time.Minute

// aged does a quiet replica's background round (ProofRequest.AcceptAged)
// from an upstream's own last round: a bounded read within accept, which a
// replica upstream serves without a round of its own while its last is
// that young, and whose answer tells how old its proof is
// (wire.StalenessBoundKey). Once the revision it answered is applied here,
// the store is fresh as of that much before the round began (an aged
// proof, d old). So the upkeep of quiet cascaded replicas costs
// their upstream no round while its own are that young (a quiet upstream's
// are, or younger); and where they are not (a quiet cascaded upstream of a
// depth-2 reader, whose proofs are older than a period), it costs one of
// the upstream's rounds, which serves every reader below it for a period.
// It reports the proof's age and whether it did the round; if not (an error, an answer with no
// bound or one beyond twice accept), the caller asks for a strong read. An
// upstream that tells no bound (a stock etcd member, a replica with
// --freshness-headers=off) is not asked again for noBoundFor.
func (m prover) aged(ctx context.Context, accept time.Duration) (time.Duration, bool) {
	actx := metadata.AppendToOutgoingContext(background(ctx), wire.MaxStalenessKey, accept.String(), wire.FreshnessKey, "1")
	var hdr metadata.MD
	url, cli, _ := m.s.proofClient()
	atAsk := m.s.Revision()
	// clientv3's retrying KV client, as Get's.
	resp, err := clientv3.RetryKVClient(cli).Range(actx,
		&pb.RangeRequest{Key: []byte(probeKey), Serializable: true, CountOnly: true}, grpc.Header(&hdr))
	if err != nil || m.s.checkHeader(url, "a bounded read (a quiet replica's upkeep)", resp.Header, atAsk, false) != nil {
		return 0, false
	}
	if resp.Header.Revision < atAsk {
		// An upstream behind the store proves nothing about it here: a
		// strong read will tell a lagging one from another history.
		return 0, false
	}
	mode, bound := hdr.Get(wire.ReadModeKey), hdr.Get(wire.StalenessBoundKey)
	if len(mode) == 0 || mode[0] != wire.ReadModeBounded || len(bound) == 0 {
		m.s.noBoundUntil.Store(m.s.clock.Now().Add(noBoundFor).UnixNano())
		return 0, false
	}
	d, err := time.ParseDuration(bound[0])
	if err != nil || d < 0 || d > 2*accept {
		return 0, false
	}
	if err := m.s.WaitRevision(ctx, resp.Header.Revision); err != nil {
		return 0, false
	}
	m.s.m.agedRounds.Inc()
	return d, true
}

// ReceivedFrom counts what the upstreams sent (events, progress, reads):
// LeaderContact reads it for the upstream followed.
func (m prover) ReceivedFrom(uint64) float64 { return float64(m.s.contact.Load()) }
