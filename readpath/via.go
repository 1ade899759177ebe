package readpath

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/auth"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// Rounds shared across replicas. Every ReadIndex round costs the leader the
// same (DESIGN.md), and N replicas each running their own cost it N times.
// A replica started with --read-index-via asks another member of the same
// cluster (the "hub") for a read index instead of asking the leader: the hub
// answers after a round of its own that started after the request arrived
// (so it covers every write acknowledged before the asking replica's reads
// arrived), with its applied index, which is at least that round's read
// index; the asking replica waits until it has applied as much, then its
// strong reads are linearizable exactly as after a round of its own. The
// hub's rounds batch the requests of every replica that asks it, so the
// leader pays for the hub's rounds only.
//
// Whom the asker trusts (docs/trust-model.md): only a member of its own
// cluster, by its own raft-replicated member list: it asks only URLs that a
// member advertises as a client URL, and uses an answer only if it names
// that member, the asker's cluster, a term no older than the asker's and an
// index no lower than the asker's commit index when it asked; over TLS the
// hub's certificate must verify against the cluster's CA for that URL. A
// hub's answer serves strong reads only: it never moves the asker's
// freshness or leader contact (see Freshness), and the asker uses hubs only
// while its own raft hears from the leader. A hub whose index the asker
// does not reach within the timeout, or that answers slowly, is dropped for
// a back-off (see hubHealth); the read does an own round meanwhile.

// PathReadIndex is where a replica serves read indexes to other replicas.
const PathReadIndex = "/understudy/v1/readindex"

// readIndexAnswer is PathReadIndex's answer.
type readIndexAnswer struct {
	// Cluster is the hub's cluster ID, in hex: an index from another
	// cluster's log means nothing here.
	Cluster string `json:"cluster"`
	// Member is the hub's member ID, in hex.
	Member string `json:"member"`
	// Term is the hub's raft term when it answered.
	Term uint64 `json:"term,string"`
	// Index is applied at the hub after a round that started after the
	// request arrived.
	Index uint64 `json:"index,string"`
}

// readIndexHandler serves PathReadIndex: a round through fresh that starts
// after the request, then, to a caller authorize admits, what answer says
// (the hub's identity and applied index).
func readIndexHandler(fresh *Freshness, answer func() readIndexAnswer, authorize func(*http.Request) error, timeout time.Duration) http.Handler {
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
		// After the round, as etcd checks a linearizable Range's auth
		// after its ReadIndex: a login or a grant acknowledged before the
		// request came (through another member) is applied here by now.
		if authorize != nil {
			if err := authorize(r); err != nil {
				http.Error(w, "read index: "+err.Error(), http.StatusUnauthorized)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer())
	})
}

// authorizeRead admits a PathReadIndex caller as etcd admits a
// linearizable Range's: with auth enabled, a valid token (in the
// Authorization header, as etcd's JSON gateway takes it) or, with
// --client-cert-auth, the verified client certificate's common name, of a
// user that exists, with a token of the current auth revision.
func authorizeRead(s *etcdserver.EtcdServer) func(*http.Request) error {
	return func(r *http.Request) error {
		as := s.AuthStore()
		if !as.IsAuthEnabled() {
			return nil
		}
		md := metadata.MD{}
		if t := r.Header.Get("Authorization"); t != "" {
			md.Set(rpctypes.TokenFieldNameGRPC, t)
		}
		ctx := metadata.NewIncomingContext(r.Context(), md)
		if r.TLS != nil {
			ctx = peer.NewContext(ctx, &peer.Peer{AuthInfo: credentials.TLSInfo{State: *r.TLS}})
		}
		ai, err := s.AuthInfoFromCtx(ctx)
		if err != nil {
			return err
		}
		if ai == nil || ai.Username == "" {
			return auth.ErrUserEmpty
		}
		if ai.Revision < as.Revision() {
			return auth.ErrAuthOldRevision
		}
		if _, err := as.UserGet(&pb.AuthUserGetRequest{Name: ai.Username}); err != nil {
			return err
		}
		return nil
	}
}

// clusterHex is how PathReadIndex names a cluster or a member.
func clusterHex(id uint64) string { return strconv.FormatUint(id, 16) }
