package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// storageSuiteID is the storage-suite scenario's Row.Scenario.
const storageSuiteID = "storage-suite"

// storageSuiteDir is Kubernetes' storage suite's module (test/conformance,
// a module of its own so that understudy's does not depend on
// k8s.io/apiserver), from the checkout's root, where the bench runs.
const storageSuiteDir = "test/conformance"

// storageSuiteTargets are the fronts the scenario runs the suite against,
// in one run: the two the user picks between (issue 58), and a learner
// replica and a stock voter beside them.
const storageSuiteTargets = "cascaded,grpc-proxy,replica,voter"

// storageTarget is one target's tally, as test/conformance/summary -json
// prints it.
type storageTarget struct {
	Target      string   `json:"target"`
	Passed      int      `json:"passed"`
	Failed      int      `json:"failed"`
	Skipped     int      `json:"skipped"`
	FailedTests []string `json:"failed_tests"`
}

// storageSuiteScenario runs Kubernetes' storage suite (kube-apiserver's
// etcd3 store against each front; CONTRIBUTING) once against every
// target, and gives a row per target: ops = cases passed, errors = cases
// failed, the suite's tests that failed in its note. A fact for users, not
// a goal: the suite's cases fail where a front is not etcd's equal
// (grpc-proxy's, where etcd's issues say so).
func storageSuiteScenario(params) ([]Row, error) {
	if _, err := os.Stat(filepath.Join(storageSuiteDir, "go.mod")); err != nil {
		return nil, fmt.Errorf("storage suite: %s: %w (run the bench from the checkout's root)", storageSuiteDir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	start := time.Now()
	test := exec.CommandContext(ctx, "go", "test", "-json", "-count=1", "-timeout", "30m",
		"-run", "TestStorageConformance", ".", "-targets", storageSuiteTargets)
	test.Dir = storageSuiteDir
	var events, stderr bytes.Buffer
	test.Stdout, test.Stderr = &events, &stderr
	// A failed case makes go test exit 1: the tally says which. Any other
	// failure (a build error, a timeout) leaves no case to count.
	testErr := test.Run()
	took := time.Since(start)
	fmt.Fprintf(os.Stderr, "storage suite: go test ran %v (exit: %v)\n", took.Round(time.Second), testErr)
	summary := exec.CommandContext(ctx, "go", "run", "./summary", "-json")
	summary.Dir = storageSuiteDir
	summary.Stdin = &events
	var out, serr bytes.Buffer
	summary.Stdout, summary.Stderr = &out, &serr
	if err := summary.Run(); err != nil {
		return nil, fmt.Errorf("storage suite: no case to count (go test: %v; %s): summary: %v: %s", testErr, lastLines(stderr.String(), 5), err, strings.TrimSpace(serr.String()))
	}
	var targets []storageTarget
	if err := json.Unmarshal(out.Bytes(), &targets); err != nil {
		return nil, fmt.Errorf("storage suite: summary's output: %w", err)
	}
	return storageRows(targets, took), nil
}

// storageRows are the scenario's rows from summary's tallies; a row's
// note is the suite's tests that failed ("none").
func storageRows(targets []storageTarget, took time.Duration) []Row {
	var rows []Row
	for _, t := range targets {
		failed := strings.Join(t.FailedTests, ", ")
		if failed == "" {
			failed = "none"
		}
		rows = append(rows, Row{Scenario: storageSuiteID, Name: "storage suite through " + storageTargetName(t.Target),
			Note:    failed,
			Figures: map[string]float64{"skipped": float64(t.Skipped)},
			Result:  Result{Ops: t.Passed, Errors: t.Failed, Seconds: took.Seconds()}})
	}
	return rows
}

// storageTargetName says what test/conformance's target is.
func storageTargetName(target string) string {
	switch target {
	case "cascaded":
		return "a cascaded replica"
	case "replica":
		return "a learner replica"
	case "voter":
		return "a stock etcd voter"
	case "grpc-proxy":
		return "grpc-proxy"
	}
	return target
}

// writeStorageSuite writes the storage-suite scenario's table, if it ran.
func writeStorageSuite(w func(string, ...any), all []Row) {
	var rows []Row
	for _, r := range all {
		if r.Scenario == storageSuiteID {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	w("\n## Kubernetes' storage suite\n\n`--only storage-suite`: `k8s.io/apiserver/pkg/storage/testing`, the tests kube-apiserver's etcd3 store must pass, run by kube-apiserver's own store against each front in one `go test` run (`test/conformance -targets %s`; CONTRIBUTING). A fact for users, not a goal.\n\n| front | cases passed | failed | skipped | the suite's tests that failed |\n|---|---|---|---|---|\n", storageSuiteTargets)
	for _, r := range rows {
		w("| %s | %d of %d | %d | %.0f | %s |\n", strings.TrimPrefix(r.Name, "storage suite through "), r.Ops, r.Ops+r.Errors, r.Errors, r.Figures["skipped"], r.Note)
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}
