package loopback

import (
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
)

// WaitFor polls cond until it returns true or timeout passes; then it
// returns an error naming what was awaited and cond's last error. Polling
// a condition with a deadline is how the topology waits: never a fixed
// sleep.
func WaitFor(timeout time.Duration, what string, cond func() (bool, error)) error {
	clock := clockwork.NewRealClock()
	deadline := clock.Now().Add(timeout)
	tick := clock.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if s := (stop{}); errors.As(err, &s) {
			return s.err
		}
		lastErr = err
		if clock.Now().After(deadline) {
			return fmt.Errorf("loopback: %s: not within %v (last error: %v)", what, timeout, lastErr)
		}
		<-tick.Chan()
	}
}

// stop, returned by a condition, ends WaitFor at once with err: waiting
// longer cannot help.
type stop struct{ err error }

func (s stop) Error() string { return s.err.Error() }
func (s stop) Unwrap() error { return s.err }
