package mirror

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestStallHintNamesWhatOnlyTheOperatorCanClear: the errors a mirror meets
// from a full destination or an oversized revision, as clientv3 returns
// them, raw from gRPC, or wrapped, each get their hint; a cut link gets
// none.
func TestStallHintNamesWhatOnlyTheOperatorCanClear(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{rpctypes.ErrNoSpace, "alarm disarm"},
		{rpctypes.ErrGRPCNoSpace, "alarm disarm"},
		{fmt.Errorf("mirror: apply revision 12: %w", rpctypes.ErrNoSpace), "alarm disarm"},
		{rpctypes.ErrRequestTooLarge, "--max-request-bytes"},
		{fmt.Errorf("txn: %w", rpctypes.ErrGRPCRequestTooLarge), "--max-request-bytes"},
		{fmt.Errorf("mirror: destination transaction: %w", status.Error(codes.ResourceExhausted, "grpc: received message larger than max (3145728 vs. 2097152)")), "--max-request-bytes"},
		{status.Error(codes.ResourceExhausted, "etcdserver: too many requests"), ""},
		{context.DeadlineExceeded, ""},
		{rpctypes.ErrNoLeader, ""},
		{nil, ""},
	} {
		got := stallHint(tc.err)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("stallHint(%v) = %q, want one saying %q", tc.err, got, tc.want)
		}
	}
}
