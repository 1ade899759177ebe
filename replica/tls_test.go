package replica

import (
	"crypto/tls"
	"testing"

	"github.com/understudy-kv/understudy/config"
)

// Every client the replica opens towards https URLs (voters, upstreams,
// hubs) is bounded by etcd's --tls-min-version, --tls-max-version and
// --cipher-suites, as its front is; http URLs get no TLS at all.
func TestClientTLSIsBoundedByTheVersions(t *testing.T) {
	v := config.TLSVersions{MinVersion: "TLS1.2", MaxVersion: "TLS1.2", CipherSuites: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}}
	c, err := clientTLS(config.TLS{}, v, []string{"https://10.0.0.1:2379"})
	if err != nil {
		t.Fatal(err)
	}
	if c == nil || c.MinVersion != tls.VersionTLS12 || c.MaxVersion != tls.VersionTLS12 || len(c.CipherSuites) != 1 {
		t.Fatalf("client TLS towards an https URL: %+v, want TLS 1.2 only with one suite", c)
	}
	c, err = clientTLS(config.TLS{}, config.TLSVersions{MinVersion: "TLS1.3"}, []string{"https://10.0.0.1:2379"})
	if err != nil || c == nil || c.MinVersion != tls.VersionTLS13 {
		t.Fatalf("client TLS with --tls-min-version TLS1.3: %+v, %v", c, err)
	}
	if c, err := clientTLS(config.TLS{}, v, []string{"http://10.0.0.1:2379"}); err != nil || c != nil {
		t.Fatalf("client TLS towards an http URL: %+v, %v; want none", c, err)
	}
}
