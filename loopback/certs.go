package loopback

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/client/pkg/v3/transport"
)

// Certs are PEM files of a test CA and of one certificate it signed for
// 127.0.0.1, good for both server and client authentication: every member,
// replica and client of a TLS test uses the same one, as etcd's own tests do.
type Certs struct {
	CA, Cert, Key string

	// clock dates the certificates: a day's validity from an hour ago.
	// TLS checks them against the wall clock, so it is the real one.
	clock clockwork.Clock
	dir   string
	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
}

// NewCerts writes a fresh CA and certificate into a temp dir.
func NewCerts(t TB) *Certs {
	t.Helper()
	return newCerts(t, []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
}

// NewCertsAddressOnly is NewCerts with a certificate for 127.0.0.1 alone,
// no DNS name: a client that dials https://localhost is refused ("valid
// for 127.0.0.1, not localhost"), as clients that dial a name a member's
// certificate does not list are.
func NewCertsAddressOnly(t TB) *Certs {
	t.Helper()
	return newCerts(t, []net.IP{net.ParseIP("127.0.0.1")}, nil)
}

// newCerts writes a fresh CA and a certificate for ips and dns.
func newCerts(t TB, ips []net.IP, dns []string) *Certs {
	t.Helper()
	clock := clockwork.NewRealClock()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "understudy test CA"},
		NotBefore: clock.Now().Add(-time.Hour), NotAfter: clock.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "root"},
		NotBefore: clock.Now().Add(-time.Hour), NotAfter: clock.Now().Add(24 * time.Hour),
		IPAddresses: ips, DNSNames: dns,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := &Certs{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem"), clock: clock, dir: dir, ca: ca, caKey: caKey}
	for path, block := range map[string]*pem.Block{
		c.CA:   {Type: "CERTIFICATE", Bytes: caDER},
		c.Cert: {Type: "CERTIFICATE", Bytes: der},
		c.Key:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// ClientCert writes a client certificate for common name cn, signed by the
// CA, and returns its certificate and key files: etcd with
// --client-cert-auth takes cn as the user name.
func (c *Certs) ClientCert(t TB, cn string) (cert, key string) {
	t.Helper()
	return c.issue(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: cn}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, cn)
}

// MemberCert writes a certificate for common name cn that serves and
// dials as the cluster's own does (127.0.0.1, both usages), and returns its
// certificate and key files: a member whose user, with --client-cert-auth,
// is cn rather than root.
func (c *Certs) MemberCert(t TB, cn string) (cert, key string) {
	t.Helper()
	return c.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, cn+"-member")
}

// issue signs tmpl (a day's validity and a serial are set here) with a new
// key and writes NAME-cert.pem and NAME-key.pem.
func (c *Certs) issue(t TB, tmpl *x509.Certificate, name string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(c.clock.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = c.clock.Now().Add(-time.Hour), c.clock.Now().Add(24*time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &k.PublicKey, c.caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(c.dir, name+"-cert.pem"), filepath.Join(c.dir, name+"-key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// ClientConfig is a TLS client configuration with the certificate.
func (c *Certs) ClientConfig(t TB) *tls.Config {
	t.Helper()
	cfg, err := transport.TLSInfo{CertFile: c.Cert, KeyFile: c.Key, TrustedCAFile: c.CA}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// EtcdFlags are etcd's flags for client and peer TLS with client
// certificates required on both.
func (c *Certs) EtcdFlags() []string {
	return []string{
		"--cert-file", c.Cert, "--key-file", c.Key, "--trusted-ca-file", c.CA, "--client-cert-auth",
		"--peer-cert-file", c.Cert, "--peer-key-file", c.Key, "--peer-trusted-ca-file", c.CA, "--peer-client-cert-auth",
	}
}

// EtcdctlFlags are etcdctl's flags for the certificate.
func (c *Certs) EtcdctlFlags() []string {
	return []string{"--cacert", c.CA, "--cert", c.Cert, "--key", c.Key}
}

// httpsURL is URL with https.
func httpsURL(port int) string { return "https" + URL(port)[len("http"):] }
