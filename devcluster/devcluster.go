// Package devcluster runs a complete understudy deployment on loopback in one
// process, for trying understudy out: three voters and a replica, on the
// ports etcd's own Procfile uses.
package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/primary"
)

// Config says where the deployment keeps its data and where it reports.
type Config struct {
	// Dir holds every member's data and logs; empty means a temporary
	// directory, removed on exit.
	Dir string
	// Out receives the endpoints and the commands to try.
	Out io.Writer
	// Host is the address every member listens on (default 127.0.0.1).
	Host string
	// BasePort is the first voter's client port (default 2379); voters use
	// BasePort, +20000 and +30000 as etcd's Procfile does, peers +1, and the
	// replica BasePort+100.
	BasePort int
}

type voterSpec struct{ name, client, peer string }

func (c Config) voters() []voterSpec {
	var out []voterSpec
	for i, off := range []int{0, 20000, 30000} {
		p := c.BasePort + off
		out = append(out, voterSpec{
			name:   fmt.Sprintf("infra%d", i+1),
			client: fmt.Sprintf("http://%s:%d", c.Host, p),
			peer:   fmt.Sprintf("http://%s:%d", c.Host, p+1),
		})
	}
	return out
}

// Run starts the deployment, prints how to use it, and stops it cleanly
// when ctx ends.
func Run(ctx context.Context, cfg Config) (err error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.BasePort == 0 {
		cfg.BasePort = 2379
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "understudy-dev-")
		if err != nil {
			return fmt.Errorf("devcluster: %w", err)
		}
		defer os.RemoveAll(dir)
		cfg.Dir = dir
	}
	voters := cfg.voters()
	var ic []string
	for _, v := range voters {
		ic = append(ic, v.name+"="+v.peer)
	}

	// Start all voters concurrently: each waits for a quorum to be ready.
	type started struct {
		e   *embed.Etcd
		err error
	}
	results := make(chan started, len(voters))
	for _, v := range voters {
		pc, err := voterConfig(cfg.Dir, v, strings.Join(ic, ","))
		if err != nil {
			return err
		}
		go func() {
			e, err := primary.Start(ctx, pc)
			results <- started{e, err}
		}()
	}
	var members []*embed.Etcd
	var problems []error
	for range voters {
		r := <-results
		if r.err != nil {
			problems = append(problems, r.err)
			continue
		}
		members = append(members, r.e)
	}
	defer func() {
		for _, m := range members {
			m.Close()
		}
	}()
	if len(problems) > 0 {
		return fmt.Errorf("devcluster: voters did not start (ports %d, %d, %d in use?): %w",
			cfg.BasePort, cfg.BasePort+20000, cfg.BasePort+30000, errors.Join(problems...))
	}

	var eps []string
	for _, v := range voters {
		eps = append(eps, v.client)
	}
	printWelcome(cfg, eps)

	errs := make(chan error, len(members))
	for _, m := range members {
		go func() {
			select {
			case err := <-m.Err():
				errs <- err
			case <-m.Server.StopNotify():
				errs <- primary.ErrStopped
			case <-ctx.Done():
			}
		}()
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(cfg.Out, "stopping…")
		return nil
	case err := <-errs:
		return fmt.Errorf("devcluster: a voter failed: %w", err)
	}
}

func voterConfig(dir string, v voterSpec, initialCluster string) (config.Primary, error) {
	pc := config.DefaultPrimary()
	ec := pc.Etcd
	ec.Name = v.name
	ec.Dir = filepath.Join(dir, v.name+".etcd")
	ec.InitialCluster = initialCluster
	ec.InitialClusterToken = "understudy-dev"
	ec.LogOutputs = []string{filepath.Join(dir, v.name+".log")}
	ec.LogLevel = "warn"
	cu, err := url.Parse(v.client)
	if err != nil {
		return pc, fmt.Errorf("devcluster: %w", err)
	}
	pu, err := url.Parse(v.peer)
	if err != nil {
		return pc, fmt.Errorf("devcluster: %w", err)
	}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	return pc, nil
}

func printWelcome(cfg Config, voters []string) {
	w := cfg.Out
	fmt.Fprintf(w, "understudy dev deployment is up (data and logs in %s)\n\n", cfg.Dir)
	fmt.Fprintf(w, "  voters:   %s\n", strings.Join(voters, ","))
	fmt.Fprintf(w, "\nTry (etcdctl v3.7 is `go tool etcdctl` in this module):\n")
	fmt.Fprintf(w, "  go tool etcdctl --endpoints=%s member list -w table\n", strings.Join(voters, ","))
	fmt.Fprintf(w, "  go tool etcdctl --endpoints=%s put greeting hello\n", voters[0])
	fmt.Fprintf(w, "  go tool etcdctl --endpoints=%s get greeting\n", voters[0])
	fmt.Fprintf(w, "  go tool etcdctl --endpoints=%s endpoint status -w table\n", strings.Join(voters, ","))
	fmt.Fprintf(w, "\nCtrl-C stops everything.\n")
}
