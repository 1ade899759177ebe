package learner

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// deafCluster answers no member list.
type deafCluster struct{ *fakeCluster }

func (deafCluster) MemberList(ctx context.Context, _ ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	return nil, context.DeadlineExceeded
}

func TestProbeJoinSaysWhatAnswers(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello")) }))
	defer web.Close()
	etcd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"etcdserver":"3.7.3","etcdcluster":"3.7.0"}`))
	}))
	defer etcd.Close()
	nothing := httptest.NewServer(http.NotFoundHandler())
	nothing.Close()

	join := []string{web.URL, etcd.URL, nothing.URL}
	_, err := ProbeJoin(context.Background(), deafCluster{&fakeCluster{}}, web.Client(), join)
	if !errors.Is(err, ErrJoinNotEtcd) {
		t.Fatalf("err %v, want %v", err, ErrJoinNotEtcd)
	}
	for _, want := range []string{
		"--join " + strings.Join(join, ","),
		web.URL + " answers GET /version with 200 OK and not etcd's version",
		etcd.URL + " is etcd 3.7.3",
		nothing.URL + " does not answer",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\ndoes not say %q", err, want)
		}
	}
}
