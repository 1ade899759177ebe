package certexpiry

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// writeCert writes a self-signed certificate expiring at notAfter to path,
// after a private key block when keyFirst (a combined file).
func writeCert(t *testing.T, path string, notAfter time.Time, keyFirst bool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "r1"},
		NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	if keyFirst {
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		out = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	}
	out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// scrape gathers c as a registry would and returns each series as
// "use file value".
func scrape(t *testing.T, c *Collector) []string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != "understudy_tls_certificate_expiry_timestamp_seconds" {
			t.Fatalf("gathered %s", mf.GetName())
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out = append(out, fmt.Sprintf("%s %s %.0f", labels["use"], labels["file"], m.GetGauge().GetValue()))
		}
	}
	slices.Sort(out)
	return out
}

func series(use, file string, at int64) string { return fmt.Sprintf("%s %s %d", use, file, at) }

// Each file's NotAfter is read at each scrape: a file rotated in place
// shows its new expiry at the next one; a missing or non-certificate file
// reports 0; a file with no path is left out; the first certificate of a
// combined file counts.
func TestCollectorReadsEachFileAtEachScrape(t *testing.T) {
	dir := t.TempDir()
	client, peer, gone, junk := filepath.Join(dir, "client.crt"), filepath.Join(dir, "peer.pem"), filepath.Join(dir, "gone.crt"), filepath.Join(dir, "junk.crt")
	first := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	writeCert(t, client, first, false)
	writeCert(t, peer, first.Add(24*time.Hour), true)
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := New(File{"client", client}, File{"peer", peer}, File{"client", ""}, File{"peer", gone}, File{"peer", junk})

	want := []string{series("client", client, first.Unix()), series("peer", gone, 0), series("peer", junk, 0), series("peer", peer, first.Add(24*time.Hour).Unix())}
	if got := scrape(t, c); !slices.Equal(got, want) {
		t.Fatalf("scraped %q; want %q", got, want)
	}

	rotated := first.AddDate(1, 0, 0)
	writeCert(t, client, rotated, false)
	want[0] = series("client", client, rotated.Unix())
	if got := scrape(t, c); !slices.Equal(got, want) {
		t.Fatalf("after the client certificate was rotated in place, scraped %q; want %q", got, want)
	}
}

func TestReadSaysWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.crt")
	if err := os.WriteFile(junk, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{filepath.Join(dir, "none"): "no such file", junk: junk + ":", filepath.Join(dir): "is a directory"} {
		if _, err := Read(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Read(%s) = %v; want an error saying %q", path, err, want)
		}
	}
}
