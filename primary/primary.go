// Package primary runs one voting etcd member through etcd's embed package,
// configured by etcd's own flags (see config.Primary).
package primary

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/understudy-kv/understudy/config"
)

// ErrStopped is returned by Run when the member stopped on its own.
var ErrStopped = errors.New("primary: member stopped")

// Start starts the member and waits until it has joined its cluster and can
// serve, or ctx ends. The caller must Close the returned member.
func Start(ctx context.Context, cfg config.Primary) (*embed.Etcd, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(cfg.Etcd)
	if err != nil {
		return nil, fmt.Errorf("primary: start member %q: %w", cfg.Etcd.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("primary: member %q failed while starting: %w", cfg.Etcd.Name, err)
	case <-e.Server.StopNotify():
		e.Close()
		return nil, fmt.Errorf("primary: member %q stopped while starting: %w", cfg.Etcd.Name, ErrStopped)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("primary: member %q not ready: %w", cfg.Etcd.Name, ctx.Err())
	}
}

// Run starts the member and serves until ctx is done (a clean stop, nil) or
// the member fails.
func Run(ctx context.Context, cfg config.Primary) error {
	e, err := Start(ctx, cfg)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	defer e.Close()
	select {
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return fmt.Errorf("primary: member %q: %w", cfg.Etcd.Name, err)
	case <-e.Server.StopNotify():
		// A member removed from the cluster stops itself.
		return fmt.Errorf("primary: member %q: %w (removed from the cluster?)", cfg.Etcd.Name, ErrStopped)
	}
}
