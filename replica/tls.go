package replica

import (
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/conn"
)

// clientTLS is the client side of t, bounded by v, for talking to urls:
// nil when neither t nor the URLs ask for TLS.
func clientTLS(t config.TLS, v config.TLSVersions, urls []string) (*tls.Config, error) {
	c, err := conn.Credentials{CACert: t.TrustedCAFile, Cert: t.CertFile, Key: t.KeyFile}.TLS(urls)
	if err != nil {
		return nil, fmt.Errorf("replica: TLS client configuration: %w", err)
	}
	v.Apply(c)
	return c, nil
}

// dialTimeout is the replica's dial timeout: its clients of --join (and
// --upstream) connect, speak TLS and log in within it, and a --join that
// does not answer as etcd fails within it (conn.Flags.Probe).
const dialTimeout = 5 * time.Second

// clientFlags are the replica's client flags towards urls, which flag
// names ("--join", "--upstream"): its TLS (bounded by --tls-min-version),
// --user, dialTimeout, and the flags an error's advice names. Probe and
// Diagnose of the result tell why urls do not answer, in one line each:
//
//	f, err := clientFlags(front, "--upstream", c.Upstream)
//	_, err = f.Probe(ctx)                 // before the first request
//	err = f.Diagnose(ctx, endpoint, err)  // an error from a request to endpoint
//
// replicaClientConfig is the clientv3 configuration of a client of urls
// (named by flag in errors): the replica's client TLS, user and dial
// timeout (conn's one factory), logging at error and above only.
func replicaClientConfig(cfg config.Front, flag string, urls []string, lg *zap.Logger) (clientv3.Config, error) {
	f, err := clientFlags(cfg, flag, urls)
	if err != nil {
		return clientv3.Config{}, err
	}
	return f.ClientConfig(lg.WithOptions(zap.IncreaseLevel(zap.ErrorLevel)))
}

func clientFlags(cfg config.Front, flag string, urls []string) (conn.Flags, error) {
	tc, err := clientTLS(cfg.ClientTLS, cfg.TLSVersions, urls)
	if err != nil {
		return conn.Flags{}, err
	}
	user, password := cfg.Credentials()
	return conn.Flags{Endpoints: urls, TLSConfig: tc,
		Credentials: conn.Credentials{CACert: cfg.ClientTLS.TrustedCAFile, Cert: cfg.ClientTLS.CertFile, Key: cfg.ClientTLS.KeyFile,
			User: user, Password: password, DialTimeout: dialTimeout},
		Names: conn.Names{Endpoints: flag, CACert: "--trusted-ca-file", Cert: "--cert-file", Key: "--key-file",
			User: "--user", Password: "--password", DialTimeout: "the replica's dial timeout"},
	}, nil
}

// serverTLS is the front's TLS, bounded by v: nil for http client URLs.
func serverTLS(t config.TLS, v config.TLSVersions, urls []string) (*tls.Config, error) {
	if len(urls) == 0 || !strings.HasPrefix(urls[0], "https://") {
		return nil, nil
	}
	info := transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.TrustedCAFile, ClientCertAuth: t.ClientCertAuth}
	c, err := info.ServerConfig()
	if err != nil {
		return nil, fmt.Errorf("replica: --cert-file/--key-file/--trusted-ca-file: %w", err)
	}
	v.Apply(c)
	return c, nil
}
