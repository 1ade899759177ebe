package readpath

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"time"

	"github.com/soheilhy/cmux"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
)

// Serve serves gRPC and HTTP on l, as etcd serves a client URL, until Stop;
// it returns nil after Stop. On plain listeners the two are told apart by
// cmux (HTTP/2 is gRPC); on TLS, after the handshake, by content type.
func (f *Front) Serve(l net.Listener) error {
	srv := f.httpServer(&accessController{lg: f.lg, s: f.s, mux: f.clientMux})
	if f.tls != nil {
		srv.Handler = grpcHandlerFunc(f.grpc, srv.Handler)
		srv.TLSConfig = f.tls
		return f.serveHTTP(srv, tls.NewListener(l, f.tls))
	}
	m := cmux.New(l)
	grpcl := m.Match(cmux.HTTP2())
	httpl := m.Match(cmux.HTTP1())
	var g errgroup.Group
	g.Go(func() error {
		// Stop closes the mux before it stops gRPC, so gRPC may see its
		// listener end first (cmux.ErrServerClosed): after Stop, that is
		// the clean end it is.
		if err := f.grpc.Serve(grpcl); err != nil && !f.stopped() && !errors.Is(err, grpc.ErrServerStopped) && !errors.Is(err, cmux.ErrListenerClosed) {
			return fmt.Errorf("readpath: serve gRPC on %s: %w", l.Addr(), err)
		}
		return nil
	})
	g.Go(func() error { return f.serveHTTP(srv, httpl) })
	g.Go(func() error {
		if err := m.Serve(); err != nil && !f.stopped() && !errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("readpath: serve %s: %w", l.Addr(), err)
		}
		return nil
	})
	f.onStop(func() { m.Close() })
	return g.Wait()
}

// ServeMetrics serves what etcd serves on --listen-metrics-urls (/metrics,
// /health, /livez, and the replica's /readyz) on l, until Stop.
func (f *Front) ServeMetrics(l net.Listener) error {
	return f.serveHTTP(f.httpServer(f.metricsMux), l)
}

func (f *Front) httpServer(h http.Handler) *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0), // as etcd: no logs of clients' mistakes
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: int(min(f.s.Cfg.MaxConcurrentStreams, math.MaxInt32))},
	}
	f.onStop(func() { _ = srv.Close() })
	return srv
}

func (f *Front) serveHTTP(srv *http.Server, l net.Listener) error {
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, cmux.ErrListenerClosed) && !f.stopped() {
		return fmt.Errorf("readpath: serve HTTP on %s: %w", l.Addr(), err)
	}
	return nil
}

// onStop registers a closer for Stop; after Stop it runs at once.
func (f *Front) onStop(close func()) {
	f.mu.Lock()
	if f.mu.stopped {
		f.mu.Unlock()
		close()
		return
	}
	f.mu.closers = append(f.mu.closers, close)
	f.mu.Unlock()
}

func (f *Front) stopped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.stopped
}
