package readpath

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
)

// FuzzStalenessBound: any metadata value is a bound of 0 or more, or
// ErrBadStaleness naming the key; nothing panics.
func FuzzStalenessBound(f *testing.F) {
	for _, s := range []string{"100ms", "0", "1h", "-1s", "", "5", "1e9s", "9223372036854775807ns", "2562047h47m16.854775807s", "ms", " 1s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(MaxStalenessKey, v))
		d, err := stalenessBound(ctx, time.Second)
		if err != nil {
			if !errors.Is(err, ErrBadStaleness) {
				t.Fatalf("%q: error %v is not ErrBadStaleness", v, err)
			}
			if d != 0 {
				t.Fatalf("%q: bound %v with an error", v, d)
			}
			if got := grpcError(err); got == nil {
				t.Fatalf("%q: no gRPC status for %v", v, err)
			}
			return
		}
		if d < 0 {
			t.Fatalf("%q: negative bound %v accepted", v, d)
		}
		if want, perr := time.ParseDuration(v); perr != nil || want != d {
			t.Fatalf("%q: bound %v, ParseDuration says %v, %v", v, d, want, perr)
		}
	})
}
