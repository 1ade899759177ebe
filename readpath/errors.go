package readpath

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/understudy-kv/understudy/wire"
)

// MaxStalenessKey is the gRPC metadata key a client sets to bound the
// staleness of its serializable reads on a replica (see package wire).
const MaxStalenessKey = wire.MaxStalenessKey

var (
	// ErrTooStale means a bounded read could not be proved fresh enough
	// before its deadline (the replica cannot reach the leader, or lags).
	ErrTooStale = errors.New("readpath: replica is staler than the read's bound and could not catch up before the deadline")
	// ErrBadStaleness means the request's staleness bound did not parse.
	ErrBadStaleness = errors.New("readpath: bad " + MaxStalenessKey + " metadata")
)

// grpcError turns this package's errors into gRPC statuses; etcd's own
// errors pass through, already statuses.
func grpcError(err error) error {
	switch {
	case errors.Is(err, ErrTooStale):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, ErrBadStaleness):
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return err
}
