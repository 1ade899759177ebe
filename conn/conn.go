// Package conn turns etcdctl's connection flags into client
// configurations: one type for every command that talks to a cluster as a
// client (replica status/promote/leave/hold, compare, mirror's two sides)
// and for the replica's own clients, so that TLS, auth and their errors
// read the same everywhere. Why an endpoint fails is told here once
// (errors.go: Explain, one line naming the flag, the endpoint, the cause
// and the advice for it), and found out here (probe.go: Probe, every
// endpoint within the dial timeout, which each command runs first).
package conn

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// DefaultDialTimeout is etcdctl's --dial-timeout: how long a client gives
// an endpoint to connect, speak TLS and log in.
const DefaultDialTimeout = 2 * time.Second

// Credentials are how a client proves itself and checks the servers, and
// how long it gives them to answer: etcdctl's --cacert, --cert, --key,
// --insecure-skip-tls-verify, --user, --password and --dial-timeout.
type Credentials struct {
	CACert, Cert, Key  string
	InsecureSkipVerify bool
	// User is name or name:password; Password, if set, wins over the
	// password in User.
	User, Password string
	// DialTimeout bounds a connection: TCP, TLS and the login, and so
	// Probe; 0 is DefaultDialTimeout.
	DialTimeout time.Duration
}

// Flags are a cluster's client URLs and the credentials to reach them.
type Flags struct {
	Endpoints []string
	Credentials
	// TLSConfig, if set, is the client TLS towards Endpoints, built by the
	// caller (a replica's, bounded by --tls-min-version); else it comes
	// from Credentials.
	TLSConfig *tls.Config
	// Names are the flags that errors name and advise; the zero value is
	// etcdctl's (EtcdctlNames("")).
	Names Names
}

// Register adds the credentials' flags to fs, each name after prefix
// ("source-" gives --source-cacert); what names the servers in the help
// text ("the source cluster's").
func (c *Credentials) Register(fs *flag.FlagSet, prefix, what string) {
	fs.StringVar(&c.CACert, prefix+"cacert", c.CACert, "CA bundle to verify "+what+" TLS certificates (etcdctl's --cacert).")
	fs.StringVar(&c.Cert, prefix+"cert", c.Cert, "Client TLS certificate for "+what+" members (etcdctl's --cert).")
	fs.StringVar(&c.Key, prefix+"key", c.Key, "Client TLS key (etcdctl's --key).")
	fs.BoolVar(&c.InsecureSkipVerify, prefix+"insecure-skip-tls-verify", c.InsecureSkipVerify, "Do not verify "+what+" TLS certificates (etcdctl's flag).")
	fs.StringVar(&c.User, prefix+"user", c.User, "User, as name or name:password (etcdctl's --user).")
	fs.StringVar(&c.Password, prefix+"password", c.Password, "Password, if not in --"+prefix+"user (etcdctl's --password).")
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	fs.DurationVar(&c.DialTimeout, prefix+"dial-timeout", c.DialTimeout, "How long "+what+" endpoints have to connect, speak TLS and log in; a command fails within it, naming the endpoint and the cause (etcdctl's --dial-timeout).")
}

// Validate names, with prefix, every flag that is wrong.
func (c Credentials) Validate(prefix string) error {
	var errs []error
	if (c.Cert == "") != (c.Key == "") {
		errs = append(errs, fmt.Errorf("--%scert and --%skey: give both or neither", prefix, prefix))
	}
	if c.Password != "" && c.User == "" {
		errs = append(errs, fmt.Errorf("--%spassword: needs --%suser", prefix, prefix))
	}
	if c.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("--%sdial-timeout %v: want a positive duration", prefix, c.DialTimeout))
	}
	return errors.Join(errs...)
}

// UserPassword splits User and applies Password.
func (c Credentials) UserPassword() (user, password string) {
	user, password, _ = strings.Cut(c.User, ":")
	if c.Password != "" {
		password = c.Password
	}
	return user, password
}

// TLS is the client TLS configuration towards endpoints: nil when neither
// the credentials nor an https:// endpoint ask for TLS.
func (c Credentials) TLS(endpoints []string) (*tls.Config, error) {
	https := false
	for _, e := range endpoints {
		https = https || strings.HasPrefix(e, "https://")
	}
	if !https && c.CACert == "" && c.Cert == "" && !c.InsecureSkipVerify {
		return nil, nil
	}
	info := transport.TLSInfo{TrustedCAFile: c.CACert, CertFile: c.Cert, KeyFile: c.Key, InsecureSkipVerify: c.InsecureSkipVerify}
	tc, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("TLS from CA %q, certificate %q, key %q: %w", c.CACert, c.Cert, c.Key, err)
	}
	return tc, nil
}

// Validate names, with prefix, every flag that is wrong: endpoints must be
// http:// or https:// URLs.
func (f Flags) Validate(prefix string) error {
	var errs []error
	if len(f.Endpoints) == 0 {
		errs = append(errs, fmt.Errorf("--%sendpoints: give at least one client URL", prefix))
	}
	for _, e := range f.Endpoints {
		if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
			errs = append(errs, fmt.Errorf("--%sendpoints %q: want http:// or https:// URLs", prefix, e))
		}
	}
	return errors.Join(append(errs, f.Credentials.Validate(prefix))...)
}

// ClientConfig is the clientv3 configuration for f: its endpoints, TLS and
// user, its dial timeout, and lg for the client's own logs (nil: none).
func (f Flags) ClientConfig(lg *zap.Logger) (clientv3.Config, error) {
	tc, err := f.clientTLS()
	if err != nil {
		return clientv3.Config{}, err
	}
	if lg == nil {
		lg = zap.NewNop()
	}
	user, password := f.UserPassword()
	return clientv3.Config{Endpoints: f.Endpoints, TLS: tc, DialTimeout: f.dialTimeout(),
		Username: user, Password: password, Logger: lg}, nil
}

// clientTLS is TLSConfig, or the TLS the credentials ask for.
func (f Flags) clientTLS() (*tls.Config, error) {
	if f.TLSConfig != nil {
		return f.TLSConfig, nil
	}
	return f.TLS(f.Endpoints)
}

// dialTimeout is DialTimeout, or DefaultDialTimeout.
func (c Credentials) dialTimeout() time.Duration {
	if c.DialTimeout > 0 {
		return c.DialTimeout
	}
	return DefaultDialTimeout
}

// CertCN is the CN of the first certificate in certFile: the user etcd
// takes a client for when it authenticates by certificate
// (--client-cert-auth) and no user is given.
func CertCN(certFile string) (string, error) {
	b, err := os.ReadFile(certFile)
	if err != nil {
		return "", fmt.Errorf("conn: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return "", fmt.Errorf("conn: %s: no PEM certificate", certFile)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("conn: %s: %w", certFile, err)
	}
	return leaf.Subject.CommonName, nil
}

// Identity names who a client with c authenticates as, for people: the
// user, or the CN of the certificate; "" if neither.
func (c Credentials) Identity() string {
	if user, _ := c.UserPassword(); user != "" {
		return user
	}
	if c.Cert != "" {
		if cn, err := CertCN(c.Cert); err == nil {
			return cn
		}
	}
	return ""
}
