package membership

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Conn says how to reach a cluster, with etcdctl's flag names.
type Conn struct {
	// Endpoints are client URLs (--endpoints).
	Endpoints []string
	// CACert, Cert, Key are etcdctl's --cacert, --cert, --key.
	CACert, Cert, Key string
	// User is name or name:password (--user).
	User string
}

// Validate names the first bad flag.
func (c Conn) Validate() error {
	if len(c.Endpoints) == 0 {
		return fmt.Errorf("--endpoints: give at least one client URL")
	}
	for _, e := range c.Endpoints {
		if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
			return fmt.Errorf("--endpoints %q: want http:// or https:// URLs", e)
		}
	}
	if (c.Cert == "") != (c.Key == "") {
		return fmt.Errorf("--cert and --key: give both or neither")
	}
	return nil
}

// TLS is the client TLS configuration, nil without --cacert/--cert.
func (c Conn) TLS() (*tls.Config, error) {
	if c.CACert == "" && c.Cert == "" {
		return nil, nil
	}
	info := transport.TLSInfo{TrustedCAFile: c.CACert, CertFile: c.Cert, KeyFile: c.Key}
	tc, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--cacert/--cert/--key: %w", err)
	}
	return tc, nil
}

// Dial returns a client for c and an HTTP client with the same TLS, for
// the leader's /debug/vars.
func Dial(c Conn) (*clientv3.Client, *http.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	tc, err := c.TLS()
	if err != nil {
		return nil, nil, err
	}
	cfg := clientv3.Config{Endpoints: c.Endpoints, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if c.User != "" {
		cfg.Username, cfg.Password, _ = strings.Cut(c.User, ":")
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("membership: client for %v: %w", c.Endpoints, err)
	}
	return cli, &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}, nil
}
