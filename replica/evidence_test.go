package replica

import (
	"testing"
	"time"
)

// The role loop's timeouts grow with the round trips to the voters, so that
// a far region's live voters do not look silent, within a bound.
func TestEvidenceTimeoutFollowsTheRoundTrip(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct{ base, rtt, want time.Duration }{
		{500 * ms, 0, 500 * ms},            // no round trip measured yet: as near the voters
		{500 * ms, ms, 504 * ms},           // one region
		{500 * ms, 150 * ms, 1100 * ms},    // 150 ms away: 4 round trips more
		{time.Second, 600 * ms, 3400 * ms}, // a round, 600 ms away
		{500 * ms, 10 * time.Second, maxEvidenceTimeout},
		{10 * time.Second, 0, 10 * time.Second}, // a base past the bound is kept
		{500 * ms, -time.Second, 500 * ms},
	} {
		if got := evidenceTimeout(tc.base, tc.rtt); got != tc.want {
			t.Errorf("evidenceTimeout(%v, %v) = %v, want %v", tc.base, tc.rtt, got, tc.want)
		}
	}
}
