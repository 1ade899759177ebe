package replica

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/understudy-kv/understudy/conn"
	"github.com/understudy-kv/understudy/learner"
	"github.com/understudy-kv/understudy/membership"
)

// ownPeerTLSFaults are the causes of a voter's peer URL not answering that
// lie with this replica's peer flags (or a voter's certificate) and that
// no wait cures; a voter that refuses this replica's certificate may take
// it in seconds (its address's DNS name, learner.PeersUnanswered).
var ownPeerTLSFaults = []error{conn.ErrUnknownAuthority, conn.ErrNameMismatch, conn.ErrBadCertificate,
	conn.ErrNoClientCert, conn.ErrPlainToTLS, conn.ErrTLSToPlain}

// checkPeers asks every voter's peer URL, with the replica's peer TLS and
// within dialTimeout, for GET /members as the learner's start will: a
// learner no voter answers on its peer URL is added, never starts, and is
// removed after --join-timeout. When none answers, and each for a cause of
// ownPeerTLSFaults (no --peer-trusted-ca-file, say), it refuses before
// the join, one line per cause, naming the voters' peer URLs.
func checkPeers(ctx context.Context, cfg learnerConfig, cl learner.Cluster) error {
	var urls []string
	for _, m := range cl.Members {
		if !m.IsLearner {
			urls = append(urls, m.PeerURLs...)
		}
	}
	if len(urls) == 0 {
		return nil
	}
	tc, err := clientTLS(cfg.PeerTLS, cfg.TLSVersions, urls)
	if err != nil {
		return err
	}
	hc := httpClient(tc)
	hc.Timeout = dialTimeout
	defer hc.CloseIdleConnections()
	errs := make([]error, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			if err := membership.PeerAnswers(ctx, hc, u, fmt.Sprintf("%x", cl.ID)); err != nil {
				errs[i] = peerFlags(cfg).Explain(u, err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil || !slices.Contains(ownPeerTLSFaults, conn.ClassOf(err)) {
			return nil
		}
	}
	return fmt.Errorf("replica: %w", conn.Group(errs...))
}

// peerFlags name the replica's peer TLS flags in an error about a voter's
// peer URL.
func peerFlags(cfg learnerConfig) conn.Flags {
	return conn.Flags{
		Credentials: conn.Credentials{CACert: cfg.PeerTLS.TrustedCAFile, Cert: cfg.PeerTLS.CertFile, Key: cfg.PeerTLS.KeyFile, DialTimeout: dialTimeout},
		Names: conn.Names{Endpoints: "voter peer URL", CACert: "--peer-trusted-ca-file", Cert: "--peer-cert-file", Key: "--peer-key-file",
			DialTimeout: "the replica's dial timeout"},
	}
}
