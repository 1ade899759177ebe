package replica

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/readpath"
)

// listenerSet is the replica's open client and metrics listeners, with the
// front's TLS configuration; closeUnserved closes them unless serve took
// them over.
type listenerSet struct {
	client, metrics []net.Listener
	tls             *tls.Config
	served          bool
}

func openListeners(cfg config.Front) (*listenerSet, error) {
	frontTLS, err := serverTLS(cfg.ClientTLS, cfg.TLSVersions, cfg.ListenClientURLs)
	if err != nil {
		return nil, err
	}
	client, err := listen("listen-client-urls", cfg.ListenClientURLs)
	if err != nil {
		return nil, err
	}
	metrics, err := listen("listen-metrics-urls", cfg.ListenMetricsURLs)
	if err != nil {
		closeAll(client)
		return nil, err
	}
	return &listenerSet{client: client, metrics: metrics, tls: frontTLS}, nil
}

func (ls *listenerSet) closeUnserved() {
	if !ls.served {
		closeAll(ls.client)
		closeAll(ls.metrics)
	}
}

// newFront builds the replica's etcd-compatible front on its member.
func newFront(lg *zap.Logger, cfg learnerConfig, srv *etcdserver.EtcdServer, cli *clientv3.Client, frontTLS *tls.Config, roleState *roleStatus, compaction *compaction, opts Options) (*readpath.Front, error) {
	rc := frontConfig(lg, cfg.Front, readpath.NewMember(srv, nil), frontTLS, opts)
	rc.RoleState, rc.Compaction = roleState.String, compaction.String
	if err := viaClient(cfg.Front, cli, &rc); err != nil {
		return nil, err
	}
	return readpath.New(rc)
}

// frontConfig is the front's configuration on src, from the replica's.
func frontConfig(lg *zap.Logger, cfg config.Front, src readpath.Source, frontTLS *tls.Config, opts Options) readpath.Config {
	return readpath.Config{
		TLS:             frontTLS,
		Source:          src,
		Logger:          lg.Named("readpath"),
		Registerer:      opts.Registerer,
		Clock:           opts.Clock,
		MaxStaleness:    cfg.MaxStaleness,
		MaxRequestBytes: cfg.MaxRequestBytes,
		ReadIndex:       cfg.ReadIndex,
		Zone:            cfg.Zone,
		AnswerHeaders:   cfg.FreshnessHeaders,
		EnablePprof:     cfg.EnablePprof || cfg.LogLevel == "debug",
		Ready:           readpath.ReadyConfig{MaxLag: cfg.ReadyMaxLag, MaxStaleness: cfg.ReadyStaleness()},
		KeepAlive:       readpath.KeepAlive{MinTime: cfg.GRPCKeepAliveMinTime, Interval: cfg.GRPCKeepAliveInterval, Timeout: cfg.GRPCKeepAliveTimeout},
	}
}

// viaClient is how the front asks --read-index-via hubs: TLS as towards the
// cluster, and with --user a login token for hubs with auth on.
func viaClient(cfg config.Front, cli *clientv3.Client, rc *readpath.Config) error {
	if len(cfg.ReadIndex.ViaURLs) == 0 {
		return nil
	}
	viaTLS, err := clientTLS(cfg.ClientTLS, cfg.TLSVersions, cfg.ReadIndex.ViaURLs)
	if err != nil {
		return err
	}
	rc.ViaClient = &http.Client{Transport: &http.Transport{TLSClientConfig: viaTLS, MaxIdleConnsPerHost: max(4, cfg.ReadIndex.ViaInFlight)}}
	if user, password := cfg.Credentials(); user != "" {
		rc.ViaToken = func(ctx context.Context) (string, error) {
			resp, err := cli.Auth.Authenticate(ctx, user, password)
			if errors.Is(err, rpctypes.ErrAuthNotEnabled) {
				return "", nil
			}
			if err != nil {
				return "", fmt.Errorf("replica: logging in as --user %s for --read-index-via: %w", user, err)
			}
			return resp.Token, nil
		}
	}
	return nil
}
