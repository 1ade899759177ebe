package readpath

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/auth"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/understudy-kv/understudy/readindex"
)

// The hub's side of rounds shared across replicas (--read-index-via; the
// protocol and the asker's side are package readindex's, protocol.go): a
// replica answers another member's request for a read index after a round
// of its own that started after the request came.

// readIndexHandler serves readindex.Path: a round through fresh that starts
// after the request, then, to a caller authorize admits, what answer says
// (the hub's identity and applied index, read after the round, and the
// request's nonce).
func readIndexHandler(fresh *readindex.Freshness, answer func(nonce string) readindex.Answer, authorize func(*http.Request) error, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "method not allowed: "+readindex.Path+" takes GET", http.StatusMethodNotAllowed)
			return
		}
		fresh.Touch()
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
		_ = json.NewEncoder(w).Encode(answer(r.URL.Query().Get(readindex.NonceParam)))
	})
}

// authorizeRead admits a readindex.Path caller as etcd admits a
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
