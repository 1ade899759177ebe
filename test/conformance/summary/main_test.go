package main

import (
	"slices"
	"strings"
	"testing"
)

// TestReadTalliesLeavesPerTarget: leaf cases are counted per target in the
// order the targets appear; a parent is not a case; a case that never
// ended counts as failed.
func TestReadTalliesLeavesPerTarget(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Test":"TestStorageConformance"}`,
		`{"Action":"run","Test":"TestStorageConformance/voter"}`,
		`{"Action":"run","Test":"TestStorageConformance/voter/watch"}`,
		`{"Action":"run","Test":"TestStorageConformance/voter/watch/Watch"}`,
		`{"Action":"pass","Test":"TestStorageConformance/voter/watch/Watch"}`,
		`{"Action":"run","Test":"TestStorageConformance/grpc-proxy"}`,
		`{"Action":"run","Test":"TestStorageConformance/grpc-proxy/watch"}`,
		`{"Action":"run","Test":"TestStorageConformance/grpc-proxy/watch/ProgressNotify"}`,
		`{"Action":"fail","Test":"TestStorageConformance/grpc-proxy/watch/ProgressNotify"}`,
		`{"Action":"run","Test":"TestStorageConformance/grpc-proxy/watch/Watch"}`,
		`{"Action":"run","Test":"TestStorageConformance/grpc-proxy/watch/Watch/a"}`,
		`{"Action":"pass","Test":"TestStorageConformance/grpc-proxy/watch/Watch/a"}`,
		`{"Action":"run","Test":"TestStorageConformance/grpc-proxy/watch/Watch/b"}`,
		`{"Action":"skip","Test":"TestStorageConformance/grpc-proxy/watch/Watch/b"}`,
		`{"Action":"run","Test":"TestStorageConformance/grpc-proxy/list/Hung"}`,
		`not json`,
	}, "\n")
	tallies, order, err := read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []string{"voter", "grpc-proxy"}) {
		t.Fatalf("targets %v, want voter, grpc-proxy", order)
	}
	if v := tallies["voter"]; v.passed != 1 || v.failed != 0 || v.skipped != 0 {
		t.Errorf("voter: %+v, want 1 passed", *v)
	}
	p := tallies["grpc-proxy"]
	if p.passed != 1 || p.failed != 2 || p.skipped != 1 {
		t.Errorf("grpc-proxy: %+v, want 1 passed, 2 failed (one never ended), 1 skipped", *p)
	}
	if !slices.Equal(p.failedTests, []string{"watch/ProgressNotify", "list/Hung"}) {
		t.Errorf("grpc-proxy failed %v, want watch/ProgressNotify, list/Hung", p.failedTests)
	}
}
