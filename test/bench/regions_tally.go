package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/wire"
)

// boundTally counts what the answers to bounded reads said of themselves
// (wire.ReadModeKey, wire.StalenessBoundKey): how they were served, and
// how many carried a staleness bound above the one asked for — the state
// served older, at the answer, than the read's budget.
type boundTally struct {
	bound time.Duration

	mu      sync.Mutex
	modes   map[string]int
	answers int
	over    int
	maxSeen time.Duration
}

func (t *boundTally) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.modes, t.answers, t.over, t.maxSeen = map[string]int{}, 0, 0, 0
}

func (t *boundTally) add(md metadata.MD) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.answers++
	mode := "no " + wire.ReadModeKey
	if v := md.Get(wire.ReadModeKey); len(v) > 0 {
		mode = v[0]
	}
	if t.modes == nil {
		t.modes = map[string]int{}
	}
	t.modes[mode]++
	if v := md.Get(wire.StalenessBoundKey); len(v) > 0 {
		if d, err := time.ParseDuration(v[0]); err == nil {
			t.maxSeen = max(t.maxSeen, d)
			if d > t.bound {
				t.over++
			}
		}
	}
}

// note says it for a row.
func (t *boundTally) note() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var modes []string
	for m, n := range t.modes {
		modes = append(modes, fmt.Sprintf("%s %d", m, n))
	}
	sort.Strings(modes)
	return fmt.Sprintf("answers' %s: %s; %s above the %v asked for: %d of %d (largest %v)",
		wire.ReadModeKey, strings.Join(modes, ", "), wire.StalenessBoundKey, t.bound, t.over, t.answers, t.maxSeen.Round(time.Millisecond))
}
