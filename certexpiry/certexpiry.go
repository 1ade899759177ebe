// Package certexpiry exports when the certificates a process presents
// expire, as understudy_tls_certificate_expiry_timestamp_seconds, read
// from their files at every scrape. etcd reloads a certificate file at
// each new TLS handshake, so a file rotated in place (cert-manager, a
// kubeadm renewal, scripts/kube-pki-secret.sh again) is what the next
// connection presents: reading it at the scrape shows that, not what the
// process loaded when it started. Neither etcd nor kubeadm exports it.
package certexpiry

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
)

// File is one certificate file a process presents, and what for.
type File struct {
	// Use names the side that presents it: "client" (the front's, and
	// the replica's towards the voters) or "peer" (raft).
	Use string
	// Path is the file, PEM; its first certificate is the one that
	// expires (the leaf, before any chain).
	Path string
}

// Collector reports each file's expiry at every scrape. A file that
// cannot be read or holds no certificate reports 0 (expired long ago):
// the next handshake that reloads it fails too, so it is as urgent, and
// the alert's description says which file.
type Collector struct {
	files []File
	desc  *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns the collector of files, leaving out those with no path.
func New(files ...File) *Collector {
	c := &Collector{desc: prometheus.NewDesc(prometheus.BuildFQName("understudy", "tls", "certificate_expiry_timestamp_seconds"),
		"When the certificate in a file this process presents expires (its NotAfter, Unix seconds), read at each scrape; 0 if the file cannot be read or holds no certificate.",
		[]string{"use", "file"}, nil)}
	for _, f := range files {
		if f.Path != "" {
			c.files = append(c.files, f)
		}
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, f := range c.files {
		var at float64
		if cert, err := Read(f.Path); err == nil {
			at = float64(cert.NotAfter.Unix())
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, at, f.Use, f.Path)
	}
}

// Read returns the first certificate of a PEM file.
func Read(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("certexpiry: %w", err)
	}
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil, fmt.Errorf("certexpiry: %s holds no PEM certificate", path)
		}
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("certexpiry: %s: %w", path, err)
			}
			return cert, nil
		}
	}
}
