// Package conformance runs Kubernetes' storage conformance suite
// (k8s.io/apiserver/pkg/storage/testing, the tests kube-apiserver's etcd3
// store must pass) against a cascaded replica, a learner replica and, as the
// reference, a stock etcd voter. It is its own module so that understudy's
// module does not depend on k8s.io/apiserver.
//
//	cd test/conformance && go test ./... -timeout 30m
package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"go.uber.org/zap"

	"k8s.io/apimachinery/pkg/api/apitesting"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/apis/example"
	examplev1 "k8s.io/apiserver/pkg/apis/example/v1"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/etcd3"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/utils/clock"

	"github.com/understudy-kv/understudy/test/harness"
)

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
)

func init() {
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	utilruntime.Must(example.AddToScheme(scheme))
	utilruntime.Must(examplev1.AddToScheme(scheme))
}

// storedPrefix is what the suite's transformer puts before every stored
// value (the suite's own tests use the same).
const storedPrefix = "test!"

// target is the etcd endpoint a run stores through, and a counter that gives
// every test its own key prefix, so that the tests of one run share a
// cluster without seeing each other's objects.
type target struct {
	kind, url string
	n         atomic.Int64
}

// fixture is one store under test and what the suite's checks need of it.
type fixture struct {
	ctx    context.Context
	store  storage.Interface
	client *kubernetes.Client
	// raw reads and writes the cluster without the store's prefix: the
	// suite's own increaseRV and storage invariant checks.
	raw         *clientv3.Client
	prefix      string
	transformer *swappable
	recorder    *storagetesting.KVRecorder
	codec       runtime.Codec
	concrete    interface{ CompactRevision() int64 }
}

type options struct {
	codec       runtime.Codec
	transformer value.Transformer
}

// setup builds a kube-apiserver etcd3 store on tg, as the suite's own
// testSetup does on an embedded etcd.
func (tg *target) setup(t *testing.T, opts ...func(*options)) *fixture {
	t.Helper()
	o := options{
		codec:       apitesting.TestCodec(codecs, examplev1.SchemeGroupVersion),
		transformer: storagetesting.NewPrefixTransformer([]byte(storedPrefix), false),
	}
	for _, opt := range opts {
		opt(&o)
	}
	cfg := clientv3.Config{Endpoints: []string{tg.url}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()}
	client, err := kubernetes.New(cfg)
	if err != nil {
		t.Fatalf("client for %s: %v", tg.url, err)
	}
	t.Cleanup(func() { client.Close() })
	recorder := storagetesting.NewKubernetesRecorder(client.Kubernetes)
	kv := storagetesting.NewKVRecorder(client.KV, recorder)
	client.KV = kv
	client.Kubernetes = recorder
	raw, err := clientv3.New(cfg)
	if err != nil {
		t.Fatalf("client for %s: %v", tg.url, err)
	}
	t.Cleanup(func() { raw.Close() })

	prefix := fmt.Sprintf("/conformance-%d/", tg.n.Add(1))
	sw := &swappable{cur: o.transformer}
	versioner := storage.APIObjectVersioner{}
	compactor := etcd3.NewCompactor(client.Client, 0, clock.RealClock{}, nil)
	t.Cleanup(compactor.Stop)
	s, err := etcd3.New(client, compactor, o.codec, func() runtime.Object { return &example.Pod{} },
		func() runtime.Object { return &example.PodList{} }, prefix, "/pods/",
		schema.GroupResource{Resource: "pods"}, sw, leaseConfig(), etcd3.NewDefaultDecoder(o.codec, versioner), versioner)
	if err != nil {
		t.Fatalf("etcd3.New on %s: %v", tg.url, err)
	}
	t.Cleanup(s.Close)
	return &fixture{ctx: context.Background(), store: s, client: client, raw: raw, prefix: prefix,
		transformer: sw, recorder: kv, codec: o.codec, concrete: s}
}

// leaseConfig is the suite's: leases reused for one second, since the suite
// waits at most 30 s at a time.
func leaseConfig() etcd3.LeaseManagerConfig {
	cfg := etcd3.NewDefaultLeaseManagerConfig()
	cfg.ReuseDurationSeconds = 1
	return cfg
}

// withCodec and withTransformer replace the default codec or transformer,
// for the tests that make them fail on purpose.
func withCodec(c runtime.Codec) func(*options) { return func(o *options) { o.codec = c } }
func withTransformer(tr value.Transformer) func(*options) {
	return func(o *options) { o.transformer = tr }
}

// swappable is the store's transformer, which a test may replace while the
// store runs: what the suite's InterfaceWithPrefixTransformer and
// InterfaceWithTransformerOverride ask of a store.
type swappable struct {
	mu  sync.RWMutex
	cur value.Transformer
}

func (s *swappable) get() value.Transformer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cur
}

func (s *swappable) swap(tr value.Transformer) value.Transformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cur
	s.cur = tr
	return old
}

func (s *swappable) TransformFromStorage(ctx context.Context, data []byte, dataCtx value.Context) ([]byte, bool, error) {
	return s.get().TransformFromStorage(ctx, data, dataCtx)
}

func (s *swappable) TransformToStorage(ctx context.Context, data []byte, dataCtx value.Context) ([]byte, error) {
	return s.get().TransformToStorage(ctx, data, dataCtx)
}

// withPrefixTransformer is the store with UpdatePrefixTransformer.
type withPrefixTransformer struct {
	storage.Interface
	f *fixture
}

func (w withPrefixTransformer) UpdatePrefixTransformer(modifier storagetesting.PrefixTransformerModifier) func() {
	orig := w.f.transformer.get().(*storagetesting.PrefixTransformer)
	cp := *orig
	w.f.transformer.swap(modifier(&cp))
	return func() { w.f.transformer.swap(orig) }
}

// invariants checks what the suite's own storage invariants check: the
// stored value decodes and carries no resource version or self link.
func (f *fixture) invariants() storagetesting.KeyValidation {
	return func(ctx context.Context, t *testing.T, key string) {
		resp, err := f.raw.Get(ctx, f.prefix+key[1:])
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		if len(resp.Kvs) == 0 {
			t.Fatalf("no value stored at %s%s", f.prefix, key[1:])
		}
		obj, err := runtime.Decode(f.codec, resp.Kvs[0].Value[len(storedPrefix):])
		if err != nil {
			t.Fatalf("decode the value stored at %s: %v", key, err)
		}
		if p := obj.(*example.Pod); p.ResourceVersion != "" || p.SelfLink != "" {
			t.Errorf("stored object carries resourceVersion %q or selfLink %q", p.ResourceVersion, p.SelfLink)
		}
	}
}

// increaseRV writes a key outside every store, as the suite's own does.
func (f *fixture) increaseRV() storagetesting.IncreaseRVFunc {
	return func(ctx context.Context, t *testing.T) int64 {
		resp, err := f.raw.Put(ctx, "increaseRV", "ok")
		if err != nil {
			t.Fatalf("increase the revision: %v", err)
		}
		return resp.Header.Revision
	}
}

// compaction compacts the cluster at a resource version, through the same
// client, and waits until the store has seen it when it watches for it.
func (f *fixture) compaction(waitObserved bool) storagetesting.Compaction {
	return func(ctx context.Context, t *testing.T, resourceVersion string) {
		rv, err := storage.APIObjectVersioner{}.ParseResourceVersion(resourceVersion)
		if err != nil {
			t.Fatal(err)
		}
		var cur int64
		cur, _, _, err = etcd3.Compact(ctx, f.client.Client, cur, int64(rv))
		if err != nil {
			_, _, _, err = etcd3.Compact(ctx, f.client.Client, cur, int64(rv))
		}
		if err != nil {
			t.Fatalf("compact at %d: %v", rv, err)
		}
		if !waitObserved {
			return
		}
		harness.WaitFor(t, 30*time.Second, fmt.Sprintf("the store observes the compaction at %d", rv), func() (bool, error) {
			got := f.concrete.CompactRevision()
			return got == int64(rv), fmt.Errorf("it has %d", got)
		})
	}
}

// calls checks that a paged list made as few reads as kube-apiserver's
// doubling page size allows: what the suite's own call validation checks.
func (f *fixture) calls() storagetesting.CallsValidation {
	const maxLimit = 10000 // etcd3's largest page
	return func(t *testing.T, pageSize, processed uint64) {
		tr := f.transformer.get().(*storagetesting.PrefixTransformer)
		if reads := tr.GetReadsAndReset(); reads != processed {
			t.Errorf("unexpected reads: %d, expected: %d", reads, processed)
		}
		want := uint64(1)
		if pageSize != 0 {
			limit := pageSize
			for sum := uint64(1); sum < processed; {
				limit = min(limit*2, maxLimit)
				sum += limit
				want++
			}
		}
		if got := f.recorder.GetReadsAndReset() + f.recorder.GetStreamReadsAndReset(); got != want {
			t.Fatalf("unexpected reads: %d, want: %d", got, want)
		}
	}
}

// failing makes a codec or transformer fail on demand, for the delete
// tests that need a value the store cannot read.
type failingCodec struct {
	runtime.Codec
	fail atomic.Bool
}

func (c *failingCodec) set(b bool) { c.fail.Store(b) }

func (c *failingCodec) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if c.fail.Load() {
		return nil, nil, errors.New("synthetic error")
	}
	return c.Codec.Decode(data, defaults, into)
}

type failingTransformer struct {
	value.Transformer
	fail atomic.Bool
}

func (tr *failingTransformer) set(b bool) { tr.fail.Store(b) }

func (tr *failingTransformer) TransformFromStorage(ctx context.Context, data []byte, dataCtx value.Context) ([]byte, bool, error) {
	if tr.fail.Load() {
		return nil, false, errors.New("synthetic error")
	}
	return tr.Transformer.TransformFromStorage(ctx, data, dataCtx)
}

// freshFeatureCheck makes the store ask the server again which etcd
// features it has (RangeStream), after a feature gate changed.
func freshFeatureCheck(t *testing.T) {
	orig := etcdfeature.DefaultFeatureSupportChecker
	etcdfeature.DefaultFeatureSupportChecker = etcdfeature.NewDefaultFeatureSupportChecker()
	t.Cleanup(func() { etcdfeature.DefaultFeatureSupportChecker = orig })
}
