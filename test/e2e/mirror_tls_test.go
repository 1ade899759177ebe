package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/certexpiry"
	"github.com/understudy-kv/understudy/test/harness"
)

// A mirror between clusters that require client certificates, into a
// destination with auth on: each side's --<side>-cacert/-cert/-key and
// --dest-user/--dest-password reach that side's client, and the copy
// arrives. With a destination user that may not write there, it copies
// nothing and says why.
func TestMirrorOverTLSWithAuth(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	certs := harness.NewCerts(t)
	src := harness.StartCluster(t, harness.ClusterConfig{N: 1, TLS: certs})
	dst := harness.StartCluster(t, harness.ClusterConfig{N: 1, TLS: certs})
	tls := certs.EtcdctlFlags()
	for _, c := range authSetup {
		harness.MustEtcdctl(t, bins, dst.Endpoints(), append(c, tls...)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := src.Client(t).Put(ctx, "/m/a", "1"); err != nil {
		t.Fatal(err)
	}
	side := func(s string) []string {
		return []string{"--" + s + "-cacert", certs.CA, "--" + s + "-cert", certs.Cert, "--" + s + "-key", certs.Key}
	}
	args := func(name string, user ...string) []string {
		a := append([]string{"mirror", "--source-endpoints", src.Endpoints()[0], "--dest-endpoints", dst.Endpoints()[0],
			"--name", name, "--prefix", "/m/"}, side("source")...)
		return append(append(a, side("dest")...), user...)
	}
	asRoot := append([]string{"--user", "root:rootpw"}, tls...)

	// alice may only read pub/: refused on its first write, nothing copied.
	denied := harness.Start(t, harness.ProcConfig{Name: "mirror-alice", Bin: bins.Replica, Args: args("alice", "--dest-user", "alice", "--dest-password", "alicepw")})
	if err := denied.WaitLog(ctx, "permission denied"); err != nil {
		t.Fatalf("a mirror whose destination user may not write: %v; its log:\n%s", err, denied.Log())
	}
	if log := denied.Log(); !strings.Contains(log, `as user "alice"`) || !strings.Contains(log, "--dest-user") {
		t.Errorf("the refusal does not name the user and the flag:\n%s", log)
	}
	if got := harness.MustEtcdctl(t, bins, dst.Endpoints(), append([]string{"get", "/m/", "--prefix", "--keys-only"}, asRoot...)...); strings.TrimSpace(got) != "" {
		t.Fatalf("a mirror without rights wrote %q", got)
	}
	denied.Kill()

	metrics := harness.URL(harness.FreePort(t))
	harness.Start(t, harness.ProcConfig{Name: "mirror", Bin: bins.Replica, Args: append(args("root", "--dest-user", "root", "--dest-password", "rootpw"), "--listen-metrics-urls", metrics)})
	harness.WaitFor(t, time.Minute, "/m/a copied into the destination over TLS as root", func() (bool, error) {
		out, err := harness.Etcdctl(t, bins, dst.Endpoints(), append([]string{"get", "/m/a", "--print-value-only"}, asRoot...)...)
		return err == nil && strings.TrimSpace(out) == "1", fmt.Errorf("%q, %v", out, err)
	})

	// Both certificates' expiry, for UnderstudyCertificateExpiresSoon.
	cert, err := certexpiry.Read(certs.Cert)
	if err != nil {
		t.Fatal(err)
	}
	m := harness.MustScrape(t, metrics+"/metrics")
	for _, use := range []string{"source", "dest"} {
		if got, err := m.Value("understudy_tls_certificate_expiry_timestamp_seconds", "use="+use, "file="+certs.Cert); err != nil || got != float64(cert.NotAfter.Unix()) {
			t.Errorf("the mirror's %s certificate expires at %v by its metrics (%v); the file says %v", use, got, err, cert.NotAfter.Unix())
		}
	}
}
