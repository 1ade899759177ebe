package loopback

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// WaitFor polls cond until it returns true or timeout passes; then it fails
// the test, naming what was awaited and the last error. Polling a condition
// with a deadline is how tests here wait: never a fixed sleep.
func WaitFor(t TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	clock := clockwork.NewRealClock()
	deadline := clock.Now().Add(timeout)
	tick := clock.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		if clock.Now().After(deadline) {
			t.Fatalf("loopback: %s: not within %v (last error: %v)", what, timeout, lastErr)
		}
		<-tick.Chan()
	}
}
