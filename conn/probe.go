package conn

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Reached is what Probe found.
type Reached struct {
	// ClusterID is the cluster the endpoints that answered belong to.
	ClusterID uint64
	// Answered are the endpoints that answered, in the flags' order.
	Answered []string
	// Failed says why each other endpoint did not (an *Error each).
	Failed []error
}

// Probe checks, for every endpoint at once and all within f's dial
// timeout, that it answers as an etcd member: etcd's Status through a
// client of f (TCP, TLS, the login), and beside it a look at the
// connection (TCP, TLS, GET /version) that tells why when Status does not
// answer. A command runs it first, so that it fails within the dial
// timeout rather than when its first request times out.
//
// It returns the cluster the endpoints answered for; when none answered,
// an error of one line per cause, each naming its endpoints (an *Error
// each). Endpoints of two clusters are an ErrWrongCluster, whether or not
// others answered.
func (f Flags) Probe(ctx context.Context) (Reached, error) {
	tc, err := f.clientTLS()
	if err != nil {
		return Reached{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.dialTimeout())
	defer cancel()
	ids := make([]uint64, len(f.Endpoints))
	errs := make([]error, len(f.Endpoints))
	var wg sync.WaitGroup
	for i, ep := range f.Endpoints {
		wg.Go(func() { ids[i], errs[i] = f.probe(ctx, ep, tc) })
	}
	wg.Wait()
	var (
		r     Reached
		wrong []error
	)
	for i, ep := range f.Endpoints {
		switch {
		case errs[i] != nil:
			r.Failed = append(r.Failed, errs[i])
		case len(r.Answered) == 0 || ids[i] == r.ClusterID:
			r.ClusterID = ids[i]
			r.Answered = append(r.Answered, ep)
		default:
			wrong = append(wrong, f.WrongCluster(ep, ids[i], r.ClusterID, fmt.Sprintf("the cluster of %s %s", f.names().Endpoints, r.Answered[0])))
		}
	}
	switch {
	case len(wrong) > 0:
		return r, errors.Join(wrong...)
	case len(r.Answered) == 0 && len(f.Endpoints) > 0:
		return r, Group(r.Failed...)
	}
	return r, nil
}

// WrongCluster is the error of endpoint answering for cluster got where
// the command expects cluster want, which expected describes ("the
// cluster of --primary http://…").
func (f Flags) WrongCluster(endpoint string, got, want uint64, expected string) error {
	n := f.names()
	return &Error{Flag: n.Endpoints, Endpoint: endpoint, Class: ErrWrongCluster,
		Cause:  fmt.Sprintf("a member of cluster %x, not of %s (%x)", got, expected, want),
		Advice: fmt.Sprintf("give %s client URLs of one cluster, the one meant", n.Endpoints)}
}

// Diagnose explains err, from a client of f that used endpoint; where err
// alone does not tell the cause (a timeout, or no known class), it probes
// endpoint, within the dial timeout, and explains by what it finds.
func (f Flags) Diagnose(ctx context.Context, endpoint string, err error) error {
	e := f.Explain(endpoint, err)
	if c := ClassOf(e); e == nil || (c != nil && c != ErrTimeout) {
		return e
	}
	one := f
	one.Endpoints = []string{endpoint}
	if _, perr := one.Probe(ctx); perr != nil {
		return perr
	}
	return e
}

// Group joins errs, one line each, with the *Errors that differ only in
// their endpoint made one line naming them all.
func Group(errs ...error) error {
	var (
		out []error
		at  = map[string]*Error{}
	)
	for _, err := range errs {
		var e *Error
		if !errors.As(err, &e) {
			out = append(out, err)
			continue
		}
		key := e.Flag + "\x00" + e.Cause + "\x00" + e.Advice
		if g, ok := at[key]; ok {
			g.Endpoint += ", " + e.Endpoint
			continue
		}
		g := *e
		at[key] = &g
		out = append(out, &g)
	}
	if len(out) == 1 {
		return out[0]
	}
	return errors.Join(out...)
}

// definite are the classes a look finds that Status cannot get past: once
// the look finds one, Status is not waited for.
var definite = []error{ErrRefused, ErrUnreachable, ErrPlainToTLS, ErrTLSToPlain, ErrUnknownAuthority,
	ErrNameMismatch, ErrBadCertificate, ErrNoClientCert, ErrClientCertRefused}

// probe asks ep for its Status and, at once, looks at the connection; it
// returns ep's cluster ID, or why it did not answer.
func (f Flags) probe(ctx context.Context, ep string, tc *tls.Config) (uint64, error) {
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return 0, &Error{Flag: f.names().Endpoints, Endpoint: ep, Cause: "not a client URL", Advice: "want http://host:port or https://host:port", Err: err}
	}
	sctx, stopStatus := context.WithCancel(ctx)
	defer stopStatus()
	lctx, stopLook := context.WithCancel(ctx)
	defer stopLook()
	type status struct {
		id  uint64
		err error
	}
	type look struct {
		version string
		err     *Error
	}
	sc, lc := make(chan status, 1), make(chan look, 1)
	go func() {
		id, err := f.status(sctx, ep, tc)
		sc <- status{id, err}
	}()
	go func() {
		v, err := f.look(lctx, u, ep, tc)
		lc <- look{v, err}
	}()
	var (
		s *status
		l *look
	)
	for s == nil || l == nil {
		select {
		case r := <-sc:
			s = &r
			if r.err == nil {
				stopLook()
			}
		case r := <-lc:
			l = &r
			if r.err != nil && (slices.Contains(definite, r.err.Class) || webServer(r.err)) {
				stopStatus()
			}
		}
	}
	if s.err == nil {
		return s.id, nil
	}
	if l.err != nil {
		// The look's cause, unless Status was refused for its user.
		if e := f.Explain(ep, s.err); slices.Contains([]error{ErrAuthFailed, ErrPermissionDenied}, ClassOf(e)) {
			return 0, e
		}
		return 0, l.err
	}
	// The connection answers as etcd: the cause is Status's.
	e := f.explain(ep, stageAnswer, s.err)
	if e.Class == ErrTimeout {
		e.Cause = fmt.Sprintf("etcd %s answers GET /version, but not etcd's gRPC Status within %v (%s)", l.version, f.dialTimeout(), f.names().DialTimeout)
		e.Advice = "is the member overloaded, or its gRPC API served on other URLs?"
	}
	return 0, e
}

// status asks ep, through a client of f of its own, for its Status.
func (f Flags) status(ctx context.Context, ep string, tc *tls.Config) (uint64, error) {
	cfg, err := f.ClientConfig(nil)
	if err != nil {
		return 0, err
	}
	cfg.Endpoints, cfg.TLS, cfg.Context = []string{ep}, tc, ctx
	cli, err := clientv3.New(cfg)
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	st, err := cli.Status(ctx, ep)
	if err != nil {
		return 0, err
	}
	return st.Header.ClusterId, nil
}

// look connects to u as f's client would, asks GET /version (every etcd
// member serves it on its client URLs) and returns etcd's version; or,
// explained, why it got no such answer. A connection that fails for want
// of TLS, or for TLS it does not speak, is tried the other way to tell
// which.
func (f Flags) look(ctx context.Context, u *url.URL, ep string, tc *tls.Config) (string, *Error) {
	s, v, asked, err := getVersion(ctx, u, tc)
	switch {
	case err == nil:
		return v, nil
	case errors.Is(err, context.Canceled):
		return "", nil // Status answered
	case u.Scheme == "https" && s == stageTLS && notTLS(err) && answersPlain(ctx, u):
		return "", &Error{Flag: f.names().Endpoints, Endpoint: ep, Class: ErrTLSToPlain, Err: err,
			Cause:  fmt.Sprintf("the endpoint serves plaintext, not TLS (the TLS handshake failed: %v)", netText(err.Error())),
			Advice: fmt.Sprintf("name it http://%s", u.Host)}
	case u.Scheme == "http" && s == stageAnswer && !errors.Is(err, context.DeadlineExceeded) && speaksTLS(ctx, u):
		return "", &Error{Flag: f.names().Endpoints, Endpoint: ep, Class: ErrPlainToTLS, Err: err,
			Cause:  "the endpoint serves TLS, and the client spoke plaintext",
			Advice: plainToTLSAdvice(f.names(), ep)}
	}
	var ae *answerError
	if errors.As(err, &ae) {
		return "", &Error{Flag: f.names().Endpoints, Endpoint: ep, Class: ErrNotEtcd, Err: err,
			Cause:  "not an etcd client URL: " + ae.Error(),
			Advice: "give the client URLs of the cluster's members (etcd's --advertise-client-urls)"}
	}
	e := f.explain(ep, s, err)
	if asked && strings.Contains(err.Error(), "remote error: tls:") {
		// The server asked for a client certificate, then ended the
		// handshake with an alert: it is the certificate it refuses.
		f.certRefused(e, err)
	}
	return "", e
}

// notTLS is a handshake answered with something else than TLS, or not at
// all: the connection closed at the client's hello.
func notTLS(err error) bool {
	var record tls.RecordHeaderError
	return errors.As(err, &record) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// answerError is an answer to GET /version that is not etcd's.
type answerError struct {
	code         int
	status, body string
}

// webServer is a server that answers GET /version with 200 OK and not
// etcd's version: no etcd, and not one that serves etcd's gRPC alone (an
// endpoint that answers 404 may).
func webServer(err error) bool {
	var ae *answerError
	return errors.As(err, &ae) && ae.code == http.StatusOK
}

func (e *answerError) Error() string {
	return fmt.Sprintf("it answers GET /version with %s %q, not etcd's version", e.status, e.body)
}

// getVersion dials u, speaks TLS with tc if u is https, and asks GET
// /version: etcd's version, or the stage it failed at and why, and
// whether the server asked for a client certificate. A timeout or a
// cancel is ctx's error.
func getVersion(ctx context.Context, u *url.URL, tc *tls.Config) (_ stage, version string, askedCert bool, _ error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return stageDial, "", false, ctxOr(ctx, err)
	}
	defer c.Close()
	// Reads and writes end with ctx.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	rw := c
	if u.Scheme == "https" {
		cfg := &tls.Config{}
		if tc != nil {
			cfg = tc.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		cfg.NextProtos = nil // HTTP/1.1
		// Whether the server asks for a certificate tells a refused
		// certificate from other alerts.
		get := cfg.GetClientCertificate
		cfg.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			askedCert = true
			switch {
			case get != nil:
				return get(cri)
			case len(cfg.Certificates) > 0:
				return &cfg.Certificates[0], nil
			}
			return &tls.Certificate{}, nil
		}
		t := tls.Client(c, cfg)
		if err := t.HandshakeContext(ctx); err != nil {
			return stageTLS, "", askedCert, ctxOr(ctx, err)
		}
		rw = t
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/version"}).String(), nil)
	if err != nil {
		return stageAnswer, "", askedCert, err
	}
	req.Close = true
	if err := req.Write(rw); err != nil {
		return stageAnswer, "", askedCert, ctxOr(ctx, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(rw), req)
	if err != nil {
		return stageAnswer, "", askedCert, ctxOr(ctx, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var v struct {
		Server string `json:"etcdserver"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &v) != nil || v.Server == "" {
		line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
		if len(line) > 80 {
			line = line[:80] + "…"
		}
		return stageAnswer, "", askedCert, &answerError{code: resp.StatusCode, status: resp.Status, body: line}
	}
	return stageAnswer, v.Server, askedCert, nil
}

// ctxOr is ctx's error once it has ended (the deadline, not the socket's
// timeout it caused, is the cause), else err.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// answersPlain reports whether u, dialled without TLS, answers HTTP (and
// not that it wants TLS).
func answersPlain(ctx context.Context, u *url.URL) bool {
	plain := *u
	plain.Scheme = "http"
	_, _, _, err := getVersion(ctx, &plain, nil)
	var ae *answerError
	return err == nil || (errors.As(err, &ae) && !strings.Contains(ae.body, "HTTPS server"))
}

// speaksTLS reports whether u answers a TLS handshake as a TLS server: it
// completes it, or refuses it with an alert.
func speaksTLS(ctx context.Context, u *url.URL) bool {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return false
	}
	defer c.Close()
	t := tls.Client(c, &tls.Config{InsecureSkipVerify: true, ServerName: u.Hostname()}) //nolint:gosec // only asks whether TLS answers
	err = t.HandshakeContext(ctx)
	return err == nil || strings.Contains(err.Error(), "remote error: tls:")
}
