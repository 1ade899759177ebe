package learner

import (
	"context"
	"errors"
	"github.com/jonboulle/clockwork"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestProbePeerURLLeavesNoConnection: the probe answers for a peer URL of
// the cluster, refuses one of another cluster, and keeps no connection (and
// no transport goroutine) open once it returns, while the member's peer
// listener lives on. The answer has no body, so its connection goes back to
// the probe's own transport's pool rather than being closed with the body.
func TestProbePeerURLLeavesNoConnection(t *testing.T) {
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Etcd-Cluster-ID", "c1")
		w.WriteHeader(http.StatusOK) // no body: the connection goes back to the pool
	}))
	defer peer.Close()
	listening := goleak.IgnoreCurrent()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ProbePeerURL(ctx, clockwork.NewRealClock(), peer.URL, "c1", nil); err != nil {
		t.Fatalf("probe of the cluster's peer URL: %v", err)
	}
	goleak.VerifyNone(t, listening)

	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	if err := ProbePeerURL(short, clockwork.NewRealClock(), peer.URL, "c2", nil); !errors.Is(err, ErrPeerURLUnreachable) {
		t.Fatalf("probe of another cluster's peer URL: %v, want %v", err, ErrPeerURLUnreachable)
	}
	goleak.VerifyNone(t, listening)
}
