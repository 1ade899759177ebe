package learner

import (
	"context"
	"errors"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// deafCluster answers no member list.
type deafCluster struct{ *fakeCluster }

func (deafCluster) MemberList(ctx context.Context, _ ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	return nil, context.DeadlineExceeded
}

func TestProbeJoinNamesJoin(t *testing.T) {
	join := []string{"http://a:2379", "http://b:2379"}
	_, err := ProbeJoin(context.Background(), deafCluster{&fakeCluster{}}, join)
	if !errors.Is(err, ErrJoinNotEtcd) || !strings.Contains(err.Error(), "--join "+strings.Join(join, ",")) || !strings.Contains(err.Error(), context.DeadlineExceeded.Error()) {
		t.Fatalf("err %v, want %v naming --join and the list's error", err, ErrJoinNotEtcd)
	}
}
