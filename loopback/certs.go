package loopback

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
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
// replica and client of a TLS topology uses the same one, as etcd's own
// tests do.
type Certs struct {
	CA, Cert, Key string

	// clock dates the certificates: a day's validity from an hour ago.
	// TLS checks them against the wall clock, so it is the real one.
	clock clockwork.Clock
	dir   string
	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
	// client is the client configuration with the certificate
	// (ClientConfig), built once the files are written.
	client *tls.Config
}

// NewCerts writes a fresh CA and certificate into a directory of e.
func NewCerts(e *Env) (*Certs, error) {
	return newCerts(e, []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
}

// NewCertsAddressOnly is NewCerts with a certificate for 127.0.0.1 alone,
// no DNS name: a client that dials https://localhost is refused ("valid
// for 127.0.0.1, not localhost"), as clients that dial a name a member's
// certificate does not list are.
func NewCertsAddressOnly(e *Env) (*Certs, error) {
	return newCerts(e, []net.IP{net.ParseIP("127.0.0.1")}, nil)
}

// newCerts writes a fresh CA and a certificate for ips and dns.
func newCerts(e *Env, ips []net.IP, dns []string) (*Certs, error) {
	fail := func(err error) (*Certs, error) { return nil, fmt.Errorf("loopback: certificates: %w", err) }
	clock := clockwork.NewRealClock()
	dir, err := e.TempDir()
	if err != nil {
		return fail(err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fail(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "understudy test CA"},
		NotBefore: clock.Now().Add(-time.Hour), NotAfter: clock.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fail(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fail(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fail(err)
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
		return fail(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fail(err)
	}
	c := &Certs{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem"), clock: clock, dir: dir, ca: ca, caKey: caKey}
	for path, block := range map[string]*pem.Block{
		c.CA:   {Type: "CERTIFICATE", Bytes: caDER},
		c.Cert: {Type: "CERTIFICATE", Bytes: der},
		c.Key:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			return fail(err)
		}
	}
	if c.client, err = (transport.TLSInfo{CertFile: c.Cert, KeyFile: c.Key, TrustedCAFile: c.CA}).ClientConfig(); err != nil {
		return fail(err)
	}
	return c, nil
}

// ClientCert writes a client certificate for common name cn, signed by the
// CA, and returns its certificate and key files: etcd with
// --client-cert-auth takes cn as the user name.
func (c *Certs) ClientCert(cn string) (cert, key string, err error) {
	return c.issue(&x509.Certificate{
		Subject: pkix.Name{CommonName: cn}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, cn)
}

// MemberCert writes a certificate for common name cn that serves and
// dials as the cluster's own does (127.0.0.1, both usages), and returns its
// certificate and key files: a member whose user, with --client-cert-auth,
// is cn rather than root.
func (c *Certs) MemberCert(cn string) (cert, key string, err error) {
	return c.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, cn+"-member")
}

// issue signs tmpl (a day's validity and a serial are set here) with a new
// key and writes NAME-cert.pem and NAME-key.pem.
func (c *Certs) issue(tmpl *x509.Certificate, name string) (cert, key string, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("loopback: certificate %s: %w", name, err)
		}
	}()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl.SerialNumber = big.NewInt(c.clock.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = c.clock.Now().Add(-time.Hour), c.clock.Now().Add(24*time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &k.PublicKey, c.caKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return "", "", err
	}
	cert, key = filepath.Join(c.dir, name+"-cert.pem"), filepath.Join(c.dir, name+"-key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", err
	}
	return cert, key, nil
}

// ClientConfig is a TLS client configuration with the certificate, a copy
// of its own for the caller to change.
func (c *Certs) ClientConfig() *tls.Config {
	return c.client.Clone()
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
