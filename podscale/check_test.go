package podscale

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// apiServer answers every GET with the next of answers (the last one
// repeated) and counts the asks.
func apiServer(t *testing.T, answers ...int) (Config, *atomic.Int32) {
	var asks atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		i := int(asks.Add(1)) - 1
		code := answers[min(i, len(answers)-1)]
		w.WriteHeader(code)
		switch code {
		case http.StatusUnauthorized:
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
		case http.StatusForbidden:
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`))
		}
	}))
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return Config{Server: srv.URL, Token: "t", CA: pool, Namespace: "kube-system"}, &asks
}

// check runs Check on a fake clock, advanced whenever Check waits.
func check(t *testing.T, cfg Config) (Verdict, error) {
	clock := clockwork.NewFakeClock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		for clock.BlockUntilContext(ctx, 1) == nil {
			clock.Advance(forbiddenWait)
		}
	}()
	return Check(ctx, clock, cfg, "understudy-replica-reader-0")
}

// Right after an uninstall, the API server may refuse the Role (403)
// before it refuses the deleted account (401): the 403 is asked again.
func TestCheckAsksAgainAfterA403(t *testing.T) {
	cfg, asks := apiServer(t, http.StatusForbidden, http.StatusForbidden, http.StatusUnauthorized)
	v, err := check(t, cfg)
	if err != nil || !v.Leave || asks.Load() != 3 {
		t.Fatalf("403, 403, 401: %+v, %v after %d asks; want to leave at the third", v, err, asks.Load())
	}
}

// A 403 that lasts is missing RBAC: an error, and the member stays.
func TestCheckALasting403IsAnError(t *testing.T) {
	cfg, asks := apiServer(t, http.StatusForbidden)
	v, err := check(t, cfg)
	if !errors.Is(err, ErrForbidden) || v.Leave || asks.Load() != forbiddenTries {
		t.Fatalf("403 throughout: %+v, %v after %d asks; want ErrForbidden after %d", v, err, asks.Load(), forbiddenTries)
	}
}
