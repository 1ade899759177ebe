package membership

import (
	"fmt"
	"net/http"
	"time"

	"github.com/understudy-kv/understudy/conn"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Dial returns a client for c and an HTTP client with the same TLS, for
// the leader's /debug/vars.
func Dial(c conn.Flags) (*clientv3.Client, *http.Client, error) {
	if err := c.Validate(""); err != nil {
		return nil, nil, err
	}
	cfg, err := c.ClientConfig(nil)
	if err != nil {
		return nil, nil, err
	}
	tc := cfg.TLS
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("membership: client for %v: %w", c.Endpoints, err)
	}
	return cli, &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}, nil
}
