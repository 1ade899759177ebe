package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/jonboulle/clockwork"
	"github.com/mattn/go-isatty"

	"github.com/understudy-kv/understudy/compare"
	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/logging"
)

const compareUsage = `replica compare: read the same keys through every path at once — linearizable
reads through the voters (leader), the replica's strong, weak and bounded reads,
and a mirror's destination — while one writer puts through the primary, and
show how stale, how ordered and how correct each path was, measured against
the writer's own acknowledged history.

Usage:
  replica compare --local [--duration 20s] [--fault replica-partition|mirror-kill|leader-kill]
      starts 3 voters, a replica and a mirror into a second cluster on
      127.0.0.1, from this replica and the primary installed beside it (or
      on $PATH), runs, tears down
  replica compare --primary URL[,URL…] --replica URL --mirror-dest URL[,URL…] [--prefix P]
      existing clusters; a mirror must copy --prefix into --mirror-dest under
      the same names. compare writes only under --prefix, which must be
      empty, and deletes it when done.

It prints a table (--json: the report as JSON) and writes report.json,
table.md and plots (staleness distribution and staleness over time per path,
PNG and SVG) into --out.

Settings come from, highest first: flags, UNDERSTUDY_<FLAG> environment
variables (UNDERSTUDY_PASSWORD is --password, kept out of ps), the
--config-file YAML (keys are flag names), then defaults.

Flags:
`

func runCompare(ctx context.Context, clock clockwork.Clock, args []string, stdout, stderr io.Writer) int {
	cfg := config.DefaultCompare()
	fs := config.NewCompareFlags(&cfg)
	err := config.LoadCompare(&cfg, fs, args)
	if errors.Is(err, config.ErrHelp) {
		fmt.Fprint(stdout, compareUsage)
		config.PrintFlags(stdout, fs)
		return 0
	}
	if err = errors.Join(err, cfg.Validate()); err != nil {
		printProblems(stderr, err)
		return 2
	}
	lg, err := logging.New(cfg.LogLevel)
	if err != nil {
		printProblems(stderr, err)
		return 2
	}
	defer lg.Sync()
	// The local topology writes to stderr only when a --local run fails:
	// the end of each of its processes' logs.
	opts := compare.Options{Stdout: stdout, Logger: lg, HarnessLog: stderr, Clock: clock}
	if f, ok := stderr.(*os.File); ok && !cfg.JSON && isatty.IsTerminal(f.Fd()) {
		opts.Progress = stderr
	}
	if _, err := compare.Run(ctx, cfg, opts); err != nil {
		printProblems(stderr, err)
		return 1
	}
	return 0
}
