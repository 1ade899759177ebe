package main

import (
	"github.com/understudy-kv/understudy/test/harness"

	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/understudy-kv/understudy/compare"
	"github.com/understudy-kv/understudy/config"
)

// compareFaults are the `replica compare` runs of the consistency
// scenario: a quick run measures without a fault and under a replica
// partition, a full run under every fault.
func compareFaults(quick bool) []config.Fault {
	if quick {
		return []config.Fault{config.FaultNone, config.FaultReplicaPartition}
	}
	return config.Faults
}

// compareScenario runs `replica compare`'s measurement on its local
// topology once per fault, writes every run's tables and plots into doc
// (CONSISTENCY.md), and returns
// one row per path and run: reads, failed reads, and staleness at read time
// as p50 and p99. The plots go under docs/consistency/<fault>/ beside doc.
func compareScenario(quick bool, doc string) ([]Row, error) {
	cfg := config.DefaultCompare()
	cfg.Local = true
	if quick {
		cfg.Duration = 10 * time.Second
	}
	dir := filepath.Join(filepath.Dir(doc), "docs", strings.ToLower(strings.TrimSuffix(filepath.Base(doc), filepath.Ext(doc))))
	var (
		rows []Row
		md   strings.Builder
	)
	fmt.Fprintf(&md, "# Consistency: learner replica vs mirror, side by side\n\n")
	fmt.Fprintf(&md, "Written by `go run ./test/bench` (scenario `compare`; `--only compare` runs it alone) on %s; nothing here is edited by hand. "+
		"Each section is one `replica compare --local` run (3 voters, a replica, `replica mirror` into a second cluster, on 127.0.0.1; "+
		"`replica compare --help` says what each number means), the fault injected a third of the way in for a third of the run.\n",
		time.Now().UTC().Format(time.RFC3339))
	for _, f := range compareFaults(quick) {
		cfg.Fault = f
		out := filepath.Join(dir, string(f))
		var a *compare.Analysis
		err := scenario("compare "+string(f), func(r *runner) {
			l, err := compare.StartLocal(harness.NewEnv(r), harness.Binaries(r), cfg.Prefix)
			if err != nil {
				r.Fatalf("%v", err)
			}
			inj, err := l.Injector(f)
			if err != nil {
				r.Fatalf("%v", err)
			}
			a, err = compare.Measure(context.Background(), cfg, l.Clients(), inj, compare.Options{})
			if err != nil {
				r.Fatalf("%v", err)
			}
		})
		if err != nil {
			return rows, err
		}
		if err := a.WriteFiles(out); err != nil {
			return rows, err
		}
		fmt.Fprintf(&md, "\n## Fault: %s\n\n", f)
		if err := a.Markdown(&md); err != nil {
			return rows, err
		}
		rel, err := filepath.Rel(filepath.Dir(doc), out)
		if err != nil {
			return rows, err
		}
		rel = filepath.ToSlash(rel)
		fmt.Fprintf(&md, "\n![staleness over time, %s](%s/staleness-time.svg)\n\n![staleness distribution, %s](%s/staleness-cdf.svg)\n", f, rel, f, rel)
		for _, p := range a.Paths {
			ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
			rows = append(rows, Row{Scenario: "compare", Name: fmt.Sprintf("%s, fault %s", p.Path, f), Result: Result{
				Ops: p.Run.Reads - p.Run.Errors, Errors: p.Run.Errors, Seconds: a.Config.DurationS,
				Throughput: float64(p.Run.Reads-p.Run.Errors) / a.Config.DurationS,
				P50:        ms(p.Run.StalenessMS.P50), P99: ms(p.Run.StalenessMS.P99),
			}})
		}
		fmt.Fprintf(os.Stderr, "  [compare] %s: done\n", f)
	}
	if err := os.WriteFile(doc, []byte(md.String()), 0o644); err != nil {
		return rows, fmt.Errorf("compare: %w", err)
	}
	return rows, nil
}
