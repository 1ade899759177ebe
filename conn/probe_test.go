package conn

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// etcdVersion answers GET /version as an etcd member does.
var etcdVersion = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/version" {
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write([]byte(`{"etcdserver":"3.7.3","etcdcluster":"3.7.0"}`))
})

// serve serves h on loopback, over TLS with cfg if cfg is not nil, and
// returns its host:port.
func serve(t *testing.T, h http.Handler, cfg *tls.Config) string {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	if cfg != nil {
		s.TLS = cfg
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silent is a loopback port whose connections are made (by the kernel)
// and never read: an endpoint that accepts and never answers.
func silent(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// TestProbeTellsEachCause dials real listeners, each wrong in one way, and
// checks that Probe's error is of that class, in one line naming the flag,
// the endpoint, the cause and the advice that fits it.
func TestProbeTellsEachCause(t *testing.T) {
	ca, other := newCA(t, "cluster-ca"), newCA(t, "other-ca")
	srv, _, _ := ca.issue(t, "server", loopbackIP, "localhost")
	elsewhere, _, _ := ca.issue(t, "elsewhere", nil, "elsewhere.example")
	_, cliCert, cliKey := ca.issue(t, "client", nil)
	_, strangerCert, strangerKey := other.issue(t, "stranger", nil)
	tlsServer := func(cert tls.Certificate, clientAuth tls.ClientAuthType, maxVersion uint16) string {
		return serve(t, etcdVersion, &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: clientAuth, ClientCAs: ca.pool(), MaxVersion: maxVersion})
	}
	plain := serve(t, etcdVersion, nil)
	verified := tlsServer(srv, tls.NoClientCert, 0)
	certRequired := tlsServer(srv, tls.RequireAndVerifyClientCert, 0)
	certRequired12 := tlsServer(srv, tls.RequireAndVerifyClientCert, tls.VersionTLS12)
	wrongName := tlsServer(elsewhere, tls.NoClientCert, 0)
	web := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello")) }), nil)
	closed, quiet := closedPort(t), silent(t)

	for _, c := range []struct {
		name     string
		endpoint string
		creds    Credentials
		class    error
		want     []string
	}{
		{"closed port", "http://" + closed, Credentials{}, ErrRefused,
			[]string{"connection refused", "is etcd running there"}},
		{"silent, plaintext", "http://" + quiet, Credentials{DialTimeout: 300 * time.Millisecond}, ErrTimeout,
			[]string{"connected, but nothing answered within 300ms (--source-dial-timeout)", "hung or overloaded"}},
		{"silent, TLS", "https://" + quiet, Credentials{CACert: ca.file, DialTimeout: 300 * time.Millisecond}, ErrTimeout,
			[]string{"connected, but nothing answered within 300ms"}},
		{"unknown authority", "https://" + verified, Credentials{CACert: other.file}, ErrUnknownAuthority,
			[]string{`signed by "CN=cluster-ca", an unknown authority (not a CA in --source-cacert ` + other.file + ")", "give --source-cacert the CA that signed"}},
		{"unknown authority, no CA given", "https://" + verified, Credentials{}, ErrUnknownAuthority,
			[]string{"(not a CA this system trusts; no --source-cacert was given)", "give --source-cacert"}},
		{"no client certificate, TLS 1.3", "https://" + certRequired, Credentials{CACert: ca.file}, ErrNoClientCert,
			[]string{"requires a client certificate and none was given", "certificate required", "give --source-cert and --source-key"}},
		{"no client certificate, TLS 1.2", "https://" + certRequired12, Credentials{CACert: ca.file}, ErrNoClientCert,
			[]string{"requires a client certificate and none was given", "handshake failure", "give --source-cert and --source-key"}},
		{"client certificate of another CA", "https://" + certRequired, Credentials{CACert: ca.file, Cert: strangerCert, Key: strangerKey}, ErrClientCertRefused,
			[]string{"refused the client certificate --source-cert " + strangerCert, "signed by a CA the server trusts"}},
		{"name not in the certificate", "https://" + wrongName, Credentials{CACert: ca.file}, ErrNameMismatch,
			[]string{"does not cover 127.0.0.1", "the certificate lists elsewhere.example", "with 127.0.0.1 in its subject alternative names"}},
		{"TLS to a plaintext endpoint", "https://" + plain, Credentials{CACert: ca.file}, ErrTLSToPlain,
			[]string{"serves plaintext, not TLS", "name it http://" + plain}},
		{"plaintext to a TLS endpoint", "http://" + verified, Credentials{}, ErrPlainToTLS,
			[]string{"serves TLS, and the client spoke plaintext", "name it https://" + verified, "--source-cacert"}},
		{"plaintext to a TLS endpoint that wants a certificate", "http://" + certRequired, Credentials{}, ErrPlainToTLS,
			[]string{"name it https://" + certRequired}},
		{"not etcd", "http://" + web, Credentials{}, ErrNotEtcd,
			[]string{`not an etcd client URL: it answers GET /version with 200 OK "hello"`, "--advertise-client-urls"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := Flags{Endpoints: []string{c.endpoint}, Credentials: c.creds, Names: EtcdctlNames("source-")}
			_, err := f.Probe(context.Background())
			if !errors.Is(err, c.class) {
				t.Fatalf("%v\nwant class %v, got %v", err, c.class, ClassOf(err))
			}
			oneLine(t, err, "--source-endpoints "+c.endpoint+": ")
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not say %q", err, w)
				}
			}
			if c.class != ErrTimeout && strings.Contains(err.Error(), "deadline") {
				t.Errorf("%v\nspeaks of a deadline", err)
			}
		})
	}
	// The client certificate and CA that fit make the look pass: what
	// fails then is etcd's Status, which no etcd here answers.
	f := Flags{Endpoints: []string{"https://" + certRequired}, Credentials: Credentials{CACert: ca.file, Cert: cliCert, Key: cliKey, DialTimeout: 300 * time.Millisecond}}
	_, err := f.Probe(context.Background())
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "etcd 3.7.3 answers GET /version, but not etcd's gRPC Status within 300ms (--dial-timeout)") {
		t.Fatalf("an endpoint that answers /version as etcd and no gRPC: %v", err)
	}
	oneLine(t, err, "--endpoints https://"+certRequired+": ")
}

// oneLine fails unless err is one line that starts with prefix.
func oneLine(t *testing.T, err error, prefix string) {
	t.Helper()
	if s := err.Error(); strings.Contains(s, "\n") || !strings.HasPrefix(s, prefix) {
		t.Errorf("%q\nwant one line starting %q", s, prefix)
	}
}

// TestProbeGroupsEndpointsOfOneCause: endpoints that fail alike are one
// line naming both; another cause is a line of its own.
func TestProbeGroupsEndpointsOfOneCause(t *testing.T) {
	ca, other := newCA(t, "cluster-ca"), newCA(t, "other-ca")
	srv, _, _ := ca.issue(t, "server", loopbackIP)
	cfg := &tls.Config{Certificates: []tls.Certificate{srv}}
	a, b := serve(t, etcdVersion, cfg), serve(t, etcdVersion, cfg)
	closed := closedPort(t)
	f := Flags{Endpoints: []string{"https://" + a, "https://" + closed, "https://" + b}, Credentials: Credentials{CACert: other.file}}
	_, err := f.Probe(context.Background())
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "--endpoints https://"+a+", https://"+b+": TLS: ") || !strings.HasPrefix(lines[1], "--endpoints https://"+closed+": connection refused") {
		t.Fatalf("%v\nwant one line for the two unknown-authority endpoints, then one for the closed port", err)
	}
	if !errors.Is(err, ErrUnknownAuthority) || !errors.Is(err, ErrRefused) {
		t.Fatalf("%v: not both classes", err)
	}
}
