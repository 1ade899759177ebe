package e2e

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// TestReplicaOverTLS joins a replica to voters that require certificates on
// both their client and peer URLs, and uses it with etcdctl over TLS.
func TestReplicaOverTLS(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	certs := harness.NewCerts(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, TLS: certs})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	if !strings.HasPrefix(r.ClientURL, "https://") || !strings.HasPrefix(r.PeerURL, "https://") {
		t.Fatalf("replica URLs %s, %s: want https", r.ClientURL, r.PeerURL)
	}
	at := []string{r.ClientURL}
	tlsFlags := certs.EtcdctlFlags()
	harness.MustEtcdctl(t, bins, at, append([]string{"put", "tls-key", "v1"}, tlsFlags...)...)
	if got := harness.MustEtcdctl(t, bins, at, append([]string{"get", "tls-key", "--print-value-only"}, tlsFlags...)...); strings.TrimSpace(got) != "v1" {
		t.Fatalf("strong get through the TLS replica: %q", got)
	}
	if got := harness.MustEtcdctl(t, bins, at, append([]string{"get", "tls-key", "--print-value-only", "--consistency=s"}, tlsFlags...)...); strings.TrimSpace(got) != "v1" {
		t.Fatalf("serializable get through the TLS replica: %q", got)
	}
	members := harness.MustEtcdctl(t, bins, at, append([]string{"member", "list"}, tlsFlags...)...)
	if !strings.Contains(members, "r1, "+r.PeerURL+", "+r.ClientURL+", true") {
		t.Fatalf("member list does not show the replica as a learner on its https URLs:\n%s", members)
	}
	// The front requires a client certificate, as the voters do.
	if out, err := harness.Etcdctl(t, bins, at, "get", "tls-key", "--cacert", certs.CA, "--dial-timeout", "2s", "--command-timeout", "3s"); err == nil {
		t.Fatalf("a client without a certificate read through the replica: %q", out)
	}

	// etcd's --tls-min-version bounds every TLS connection a replica
	// serves: its front and its raft listener refuse TLS 1.2 where r1's
	// front takes it; a replica so bound still joins (its own clients and
	// raft dials to the voters are bounded too, and the voters speak 1.3).
	r2 := startReplica(t, bins, c, "r2", replicaOpts{Extra: []string{"--tls-min-version", "TLS1.3"}})
	handshake := func(url string, maxVersion uint16) error {
		cfg := certs.ClientConfig().Clone()
		cfg.MaxVersion = maxVersion
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", strings.TrimPrefix(url, "https://"), cfg)
		if err == nil {
			err = conn.Handshake()
			conn.Close()
		}
		return err
	}
	if err := handshake(r.ClientURL, tls.VersionTLS12); err != nil {
		t.Fatalf("TLS 1.2 to r1's front (etcd's default minimum): %v", err)
	}
	for _, url := range []string{r2.ClientURL, r2.PeerURL} {
		if err := handshake(url, tls.VersionTLS12); err == nil || !strings.Contains(err.Error(), "protocol version") {
			t.Fatalf("TLS 1.2 to %s of a replica with --tls-min-version TLS1.3: %v, want a protocol version alert", url, err)
		}
		if err := handshake(url, tls.VersionTLS13); err != nil {
			t.Fatalf("TLS 1.3 to %s: %v", url, err)
		}
	}
	if got := harness.MustEtcdctl(t, bins, []string{r2.ClientURL}, append([]string{"get", "tls-key", "--print-value-only"}, tlsFlags...)...); strings.TrimSpace(got) != "v1" {
		t.Fatalf("strong get through the TLS 1.3 replica: %q", got)
	}
}
