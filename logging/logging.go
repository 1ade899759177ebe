// Package logging is understudy's log format and the loggers of the etcd
// members it embeds. Every line a replica, a cascaded replica or a mirror
// logs is etcd's JSON (logutil.DefaultZapLoggerConfig: "ts" in ISO 8601 with
// microseconds, durations as strings), understudy's own lines and its
// embedded members' alike, so that one process's log reads as one. A member's
// logger (Member) is etcd's own, but logs at a lower level the lines a
// replica expects (a listener etcd closed on a clean stop) or whose advice
// does not apply to its member (rules.go).
package logging

import (
	"fmt"

	"go.etcd.io/etcd/client/pkg/v3/logutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New is understudy's logger at level (debug, info, warn or error), in
// etcd's JSON format, unsampled, writing to outputs (zap output paths: a
// file, "stderr" or "stdout"; none means stderr).
func New(level string, outputs ...string) (*zap.Logger, error) {
	zc, err := config(level, outputs)
	if err != nil {
		return nil, err
	}
	lg, err := zc.Build()
	if err != nil {
		return nil, fmt.Errorf("logging: %w", err)
	}
	return lg, nil
}

// config is etcd's logger configuration at level to outputs, without
// etcd's sampling: understudy's lines are few, and each is meant.
func config(level string, outputs []string) (zap.Config, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return zap.Config{}, fmt.Errorf("logging: level %q (want debug, info, warn or error): %w", level, err)
	}
	zc := logutil.DefaultZapLoggerConfig
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.Sampling = nil
	if len(outputs) == 0 {
		outputs = []string{"stderr"}
	}
	zc.OutputPaths, zc.ErrorOutputPaths = outputs, outputs
	return zc, nil
}
