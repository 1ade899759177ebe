package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"time"

	"github.com/google/pprof/profile"
)

// Where a member's CPU goes, by its stacks: the work of serving a watch
// client. /proc gives a process's whole CPU, in which a mirror's watch on
// the source's leader is a sixth of the puts' own cost on this machine
// and within its noise; a CPU profile tells the watch's part apart.
var (
	// watchCode is etcd's watch server and watchable store: the events'
	// matching, batching and encoding for the watchers, and the stream's
	// send and receive loops. Only the watchable store's own methods: the
	// store's methods it promotes (Put, Range, Write, …) are the writes'
	// and reads' own work, and so is watchableStoreTxnWrite.End, which
	// calls notify (counted).
	watchCode = regexp.MustCompile(`^go\.etcd\.io/etcd/server/v3/(storage/mvcc\.(\(\*watchableStore\)\.(notify|syncWatchers|syncWatchersLoop|syncVictimsLoop|moveVictims|watch|cancelWatcher|progress|progressAll|progressIfSync|NewWatchStream)([.]|$)|\(\*?(watchStream|watcherGroup|watcher|eventBatch)\)|watcherSet|watcherSetByKey|watcherBatch|newWatcherBatch|kvsToEvents|rangeEvents)|etcdserver/api/v3rpc\.\(\*?(serverWatchStream|watchServer)\))`)
	// grpcWriter is grpc-go's loopy writer: the goroutine that writes a
	// connection's outbound frames, a watch's events among them, apart
	// from the call that queued them. (Its inbound frames, the puts'
	// values, are read elsewhere and not counted: they are the puts'.)
	grpcWriter = regexp.MustCompile(`^google\.golang\.org/grpc/internal/transport\.\(\*loopyWriter\)`)
	// replication is raft and etcd's peer transport: the leader's work
	// for its followers and learners, rounds' heartbeats included.
	replication = regexp.MustCompile(`^go\.etcd\.io/(raft/v3[./]|etcd/server/v3/etcdserver/api/rafthttp\.)`)
)

// cpuProfile is one CPU profile of a process, summed: CPU-seconds in all,
// in watch serving (watchCode), in writing gRPC frames otherwise
// (grpcWriter), and in replication otherwise.
type cpuProfile struct {
	total, watch, writer, replication float64
}

// serving is the CPU of serving watches and writing clients' frames: what
// a mirror's watch on the member costs it outside the garbage collector,
// with the frames of every other client (alike in every arm of a
// scenario).
func (c cpuProfile) serving() float64 { return c.watch + c.writer }

func (c *cpuProfile) add(o cpuProfile) {
	c.total += o.total
	c.watch += o.watch
	c.writer += o.writer
	c.replication += o.replication
}

// profileCPU takes a CPU profile of the member at url over d (etcd's
// --enable-pprof, /debug/pprof/profile, in whole seconds) and sums it.
func profileCPU(ctx context.Context, url string, d time.Duration) (cpuProfile, error) {
	secs := max(int((d+time.Second-1)/time.Second), 1)
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", url, secs), nil)
	if err != nil {
		return cpuProfile{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return cpuProfile{}, fmt.Errorf("CPU profile of %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return cpuProfile{}, fmt.Errorf("CPU profile of %s: %s: %s (is it run with --enable-pprof?)", url, resp.Status, b)
	}
	p, err := profile.Parse(resp.Body)
	if err != nil {
		return cpuProfile{}, fmt.Errorf("CPU profile of %s: %w", url, err)
	}
	return sumProfile(p)
}

// sumProfile sums p's CPU samples by where they were taken.
func sumProfile(p *profile.Profile) (cpuProfile, error) {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			idx = i
		}
	}
	if idx < 0 {
		return cpuProfile{}, fmt.Errorf("not a CPU profile: sample types %v", p.SampleType)
	}
	var c cpuProfile
	for _, s := range p.Sample {
		v := float64(s.Value[idx]) / 1e9
		c.total += v
		switch {
		case stackMatches(s, watchCode):
			c.watch += v
		case stackMatches(s, grpcWriter):
			c.writer += v
		case stackMatches(s, replication):
			c.replication += v
		}
	}
	return c, nil
}

// stackMatches is whether any function of s's stack matches re.
func stackMatches(s *profile.Sample, re *regexp.Regexp) bool {
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function != nil && re.MatchString(l.Function.Name) {
				return true
			}
		}
	}
	return false
}
