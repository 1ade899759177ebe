package replica

import (
	"crypto/tls"
	"fmt"
	"strings"

	"go.etcd.io/etcd/client/pkg/v3/transport"

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
