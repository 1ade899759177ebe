package e2e

import (
	"strings"
	"testing"

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
	tls := certs.EtcdctlFlags()
	harness.MustEtcdctl(t, bins, at, append([]string{"put", "tls-key", "v1"}, tls...)...)
	if got := harness.MustEtcdctl(t, bins, at, append([]string{"get", "tls-key", "--print-value-only"}, tls...)...); strings.TrimSpace(got) != "v1" {
		t.Fatalf("strong get through the TLS replica: %q", got)
	}
	if got := harness.MustEtcdctl(t, bins, at, append([]string{"get", "tls-key", "--print-value-only", "--consistency=s"}, tls...)...); strings.TrimSpace(got) != "v1" {
		t.Fatalf("serializable get through the TLS replica: %q", got)
	}
	members := harness.MustEtcdctl(t, bins, at, append([]string{"member", "list"}, tls...)...)
	if !strings.Contains(members, "r1, "+r.PeerURL+", "+r.ClientURL+", true") {
		t.Fatalf("member list does not show the replica as a learner on its https URLs:\n%s", members)
	}
	// The front requires a client certificate, as the voters do.
	if out, err := harness.Etcdctl(t, bins, at, "get", "tls-key", "--cacert", certs.CA, "--dial-timeout", "2s", "--command-timeout", "3s"); err == nil {
		t.Fatalf("a client without a certificate read through the replica: %q", out)
	}
}
