package cascade

import (
	"errors"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// readableFrom finds a store's compaction revision by etcd's rule: a read
// at r fails exactly when r is below it.
func TestReadableFrom(t *testing.T) {
	for _, tc := range []struct {
		lo, hi, compact, want int64
	}{
		{1, 100, 0, 1},   // never compacted
		{1, 100, 37, 37}, // compacted at 37
		{1, 100, 100, 100},
		{1, 100, 150, 101}, // beyond hi: none in range reads
		{40, 100, 37, 40},
	} {
		got, err := readableFrom(tc.lo, tc.hi, func(r int64) (bool, error) { return r < tc.compact, nil })
		if err != nil || got != tc.want {
			t.Errorf("readableFrom(%d, %d) with compaction at %d = %d (%v), want %d", tc.lo, tc.hi, tc.compact, got, err, tc.want)
		}
	}
	boom := errors.New("boom")
	if _, err := readableFrom(1, 10, func(int64) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("a failing read: %v, want it", err)
	}
}

// Two versions of a key are the same only if every field is.
func TestSameKV(t *testing.T) {
	mk := func() *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v"), CreateRevision: 2, ModRevision: 5, Version: 3, Lease: 7}
	}
	a := mk()
	for name, edit := range map[string]func(*mvccpb.KeyValue){
		"value": func(k *mvccpb.KeyValue) { k.Value = []byte("w") }, "create": func(k *mvccpb.KeyValue) { k.CreateRevision++ },
		"mod": func(k *mvccpb.KeyValue) { k.ModRevision++ }, "version": func(k *mvccpb.KeyValue) { k.Version++ },
		"lease": func(k *mvccpb.KeyValue) { k.Lease = 0 },
	} {
		b := mk()
		edit(b)
		if sameKV(a, b) {
			t.Errorf("a different %s counts as the same", name)
		}
	}
	if !sameKV(a, mk()) {
		t.Error("a copy differs")
	}
}

// Config.Validate names every bad field.
func TestConfigValidate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Upstreams = []string{"ftp://x", "http://127.0.0.1:2479"}
	cfg.Self = []string{"http://127.0.0.1:2479"}
	cfg.ProgressInterval = 0
	err := cfg.Validate()
	for _, want := range []string{`--upstream "ftp://x"`, "this replica's own client URL", "Dial and DialForward must be set", "Dir is empty", "Logger is nil", "ProgressInterval 0s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want %q", err, want)
		}
	}
	cfg = DefaultConfig()
	cfg.Upstreams, cfg.Dir, cfg.Logger = []string{"http://a:1"}, t.TempDir(), zap.NewNop()
	cfg.Dial = func([]string) (*clientv3.Client, error) { return nil, nil }
	cfg.DialForward = func([]string, []grpc.DialOption) (*clientv3.Client, error) { return nil, nil }
	if err := cfg.Validate(); err != nil {
		t.Errorf("a good config: %v", err)
	}
}
