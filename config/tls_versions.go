package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/etcd/client/pkg/v3/tlsutil"
)

// TLSVersions are etcd's --tls-min-version, --tls-max-version and
// --cipher-suites, with etcd's defaults and rules: they bound every TLS
// connection the replica serves or opens — its front, its embedded
// member's raft traffic, its clients of the voters and upstreams — as
// they bound every one of etcd's.
type TLSVersions struct {
	// MinVersion and MaxVersion are TLS1.2 or TLS1.3; an empty MaxVersion
	// leaves the highest to Go.
	MinVersion, MaxVersion string
	// CipherSuites are Go's names of the suites TLS 1.2 may use (empty:
	// Go's); TLS 1.3's are Go's own and cannot be chosen.
	CipherSuites []string
}

// DefaultTLSVersions are etcd's defaults: TLS 1.2 at least, Go's suites.
func DefaultTLSVersions() TLSVersions { return TLSVersions{MinVersion: string(tlsutil.TLSVersion12)} }

// Validate checks v by etcd's rules, naming the flag of each problem.
func (v TLSVersions) Validate() error {
	var problems []error
	lo, err := tlsutil.GetTLSVersion(v.MinVersion)
	if err != nil {
		problems = append(problems, fmt.Errorf("--tls-min-version %q: must be TLS1.2 or TLS1.3", v.MinVersion))
	}
	hi, err := tlsutil.GetTLSVersion(v.MaxVersion)
	if err != nil {
		problems = append(problems, fmt.Errorf("--tls-max-version %q: must be TLS1.2, TLS1.3 or empty (Go's highest)", v.MaxVersion))
	}
	if lo != 0 && hi != 0 && lo > hi {
		problems = append(problems, fmt.Errorf("--tls-min-version %s is above --tls-max-version %s", v.MinVersion, v.MaxVersion))
	}
	if len(v.CipherSuites) > 0 {
		if lo == tls.VersionTLS13 {
			problems = append(problems, fmt.Errorf("--cipher-suites: cannot be chosen when --tls-min-version is TLS1.3 (Go picks TLS 1.3's suites itself)"))
		}
		if _, err := tlsutil.GetCipherSuites(v.CipherSuites); err != nil {
			var valid []string
			for _, c := range tls.CipherSuites() {
				if !slices.Contains(c.SupportedVersions, tls.VersionTLS13) {
					valid = append(valid, c.Name)
				}
			}
			problems = append(problems, fmt.Errorf("--cipher-suites %s: %w; valid (TLS 1.2, Go's names): %s",
				strings.Join(v.CipherSuites, ","), err, strings.Join(valid, ",")))
		}
	}
	return errors.Join(problems...)
}

// Apply bounds c (nil: no TLS, nothing to do) by v, which Validate passed.
func (v TLSVersions) Apply(c *tls.Config) {
	if c == nil {
		return
	}
	if lo, err := tlsutil.GetTLSVersion(v.MinVersion); err == nil && lo != 0 {
		c.MinVersion = lo
	}
	if hi, err := tlsutil.GetTLSVersion(v.MaxVersion); err == nil && hi != 0 {
		c.MaxVersion = hi
	}
	if cs, err := tlsutil.GetCipherSuites(v.CipherSuites); err == nil && len(cs) > 0 {
		c.CipherSuites = cs
	}
}
