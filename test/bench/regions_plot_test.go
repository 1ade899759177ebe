package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The plots are written, one PNG and one SVG per path, from samples of
// every RTT and concurrency, an empty series included.
func TestRegionPlotsWriteOnePairPerPath(t *testing.T) {
	dir := t.TempDir()
	var ss []regionSamples
	for i, rtt := range regionRTTs {
		for _, n := range regionClients {
			var lat []time.Duration
			for k := range 50 {
				lat = append(lat, time.Duration(k+1)*time.Millisecond+rtt)
			}
			ss = append(ss, regionSamples{path: pathReplicaStrong, rtt: rtt, clients: n, lat: lat})
			if i == 0 {
				ss = append(ss, regionSamples{path: pathReplicaWeak, rtt: rtt, clients: n})
			}
		}
	}
	if err := regionPlots(dir, ss); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{pathReplicaStrong, pathReplicaWeak} {
		for _, ext := range []string{".png", ".svg"} {
			fi, err := os.Stat(filepath.Join(dir, regionPlotFile(path)+ext))
			if err != nil || fi.Size() == 0 {
				t.Fatalf("plot of %s (%s): %v", path, ext, err)
			}
		}
	}
}
