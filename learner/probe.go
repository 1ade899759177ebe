package learner

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ErrPeerURLUnreachable means a learner's advertised peer URL does not lead
// to it. A learner dials the leader itself, so it catches up and looks
// healthy regardless; but the leader sends snapshots to the advertised URL,
// so such a learner breaks at the first snapshot. Better to fail at join.
var ErrPeerURLUnreachable = errors.New("learner: advertised peer URL does not reach this member")

// ProbePeerURL checks that url serves the peer API of a member of cluster
// (an etcd member answers GET /members with its cluster ID in a header). It
// retries until ctx ends, since the listener may still be starting.
// tlsCfg, for https peer URLs, is the member's peer TLS as a client.
func ProbePeerURL(ctx context.Context, url, cluster string, tlsCfg *tls.Config) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	var last error
	for {
		last = probeOnce(ctx, client, url, cluster)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s: %v", ErrPeerURLUnreachable, url, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func probeOnce(ctx context.Context, client *http.Client, url, cluster string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/members", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Etcd-Cluster-ID"); got != cluster {
		return fmt.Errorf("answered by cluster %q, not this cluster %q (another process on that address?)", got, cluster)
	}
	return nil
}
