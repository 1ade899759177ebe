package mirror

import (
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// stallHint says what an operator can do about the error a stalled mirror
// met last, when it is one that only the operator can clear; "" for any
// other (a cut link, a slow destination: those clear by themselves).
func stallHint(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, rpctypes.ErrNoSpace), errors.Is(err, rpctypes.ErrGRPCNoSpace):
		return "the destination cluster is out of space (etcd's NOSPACE alarm; `etcdctl alarm list` on it): compact and defragment it, or restart its members with a larger --quota-backend-bytes, then `etcdctl alarm disarm`; the mirror goes on by itself from where it stopped, nothing is lost"
	case errors.Is(err, rpctypes.ErrRequestTooLarge), errors.Is(err, rpctypes.ErrGRPCRequestTooLarge),
		// Past --max-request-bytes plus gRPC's overhead, grpc-go refuses
		// the message before etcd sees it, in its own words (the
		// destination's "received", or this client's "trying to send").
		status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "larger than max"):
		return "a source revision holds a value the destination refuses as too large: a transaction carries each value twice (once in its guard), so a value over about half the destination's --max-request-bytes cannot be written; raise --max-request-bytes on the destination's members and give this mirror the same --max-request-bytes"
	}
	return ""
}
