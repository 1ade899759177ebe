package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// A call stuck on a silent connection is given up at its bound and tried
// again; a refusal is an answer and is not retried; the caller's deadline
// ends the retries.
func TestRetryUnanswered(t *testing.T) {
	clock := clockwork.NewRealClock()
	t.Run("stuck then answered", func(t *testing.T) {
		n := 0
		err := retryUnanswered(context.Background(), clock, 20*time.Millisecond, func(ctx context.Context) error {
			n++
			if n == 1 {
				<-ctx.Done() // a connection that never answers
				return ctx.Err()
			}
			return nil
		})
		if err != nil || n != 2 {
			t.Fatalf("err %v after %d attempts, want nil after 2", err, n)
		}
	})
	t.Run("refused", func(t *testing.T) {
		n := 0
		err := retryUnanswered(context.Background(), clock, time.Second, func(ctx context.Context) error {
			n++
			return rpctypes.ErrPermissionDenied
		})
		if !errors.Is(err, rpctypes.ErrPermissionDenied) || n != 1 {
			t.Fatalf("err %v after %d attempts, want the refusal after 1", err, n)
		}
	})
	t.Run("caller's deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		n := 0
		err := retryUnanswered(ctx, clock, 30*time.Millisecond, func(ctx context.Context) error {
			n++
			<-ctx.Done()
			return ctx.Err()
		})
		if !errors.Is(err, context.DeadlineExceeded) || n < 2 || ctx.Err() == nil {
			t.Fatalf("err %v after %d attempts (caller's ctx %v), want a deadline after several", err, n, ctx.Err())
		}
	})
}
