package conn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"syscall"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// The causes Explain and Probe tell apart. An *Error is errors.Is its
// class, and unwraps to the error it was classed from.
var (
	// ErrRefused: nothing listens at the endpoint's port.
	ErrRefused = errors.New("conn: connection refused")
	// ErrUnreachable: no route to the host, or its name does not resolve.
	ErrUnreachable = errors.New("conn: host unreachable")
	// ErrTimeout: no connection, or no answer on it, in time (a
	// blackholed endpoint, a hung process).
	ErrTimeout = errors.New("conn: no answer in time")
	// ErrPlainToTLS: an http:// endpoint that serves TLS.
	ErrPlainToTLS = errors.New("conn: plaintext client, TLS endpoint")
	// ErrTLSToPlain: an https:// endpoint that serves plaintext.
	ErrTLSToPlain = errors.New("conn: TLS client, plaintext endpoint")
	// ErrUnknownAuthority: the server's certificate is signed by a CA the
	// client does not trust.
	ErrUnknownAuthority = errors.New("conn: server certificate signed by an unknown authority")
	// ErrNameMismatch: the server's certificate does not list the name or
	// address dialled.
	ErrNameMismatch = errors.New("conn: server certificate does not cover the endpoint")
	// ErrBadCertificate: the server's certificate is not valid otherwise
	// (expired, not for servers), or TLS failed for another reason.
	ErrBadCertificate = errors.New("conn: TLS failed")
	// ErrNoClientCert: the server requires a client certificate and the
	// client has none.
	ErrNoClientCert = errors.New("conn: client certificate required")
	// ErrClientCertRefused: the server refused the client's certificate.
	ErrClientCertRefused = errors.New("conn: client certificate refused")
	// ErrWrongCluster: the endpoint belongs to another cluster than the
	// command expects.
	ErrWrongCluster = errors.New("conn: another cluster")
	// ErrAuthFailed: the cluster refused the user, its password, or the
	// lack of a user.
	ErrAuthFailed = errors.New("conn: authentication refused")
	// ErrPermissionDenied: the user may not make the request.
	ErrPermissionDenied = errors.New("conn: permission denied")
	// ErrNotEtcd: something answers, but not etcd.
	ErrNotEtcd = errors.New("conn: not an etcd client URL")
)

// Error is why a client could not use an endpoint, as one line: the flag
// and endpoint, the cause in plain words, and what to do about that cause.
type Error struct {
	// Flag names the endpoint's flag ("--join", "--source-endpoints").
	Flag string
	// Endpoint is the URL (or URLs) the client dialled.
	Endpoint string
	// Class is one of the sentinel errors above; nil when the cause is
	// not one of them.
	Class error
	// Cause says what happened, Advice what to do about it ("" if
	// nothing in particular).
	Cause, Advice string
	// Err is the error the cause was read from.
	Err error
}

func (e *Error) Error() string {
	s := e.Cause
	if e.Advice != "" {
		s += "; " + e.Advice
	}
	return strings.TrimSpace(e.Flag+" "+e.Endpoint) + ": " + s
}

// Unwrap is the error the cause was read from.
func (e *Error) Unwrap() error { return e.Err }

// Is matches the class.
func (e *Error) Is(target error) bool { return e.Class != nil && target == e.Class }

// ClassOf is the class of the first *Error in err's chain; nil if none is
// classed.
func ClassOf(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return nil
}

// Names are the flags an error names and advises: the endpoints' flag,
// the credentials' and the dial timeout's.
type Names struct {
	Endpoints                         string
	CACert, Cert, Key, User, Password string
	// DialTimeout is the dial timeout's flag, or words for it where no
	// flag sets it.
	DialTimeout string
}

// EtcdctlNames are etcdctl's flag names after prefix ("source-" gives
// --source-endpoints, --source-cacert, …).
func EtcdctlNames(prefix string) Names {
	p := "--" + prefix
	return Names{Endpoints: p + "endpoints", CACert: p + "cacert", Cert: p + "cert", Key: p + "key",
		User: p + "user", Password: p + "password", DialTimeout: p + "dial-timeout"}
}

// names are f.Names, or etcdctl's.
func (f Flags) names() Names {
	if f.Names == (Names{}) {
		return EtcdctlNames("")
	}
	return f.Names
}

// stage is how far a connection got: what an error happened in.
type stage int

const (
	// stageUnknown: an error from a call, not from Probe's steps.
	stageUnknown stage = iota
	// stageDial: the TCP connection.
	stageDial
	// stageTLS: the TLS handshake.
	stageTLS
	// stageAnswer: a request on the connection and its answer.
	stageAnswer
)

// Explain returns err, from a client of f that used endpoint, as an
// *Error: one line naming f's flag, the endpoint and the cause, with the
// advice for that cause. An error already explained is returned as it is;
// one of no known class is named with the endpoint and kept as it reads.
// nil stays nil.
func (f Flags) Explain(endpoint string, err error) error {
	if err == nil {
		return nil
	}
	var done *Error
	if errors.As(err, &done) {
		return err
	}
	return f.explain(endpoint, stageUnknown, err)
}

// explain classes err, which happened at stage s on endpoint.
func (f Flags) explain(endpoint string, s stage, err error) *Error {
	n := f.names()
	e := &Error{Flag: n.Endpoints, Endpoint: endpoint, Err: err}
	host := endpoint
	if u, perr := url.Parse(endpoint); perr == nil && u.Host != "" {
		host = u.Hostname()
	}
	set := func(class error, cause, advice string) *Error {
		e.Class, e.Cause, e.Advice = class, cause, advice
		return e
	}
	msg := err.Error()
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(msg, s) {
				return true
			}
		}
		return false
	}
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		record    tls.RecordHeaderError
		dns       *net.DNSError
	)
	switch {
	case errors.As(err, &hostname) || has("certificate is valid for", "certificate is not valid for any names", "doesn't contain any IP SANs"):
		lists := ""
		if c := hostname.Certificate; c != nil && !strings.Contains(msg, "is valid for") {
			lists = "; the certificate lists " + certNames(c)
		}
		return set(ErrNameMismatch, fmt.Sprintf("TLS: the server's certificate does not cover %s (%s%s)", host, x509Text(msg), lists),
			fmt.Sprintf("dial a name or address the certificate lists, or reissue it with %s in its subject alternative names", host))
	case errors.As(err, &unknownCA) || has("certificate signed by unknown authority"):
		by := "an unknown authority"
		if unknownCA.Cert != nil {
			by = fmt.Sprintf("%q, an unknown authority", unknownCA.Cert.Issuer.String())
		}
		trust := fmt.Sprintf("not a CA in %s %s", n.CACert, f.CACert)
		if f.CACert == "" {
			trust = fmt.Sprintf("not a CA this system trusts; no %s was given", n.CACert)
		}
		return set(ErrUnknownAuthority, fmt.Sprintf("TLS: the server's certificate is signed by %s (%s)", by, trust),
			fmt.Sprintf("give %s the CA that signed the server's certificate", n.CACert))
	case errors.As(err, &invalid) || has("x509: "):
		return set(ErrBadCertificate, fmt.Sprintf("TLS: the server's certificate is not valid (%s)", x509Text(msg)),
			"renew or reissue the server's certificate")
	case has(certAlerts...):
		return f.certRefused(e, err)
	case errors.As(err, &record) || has("first record does not look like a TLS handshake"):
		return set(ErrTLSToPlain, "the endpoint answers TLS with plaintext: it serves no TLS",
			fmt.Sprintf("name it http://%s", hostPort(endpoint)))
	case has("sent an HTTP request to an HTTPS server"):
		return set(ErrPlainToTLS, "the endpoint serves TLS, and the client spoke plaintext",
			plainToTLSAdvice(n, endpoint))
	case errors.Is(err, syscall.ECONNREFUSED) || has("connection refused"):
		return set(ErrRefused, "connection refused: nothing listens there",
			"is etcd running there, and is this one of its client URLs (etcd's --advertise-client-urls)?")
	case errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) || has("no route to host", "network is unreachable"):
		return set(ErrUnreachable, fmt.Sprintf("no route to %s from here (%s)", host, netText(msg)),
			"is the address right, and do routes and firewalls let this host reach it?")
	case errors.As(err, &dns) || has("no such host"):
		if dns != nil && dns.Name != "" {
			host = dns.Name
		}
		return set(ErrUnreachable, fmt.Sprintf("%s does not resolve (%s)", host, netText(msg)),
			"check the name, and the DNS this host uses")
	case isAuth(err, rpctypes.ErrAuthFailed, rpctypes.ErrGRPCAuthFailed):
		user, _ := f.UserPassword()
		return set(ErrAuthFailed, fmt.Sprintf("authentication failed for user %q: wrong user name or password (%s)", user, msg),
			fmt.Sprintf("check %s and %s", n.User, n.Password))
	case isAuth(err, rpctypes.ErrUserEmpty, rpctypes.ErrGRPCUserEmpty):
		return set(ErrAuthFailed, fmt.Sprintf("the cluster has authentication on, and the client gave no user (%s)", msg),
			fmt.Sprintf("give %s (or, where the cluster runs --client-cert-auth, a client certificate whose CN is a user)", n.User))
	case isAuth(err, rpctypes.ErrInvalidAuthToken, rpctypes.ErrGRPCInvalidAuthToken), isAuth(err, rpctypes.ErrAuthOldRevision, rpctypes.ErrGRPCAuthOldRevision):
		return set(ErrAuthFailed, fmt.Sprintf("the cluster refused the client's auth token (%s)", msg),
			"try again; if it lasts, check that every member runs the same --auth-token")
	case isAuth(err, rpctypes.ErrPermissionDenied, rpctypes.ErrGRPCPermissionDenied):
		return set(ErrPermissionDenied, fmt.Sprintf("permission denied: %s may not make this request (%s)", f.who(), msg),
			"grant the right to one of that user's roles (etcdctl role grant-permission), or give a user that has it; member changes need the root role")
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return set(ErrTimeout, f.timeoutCause(s, msg), timeoutAdvice(s))
	case s == stageTLS && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)):
		return set(ErrBadCertificate, fmt.Sprintf("the server closed the connection during the TLS handshake (%s)", netText(msg)),
			"is it a TLS endpoint that accepts this client's TLS version and certificate?")
	}
	return set(nil, msg, "")
}

// certAlerts are the TLS alerts a server sends about the client's
// certificate: none given, or one it does not take.
var certAlerts = []string{"tls: certificate required", "tls: bad certificate", "tls: unknown certificate authority",
	"tls: certificate expired", "tls: unsupported certificate", "tls: certificate revoked"}

// certRefused sets e to the server's refusal of the client's certificate
// (none, or the one given), as err's alert says.
func (f Flags) certRefused(e *Error, err error) *Error {
	n := f.names()
	if f.Cert == "" {
		e.Class = ErrNoClientCert
		e.Cause = fmt.Sprintf("TLS: the server requires a client certificate and none was given (%s)", alertText(err.Error()))
		e.Advice = fmt.Sprintf("give %s and %s: a certificate the server's CA signed, for client authentication", n.Cert, n.Key)
		return e
	}
	e.Class = ErrClientCertRefused
	e.Cause = fmt.Sprintf("TLS: the server refused the client certificate %s %s (%s)", n.Cert, f.Cert, alertText(err.Error()))
	e.Advice = fmt.Sprintf("give %s a certificate signed by a CA the server trusts (its --trusted-ca-file), valid now and for client authentication", n.Cert)
	return e
}

// who names whom the cluster took the client for.
func (f Flags) who() string {
	if user, _ := f.UserPassword(); user != "" {
		return fmt.Sprintf("user %q", user)
	}
	if f.Cert != "" {
		if cn, err := CertCN(f.Cert); err == nil {
			return fmt.Sprintf("user %q (the CN of %s)", cn, f.Cert)
		}
	}
	return "a client with no user"
}

// timeoutCause says what a timeout at stage s means.
func (f Flags) timeoutCause(s stage, msg string) string {
	d := fmt.Sprintf("%v (%s)", f.dialTimeout(), f.names().DialTimeout)
	switch s {
	case stageDial:
		return "no TCP connection within " + d + ": the packets are dropped"
	case stageTLS, stageAnswer:
		return "connected, but nothing answered within " + d
	}
	return "no answer in time (" + msg + ")"
}

func timeoutAdvice(s stage) string {
	switch s {
	case stageDial:
		return "is the address right and the host up, and do firewalls let this host reach it?"
	case stageTLS, stageAnswer:
		return "is the process there hung or overloaded, or does something between pass connections but not their data?"
	}
	return "is the endpoint up and reachable from here?"
}

func plainToTLSAdvice(n Names, endpoint string) string {
	return fmt.Sprintf("name it https://%s, with %s for the CA that signed its certificate (and %s, %s if it requires client certificates)",
		hostPort(endpoint), n.CACert, n.Cert, n.Key)
}

// isAuth reports whether err is etcd's client error c or its gRPC form g.
func isAuth(err, c, g error) bool {
	return errors.Is(err, c) || errors.Is(err, g) || rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(g) ||
		strings.Contains(err.Error(), rpctypes.ErrorDesc(g))
}

// isTimeout is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// x509Text is the x509 part of msg ("x509: certificate is valid for …").
func x509Text(msg string) string {
	if i := strings.Index(msg, "x509: "); i >= 0 {
		return strings.TrimRight(msg[i:], `")`)
	}
	return msg
}

// alertText is the TLS alert in msg ("remote error: tls: bad certificate").
func alertText(msg string) string {
	if i := strings.Index(msg, "remote error: "); i >= 0 {
		return strings.TrimRight(msg[i:], `")`)
	}
	return msg
}

// netText is msg without what precedes the operation ("dial tcp …").
func netText(msg string) string {
	for _, op := range []string{"lookup ", "dial tcp", "read tcp", "write tcp"} {
		if i := strings.Index(msg, op); i >= 0 {
			return strings.TrimRight(msg[i:], `")`)
		}
	}
	return msg
}

// certNames lists the names and addresses c is valid for.
func certNames(c *x509.Certificate) string {
	names := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		return "no name or address"
	}
	return strings.Join(names, ", ")
}

// hostPort is the host:port of an endpoint URL.
func hostPort(endpoint string) string {
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		return u.Host
	}
	return endpoint
}
