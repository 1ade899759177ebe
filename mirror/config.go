package mirror

import (
	"errors"
	"fmt"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/mirror/core"
)

// Config configures a mirror. The clients are the caller's.
type Config struct {
	Source, Dest *clientv3.Client
	// Settings are the operator's (core.Settings: `replica mirror`'s
	// flags, the one definition config.Mirror fills); Validate checks
	// them.
	core.Settings
	// CopyMirrored copies source keys that another mirror wrote into the
	// source (its checkpoint is in the source and its ownership record
	// says it wrote the key's version). False, the default, leaves them
	// out: copying another mirror's copy on is how mirror cycles start.
	// A failback sets Failback instead, which copies only the keys of
	// the mirror it fails back from.
	CopyMirrored bool
	// Clock drives the mirror's decisions and waits (checkpoint and commit
	// times, the progress cadence, backoff, the stall watchdog, the
	// cycle-check interval, the lag metrics, the list of the source's live
	// leases, the wait for a watch to be created); nil is the real clock.
	// Request timeouts are contexts, on the real clock.
	Clock clockwork.Clock
	// Progress, if not nil, is told of a full sync's progress.
	Progress func(copied, total int64)
	Logger   *zap.Logger
	// Registerer receives the metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

// Validate reports every missing or bad field: the settings' problems
// (each naming its flag) and the mirror's own.
func (c Config) Validate() error {
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf("mirror: "+format, a...)) }
	if c.Source == nil || c.Dest == nil {
		add("Source and Dest clients are required")
	}
	if c.Logger == nil {
		add("Logger is required")
	}
	return errors.Join(append(problems, c.Settings.Validate())...)
}
