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

// member is the store as the ReadIndex machinery needs it
// (readindex.Member): a round asks an upstream for a linearizable revision
// (a strong Range: on a replica upstream, one of its own rounds, shared by
// every read waiting there; on a member, a linearizable read) and waits
// until the store holds it — but a quiet replica's background round asks
// for less (aged). Every write acknowledged before the round began
// is at or below that revision, so a local read after it is linearizable,
// as after a learner replica's round.
type member struct{ s *Store }

var (
	_ readindex.Member        = member{}
	_ readindex.ContactSource = member{}
)

// Member is the store as the front's ReadIndex machinery needs it.
func (s *Store) Member() readindex.Member { return member{s} }

// Contact counts what the upstreams send (events, progress): readindex's
// LeaderContact reads it for Lead's traffic.
func (s *Store) Contact() readindex.ContactSource { return member{s} }

// followingLead is the leader a cascaded replica names while it follows an
// upstream: the upstream stands for the source's leader (readindex's
// LeaderContact and the require-leader checks read it).
const followingLead = 1

func (m member) LinearizableReadNotify(ctx context.Context) error {
	if err := m.s.Fenced(); err != nil {
		return err
	}
	if readindex.Background(ctx) {
		if accept := readindex.AcceptAged(ctx); accept > 0 && m.s.clock.Now().UnixNano() >= m.s.noBoundUntil.Load() {
			if m.aged(ctx, accept) {
				return nil
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
	resp, err := cli.Get(ctx, probeKey, clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("cascade: a linearizable revision from --upstream %s: %w", url, err)
	}
	if err := m.s.checkHeader(url, "a linearizable read (a strong read's proof)", resp.Header, atAsk, true); err != nil {
		return err
	}
	return m.s.WaitRevision(ctx, resp.Header.Revision)
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

// aged does a quiet replica's background round (readindex.AcceptAged)
// from an upstream's own last round: a bounded read within accept, which a
// replica upstream serves without a round of its own while its last is
// that young, and whose answer tells how old its proof is
// (wire.StalenessBoundKey). Once the revision it answered is applied here,
// the store is fresh as of that much before the round began
// (readindex.ProvedAged). So the upkeep of quiet cascaded replicas costs
// their upstream no round while its own are that young (a quiet upstream's
// are, or younger); and where they are not (a quiet cascaded upstream of a
// depth-2 reader, whose proofs are older than a period), it costs one of
// the upstream's rounds, which serves every reader below it for a period.
// It reports whether it did the round; if not (an error, an answer with no
// bound or one beyond twice accept), the caller asks for a strong read. An
// upstream that tells no bound (a stock etcd member, a replica with
// --freshness-headers=off) is not asked again for noBoundFor.
func (m member) aged(ctx context.Context, accept time.Duration) bool {
	actx := metadata.AppendToOutgoingContext(background(ctx), wire.MaxStalenessKey, accept.String(), wire.FreshnessKey, "1")
	var hdr metadata.MD
	url, cli, _ := m.s.proofClient()
	atAsk := m.s.Revision()
	// clientv3's retrying KV client, as Get's.
	resp, err := clientv3.RetryKVClient(cli).Range(actx,
		&pb.RangeRequest{Key: []byte(probeKey), Serializable: true, CountOnly: true}, grpc.Header(&hdr))
	if err != nil || m.s.checkHeader(url, "a bounded read (a quiet replica's upkeep)", resp.Header, atAsk, false) != nil {
		return false
	}
	if resp.Header.Revision < atAsk {
		// An upstream behind the store proves nothing about it here: a
		// strong read will tell a lagging one from another history.
		return false
	}
	mode, bound := hdr.Get(wire.ReadModeKey), hdr.Get(wire.StalenessBoundKey)
	if len(mode) == 0 || mode[0] != wire.ReadModeBounded || len(bound) == 0 {
		m.s.noBoundUntil.Store(m.s.clock.Now().Add(noBoundFor).UnixNano())
		return false
	}
	d, err := time.ParseDuration(bound[0])
	if err != nil || d < 0 || d > 2*accept {
		return false
	}
	if err := m.s.WaitRevision(ctx, resp.Header.Revision); err != nil {
		return false
	}
	readindex.ProvedAged(ctx, d)
	m.s.m.agedRounds.Inc()
	return true
}

// Lead is followingLead while an upstream is followed, else 0.
func (m member) Lead() uint64 { return m.s.lead.Load() }

// Term and CommittedIndex are raft's, which a cascaded replica has none of:
// rounds through hubs (their only readers) are not offered to it.
func (m member) Term() uint64           { return 0 }
func (m member) CommittedIndex() uint64 { return uint64(m.s.SourceRevision()) }

// ApplyWait is closed once the store holds revision index.
func (m member) ApplyWait(index uint64) <-chan struct{} { return m.s.applied.Wait(index) }

func (m member) ClusterID() uint64           { return m.s.cluster }
func (m member) Peers() []readindex.Peer     { return nil }
func (m member) ReceivedFrom(uint64) float64 { return float64(m.s.contact.Load()) }
