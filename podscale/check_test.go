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
		case http.StatusOK:
			_, _ = w.Write([]byte(`{"kind":"StatefulSet","apiVersion":"apps/v1","spec":{"replicas":2}}`))
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
	return Check(ctx, clock, func() (Config, error) { return cfg, nil }, "understudy-replica-reader-0")
}

// Right after an uninstall, the API server may refuse the Role (403)
// before it refuses the deleted account (401): the 403 is asked again, and
// so is the 401, which counts once it has lasted.
func TestCheckAsksAgainAfterA403(t *testing.T) {
	cfg, asks := apiServer(t, http.StatusForbidden, http.StatusForbidden, http.StatusUnauthorized)
	v, err := check(t, cfg)
	if err != nil || !v.Leave || asks.Load() != forbiddenTries {
		t.Fatalf("403, 403, then 401: %+v, %v after %d asks; want to leave after %d", v, err, asks.Load(), forbiddenTries)
	}
}

// A 401 that does not last (a token refreshed late) is no uninstall.
func TestCheckAShortLived401IsNoUninstall(t *testing.T) {
	cfg, asks := apiServer(t, http.StatusUnauthorized, http.StatusOK)
	v, err := check(t, cfg)
	if err != nil || v.Leave || asks.Load() != 2 {
		t.Fatalf("401, then a StatefulSet: %+v, %v after %d asks; want the second ask read, and no leave", v, err, asks.Load())
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
