package logging

import (
	"fmt"
	"sync/atomic"

	"go.etcd.io/etcd/client/pkg/v3/logutil"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Member gives ec, a member of kind, etcd's own logger (etcd's format and
// sampling, at ec.LogLevel, to ec.LogOutputs: "default" and "stderr" are
// stderr, "stdout" stdout, anything else a file) with the rules of kind
// (rules.go). etcd builds it in StartEtcd, from ec as it is then.
func Member(ec *embed.Config, kind Kind) {
	ec.ZapLoggerBuilder = func(cfg *embed.Config) error {
		var outputs []string
		for _, o := range cfg.LogOutputs {
			switch o {
			case embed.DefaultLogOutput, embed.StdErrLogOutput:
				o = "stderr"
			case embed.StdOutLogOutput:
				o = "stdout"
			case embed.JournalLogOutput:
				return fmt.Errorf("logging: member %q: --log-outputs journal is not supported for an embedded member", cfg.Name)
			}
			outputs = append(outputs, o)
		}
		zc := logutil.DefaultZapLoggerConfig
		zc.Level = zap.NewAtomicLevelAt(logutil.ConvertToZapLevel(cfg.LogLevel))
		if len(outputs) > 0 {
			zc.OutputPaths, zc.ErrorOutputPaths = outputs, outputs
		}
		lg, err := zc.Build(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return newRuleCore(c, kind, len(cfg.ListenClientUrls) == 0)
		}))
		if err != nil {
			return fmt.Errorf("logging: member %q: %w", cfg.Name, err)
		}
		return embed.NewZapLoggerBuilder(lg)(cfg)
	}
}

// ruleCore logs the lines its rules name at the rules' levels, and the
// others as the core it wraps does.
type ruleCore struct {
	zapcore.Core
	rules     map[string]rule
	noClients bool
	closing   *atomic.Bool // shared by the cores With derives
}

func newRuleCore(c zapcore.Core, kind Kind, noClients bool) *ruleCore {
	return &ruleCore{Core: c, rules: rulesFor(kind), noClients: noClients, closing: &atomic.Bool{}}
}

// Enabled lets every info line through to Check, which watches for
// closingMsg whatever the member's level.
func (c *ruleCore) Enabled(l zapcore.Level) bool {
	return l >= zapcore.InfoLevel || c.Core.Enabled(l)
}

func (c *ruleCore) With(fields []zapcore.Field) zapcore.Core {
	cc := *c
	cc.Core = c.Core.With(fields)
	return &cc
}

func (c *ruleCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Message == closingMsg {
		c.closing.Store(true)
	}
	if _, ok := c.rules[e.Message]; ok {
		// Decided in Write, which sees the fields.
		return ce.AddCore(e, c)
	}
	return c.Core.Check(e, ce)
}

func (c *ruleCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	if r, ok := c.rules[e.Message]; ok && (r.when == nil || r.when(c.situation(fields))) {
		e.Level, e.Stack = r.level, ""
	}
	if !c.Core.Enabled(e.Level) {
		return nil
	}
	return c.Core.Write(e, fields)
}

func (c *ruleCore) situation(fields []zapcore.Field) situation {
	s := situation{closing: c.closing.Load(), noClients: c.noClients}
	for _, f := range fields {
		if f.Key == "error" && f.Type == zapcore.ErrorType {
			s.err, _ = f.Interface.(error)
		}
	}
	return s
}
