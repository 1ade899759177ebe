package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

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

Flags:
`

func runCompare(ctx context.Context, clock clockwork.Clock, args []string, stdout, stderr io.Writer) int {
	cfg := compare.DefaultConfig()
	var jsonOut bool
	var logLevel string
	fs := flag.NewFlagSet("replica compare", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	urls := func(dst *[]string) func(string) error {
		return func(s string) error { *dst = strings.Split(s, ","); return nil }
	}
	e := &cfg.Endpoints
	fs.BoolVar(&cfg.Local, "local", cfg.Local, "Start a topology of its own on 127.0.0.1 (3 voters, a replica, a mirror into a second cluster) and remove it afterwards.")
	fs.Func("primary", "Voters' client URLs, comma-separated: the writer and the leader path.", urls(&e.Primary))
	fs.Func("replica", "The replica's client URL.", urls(&e.Replica))
	fs.Func("mirror-dest", "Client URLs of the cluster a mirror copies --prefix into.", urls(&e.MirrorDest))
	fs.Func("cascaded", "A cascaded replica's client URL (optional): the cascaded-strong and cascaded-weak paths.", urls(&e.Cascaded))
	e.Credentials.Register(fs, "", "the members'")
	fs.StringVar(&cfg.Prefix, "prefix", cfg.Prefix, "Key prefix compare owns: must be empty; deleted when done.")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "How long the workload runs, fault included.")
	fs.IntVar(&cfg.Rate, "rate", cfg.Rate, "The writer's puts per second.")
	fs.IntVar(&cfg.Keys, "keys", cfg.Keys, "Keys the writer cycles through; every read reads them all.")
	fs.IntVar(&cfg.Readers, "readers", cfg.Readers, "Concurrent readers on each path.")
	fs.IntVar(&cfg.ReadRate, "read-rate", cfg.ReadRate, "Reads per second of each reader.")
	fs.DurationVar(&cfg.Bound, "bound", cfg.Bound, "Staleness bound the replica-bounded path asks for (understudy-max-staleness).")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", cfg.RequestTimeout, "Timeout of every request.")
	fs.Func("fault", "With --local: none, replica-partition, mirror-kill, leader-kill or quorum-loss.", func(s string) error { cfg.Fault = compare.Fault(s); return nil })
	fs.DurationVar(&cfg.FaultAt, "fault-at", cfg.FaultAt, "When the fault starts (default a third of --duration).")
	fs.DurationVar(&cfg.FaultDuration, "fault-duration", cfg.FaultDuration, "How long the fault lasts (default a third of --duration).")
	fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, "After the workload, how long to wait for the watches to deliver the last write before counting what is missing as lost.")
	fs.DurationVar(&cfg.CheckTimeout, "check-timeout", cfg.CheckTimeout, "Bound on porcupine's search per path; past it the verdict is unknown.")
	fs.StringVar(&cfg.Out, "out", cfg.Out, "Directory for report.json, table.md and the plots; empty writes none.")
	fs.StringVar(&cfg.Doc, "doc", "", "Markdown file whose block between <!-- replica compare: begin … --> and <!-- replica compare: end --> is rewritten with this run's tables and plots (docs/compare.md's section is made so).")
	fs.BoolVar(&jsonOut, "json", false, "Print the report as JSON instead of tables (no progress bar).")
	fs.StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, compareUsage)
			config.PrintFlags(stdout, fs)
			return 0
		}
		fmt.Fprintf(stderr, "replica compare: %v (replica compare --help lists the flags)\n", err)
		return 2
	}
	if e.Password == "" {
		e.Password = os.Getenv("UNDERSTUDY_PASSWORD") // --password wins; the environment keeps it out of ps
	}
	cfg.Command = "replica compare " + strings.Join(args, " ")
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "replica compare: %q: unexpected argument\n", fs.Arg(0))
		return 2
	}
	if err := cfg.Validate(); err != nil {
		printProblems(stderr, err)
		return 2
	}
	lg, err := logging.New(logLevel)
	if err != nil {
		printProblems(stderr, err)
		return 2
	}
	defer lg.Sync()
	// The local topology writes to stderr only when a --local run fails:
	// the end of each of its processes' logs.
	opts := compare.Options{Stdout: stdout, JSON: jsonOut, Logger: lg, HarnessLog: stderr, Clock: clock}
	if f, ok := stderr.(*os.File); ok && !jsonOut && isatty.IsTerminal(f.Fd()) {
		opts.Progress = stderr
	}
	if _, err := compare.Run(ctx, cfg, opts); err != nil {
		printProblems(stderr, err)
		return 1
	}
	return 0
}
