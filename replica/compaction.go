package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/pkg/v3/traceutil"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3compactor"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/autocompact"
)

const (
	// compactionSampleInterval is how often the store's compacted
	// revision is looked at: a compaction's time is known to that.
	compactionSampleInterval = 100 * time.Millisecond
	// rememberedCompactionFile, in the member's directory (data-dir/member,
	// which goes with the member), keeps a learned policy across restarts:
	// a promoted replica that leads sees no compactions but its own.
	rememberedCompactionFile = "understudy-compaction.json"
)

// compaction learns the voters' auto-compaction from the compactions the
// member applies (package autocompact decides) and, for a replica given no
// --auto-compaction-* flags, runs etcd's own compactor (v3compactor, as
// etcd's server builds it from those flags) with what it learned, paused
// unless this member leads, as etcd pauses its own: one compactor, and it
// compacts only on the leader. Given the flags, etcd's compactor runs them
// and this one runs none. It publishes its choice for the front (probe
// answers, `replica status`), a metric and the log, and keeps a learned
// policy in the member's directory.
type compaction struct {
	lg    *zap.Logger
	srv   *etcdserver.EtcdServer
	clock clockwork.Clock
	flags autocompact.Policy
	path  string

	learner    autocompact.Learner
	remembered autocompact.Remembered
	cur        atomic.Pointer[autocompact.Choice]

	// compactor runs running, resumed while this member leads.
	compactor v3compactor.Compactor
	running   autocompact.Policy
	resumed   bool

	policy    *prometheus.GaugeVec
	seen      prometheus.Counter
	runningG  prometheus.Gauge
	published autocompact.Choice
}

func newCompaction(lg *zap.Logger, cfg learnerConfig, srv *etcdserver.EtcdServer, clock clockwork.Clock, reg prometheus.Registerer) (*compaction, error) {
	flags, err := autocompact.FromFlags(cfg.AutoCompactionMode, cfg.AutoCompactionRetention)
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	c := &compaction{lg: lg, srv: srv, clock: clock, flags: flags, path: filepath.Join(cfg.DataDir, "member", rememberedCompactionFile),
		policy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "understudy_replica_compaction_policy",
			Help: "1 for the auto-compaction this replica runs once promoted and leading: its source (flags, learned, remembered, none), mode and retention."},
			[]string{"source", "mode", "retention"}),
		seen: prometheus.NewCounter(prometheus.CounterOpts{Name: "understudy_replica_compactions_seen_total",
			Help: "Compactions this member applied (its store's compacted revision moved): what the voters' auto-compaction is learned from."}),
		runningG: prometheus.NewGauge(prometheus.GaugeOpts{Name: "understudy_replica_compactor_running",
			Help: "1 while this replica runs etcd's compactor with a learned policy and leads (the compactor is paused otherwise), else 0."}),
	}
	if reg != nil {
		reg.MustRegister(c.policy, c.seen, c.runningG)
	}
	c.remembered = c.load()
	c.step()
	return c, nil
}

// String is the choice for people ("learned periodic 5s: …").
func (c *compaction) String() string {
	if ch := c.cur.Load(); ch != nil {
		return ch.String()
	}
	return ""
}

// run looks at the store every compactionSampleInterval until ctx ends,
// then stops the compactor.
func (c *compaction) run(ctx context.Context) {
	tick := c.clock.NewTicker(compactionSampleInterval)
	defer tick.Stop()
	defer c.stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
			c.step()
		}
	}
}

// step samples the store, decides, then acts: publishes the choice,
// remembers a learned policy, runs, pauses or resumes the compactor.
func (c *compaction) step() {
	tr := c.srv.KV().Read(mvcc.SharedBufReadTxMode, traceutil.TODO())
	s := autocompact.Sample{At: c.clock.Now(), Compacted: tr.FirstRev(), Head: tr.Rev()}
	tr.End()
	if c.learner.Observe(s) {
		c.seen.Inc()
	}
	learned := c.learner.Learned()
	ch := autocompact.Choose(c.flags, learned, c.remembered, c.running)
	c.publish(ch)
	if ch.Source == autocompact.SourceLearned && ch.Run != c.remembered.Policy {
		c.remembered = autocompact.Remembered{Policy: ch.Run, At: s.At, Why: learned.Why}
		c.save()
	}
	if ch.Source == autocompact.SourceFlags {
		return // etcd's own compactor runs the flags
	}
	if ch.Run != c.running {
		c.stop()
		c.start(ch.Run)
	}
	leading := !c.srv.IsLearner() && c.srv.Lead() == uint64(c.srv.MemberID())
	if c.compactor != nil && leading != c.resumed {
		if leading {
			c.compactor.Resume()
			c.lg.Info("this member leads: compacting with the learned auto-compaction", zap.Stringer("policy", c.running))
		} else {
			c.compactor.Pause()
		}
		c.resumed = leading
		c.runningG.Set(0)
		if leading {
			c.runningG.Set(1)
		}
	}
}

// publish makes ch the current choice; a new source or policy is logged
// and changes the metric's labels.
func (c *compaction) publish(ch autocompact.Choice) {
	c.cur.Store(&ch)
	prev := c.published
	if prev.Source == ch.Source && prev.Run == ch.Run && (prev.Detail == "") == (ch.Detail == "") && prev.Source != "" {
		return
	}
	c.published = ch
	if prev.Source != "" {
		c.policy.DeleteLabelValues(prev.Source, prev.Run.Mode, prev.Run.RetentionText())
	}
	c.policy.WithLabelValues(ch.Source, ch.Run.Mode, ch.Run.RetentionText()).Set(1)
	log := c.lg.Info
	if ch.Source == autocompact.SourceFlags && ch.Detail != "" {
		log = c.lg.Warn // the flags are not what the voters seem to run
	}
	log("auto-compaction once promoted and leading", zap.String("source", ch.Source), zap.Stringer("policy", ch.Run), zap.String("detail", ch.Detail))
}

// start runs etcd's compactor with p, paused until this member leads
// (step resumes it). etcd's server builds its own from the flags the same
// way; it has none here, as no flags were given.
func (c *compaction) start(p autocompact.Policy) {
	c.running = p
	if p.Off() {
		return
	}
	mode, retention := p.CompactorArgs()
	cp, err := v3compactor.New(c.lg.Named("compactor"), mode, retention, c.srv.KV(), c.srv)
	if err != nil {
		c.lg.Warn("cannot run etcd's compactor with the learned auto-compaction", zap.Stringer("policy", p), zap.Error(err))
		return
	}
	cp.Pause()
	cp.Run()
	c.compactor, c.resumed = cp, false
}

// stop stops the compactor, if one runs.
func (c *compaction) stop() {
	if c.compactor != nil {
		c.compactor.Stop()
		c.compactor, c.resumed = nil, false
		c.runningG.Set(0)
	}
	c.running = autocompact.Policy{}
}

// remembered is the file a learned policy is kept in.
type remembered struct {
	Mode      string    `json:"mode"`
	Retention string    `json:"retention"`
	LearnedAt time.Time `json:"learned_at"`
	Why       string    `json:"why,omitempty"`
}

// load reads the policy learned before a restart, if any.
func (c *compaction) load() autocompact.Remembered {
	b, err := os.ReadFile(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return autocompact.Remembered{}
	}
	var r remembered
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	var p autocompact.Policy
	if err == nil {
		p, err = autocompact.FromFlags(r.Mode, r.Retention)
	}
	if err != nil {
		c.lg.Warn("ignoring the auto-compaction learned before (learning it again)", zap.String("file", c.path), zap.Error(err))
		return autocompact.Remembered{}
	}
	return autocompact.Remembered{Policy: p, At: r.LearnedAt, Why: r.Why}
}

// save keeps the learned policy (written aside, then renamed in place).
func (c *compaction) save() {
	r := c.remembered
	b, _ := json.Marshal(remembered{Mode: r.Policy.Mode, Retention: r.Policy.RetentionText(), LearnedAt: r.At.UTC(), Why: r.Why})
	tmp := c.path + ".tmp"
	err := os.WriteFile(tmp, b, 0o600)
	if err == nil {
		err = os.Rename(tmp, c.path)
	}
	if err != nil {
		c.lg.Warn("cannot keep the learned auto-compaction for the next start", zap.String("file", c.path), zap.Error(err))
	}
}
