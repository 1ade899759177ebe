// Command summary reads `go test -json` of the storage suite from stdin
// and prints, per target, how many of the suite's cases passed, as a
// Markdown table, and which of its tests failed:
//
//	go test -json -run TestStorageConformance -targets cascaded,replica,voter,grpc-proxy . | go run ./summary
//
// With -json it prints the same as a JSON array of Target (the bench's
// storage-suite scenario reads it).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is the part of a test2json event summary reads.
type event struct {
	Action string
	Test   string
}

// tally is one target's cases: leaf tests by outcome, and the suite's
// tests (TestStorageConformance/<target>/<part>/<test>) that failed.
type tally struct {
	passed, failed, skipped int
	failedTests             []string
}

// Target is one target's tally, as -json prints it.
type Target struct {
	Target      string   `json:"target"`
	Passed      int      `json:"passed"`
	Failed      int      `json:"failed"`
	Skipped     int      `json:"skipped"`
	FailedTests []string `json:"failed_tests"`
}

func main() {
	asJSON := flag.Bool("json", false, "print a JSON array of {target, passed, failed, skipped, failed_tests} instead of a Markdown table")
	flag.Parse()
	tallies, order, err := read(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(1)
	}
	if len(order) == 0 {
		fmt.Fprintln(os.Stderr, "summary: no TestStorageConformance cases on stdin; pipe `go test -json -run TestStorageConformance .` into it")
		os.Exit(1)
	}
	if *asJSON {
		out := []Target{}
		for _, name := range order {
			t := tallies[name]
			out = append(out, Target{Target: name, Passed: t.passed, Failed: t.failed, Skipped: t.skipped, FailedTests: append([]string{}, t.failedTests...)})
		}
		if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
			fmt.Fprintln(os.Stderr, "summary:", err)
			os.Exit(1)
		}
		return
	}
	fmt.Println("| target | cases passed | failed | skipped | the suite's tests that failed |")
	fmt.Println("|---|---:|---:|---:|---|")
	for _, name := range order {
		t := tallies[name]
		failed := strings.Join(t.failedTests, ", ")
		if failed == "" {
			failed = "none"
		}
		fmt.Printf("| %s | %d of %d | %d | %d | %s |\n", name, t.passed, t.passed+t.failed, t.failed, t.skipped, failed)
	}
}

// read tallies the leaf tests of each target, in the order the targets
// first appear.
func read(r io.Reader) (map[string]*tally, []string, error) {
	outcome := map[string]string{}
	parents := map[string]bool{}
	var tests []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line go test printed outside test2json
		}
		parts := strings.Split(e.Test, "/")
		if parts[0] != "TestStorageConformance" || len(parts) < 2 {
			continue
		}
		switch e.Action {
		case "run":
			tests = append(tests, e.Test)
			for i := 2; i < len(parts); i++ {
				parents[strings.Join(parts[:i], "/")] = true
			}
		case "pass", "fail", "skip":
			outcome[e.Test] = e.Action
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("reading stdin: %w", err)
	}
	tallies := map[string]*tally{}
	var order []string
	for _, name := range tests {
		parts := strings.Split(name, "/")
		target := parts[1]
		t, ok := tallies[target]
		if !ok {
			t = &tally{}
			tallies[target] = t
			order = append(order, target)
		}
		if parents[name] || len(parts) < 3 {
			continue
		}
		switch outcome[name] {
		case "pass":
			t.passed++
		case "skip":
			t.skipped++
		default: // failed, or never ended (a panic or a timeout)
			t.failed++
			test := strings.Join(parts[2:min(len(parts), 5)], "/")
			if !slices.Contains(t.failedTests, test) {
				t.failedTests = append(t.failedTests, test)
			}
		}
	}
	return tallies, order, nil
}
