// Command bench measures understudy side by side with stock etcd, in one run
// on one machine with one load generator, and writes BENCHMARKS.md (ratios
// first, then absolute figures) and BENCHMARKS.json (the raw figures).
//
//	go run ./test/bench            # full run, under 20 minutes on 2 cores
//	go run ./test/bench --quick    # about two minutes, while developing
//
// It builds what it needs (etcd, primary, replica), starts every topology
// itself on 127.0.0.1 ports picked at run time, and stops everything.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	quick := flag.Bool("quick", false, "short runs with fewer watchers and less data (about two minutes)")
	out := flag.String("out", "BENCHMARKS.md", "report to write")
	raw := flag.String("json", "BENCHMARKS.json", "raw figures to write")
	only := flag.String("only", "", "run only this scenario: generator, reads, writes, watch, catchup, mirror, idle or compare")
	consistency := flag.String("consistency", "CONSISTENCY.md", "where the compare scenario writes its tables (its plots go in docs/consistency/ beside it)")
	replicaArgs := flag.String("replica-args", "", "extra flags for every replica, space-separated (for tuning experiments; recorded in the report)")
	render := flag.Bool("render", false, "run nothing: write the report again from the raw figures (--json) of an earlier run, after a change to how it is written")
	flag.Parse()

	if *render {
		if err := rerender(*raw, *out); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	p, mode := fullParams(), "full"
	if *quick {
		p, mode = quickParams(), "quick"
	}
	p.replicaArgs = strings.Fields(*replicaArgs)
	start := time.Now()
	rep := report{Mode: mode, Params: p.describe(), Started: start.UTC().Format(time.RFC3339), Machine: machine()}
	for _, s := range []struct {
		name string
		run  func(params) ([]Row, error)
	}{
		{"generator", generatorScenario},
		{"reads", readScenario},
		{"writes", writeScenario},
		{"watch", watchScenario},
		{"catchup", catchupScenario},
		{"mirror", mirrorScenario},
		{"idle", idleScenario},
		{"compare", func(params) ([]Row, error) { return compareScenario(*quick, *consistency) }},
	} {
		if *only != "" && *only != s.name {
			continue
		}
		fmt.Fprintf(os.Stderr, "== %s\n", s.name)
		rows, err := s.run(p)
		rep.Rows = append(rep.Rows, rows...)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scenario %s failed: %v\n", s.name, err)
			rep.Failures = append(rep.Failures, err.Error())
		}
	}
	rep.Seconds = time.Since(start).Seconds()

	if err := os.WriteFile(*out, []byte(rep.markdown()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(*raw, append(b, '\n'), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "wrote %s and %s in %v\n", *out, *raw, time.Since(start).Round(time.Second))
	if len(rep.Failures) > 0 {
		os.Exit(1)
	}
}

// rerender writes the report at out from the raw figures at raw.
func rerender(raw, out string) error {
	b, err := os.ReadFile(raw)
	if err != nil {
		return fmt.Errorf("--render: %w", err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("--render: %s is not a report's raw figures: %w", raw, err)
	}
	if len(rep.Rows) == 0 {
		return fmt.Errorf("--render: %s has no rows", raw)
	}
	return os.WriteFile(out, []byte(rep.markdown()), 0o644)
}
