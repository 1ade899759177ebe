package replica

import (
	"testing"

	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/cascade"
	"github.com/understudy-kv/understudy/config"
)

// A cascaded replica's front limits its clients by the replica's
// --max-request-bytes, --max-txn-ops and --max-concurrent-streams, as a
// learner replica's does: the front takes the request size from its own
// config, and the other two reach the store whose handlers the front
// serves (its own limits stay large for the source's revisions).
func TestCascadedReplicaHasTheFrontsLimits(t *testing.T) {
	cfg := config.DefaultFront()
	cfg.MaxRequestBytes, cfg.MaxTxnOps, cfg.MaxConcurrentStreams = 4096, 7, 9
	opts := Options{Logger: zap.NewNop()}
	cc := cascadeConfig(cfg, config.Cascaded{Upstream: []string{"http://127.0.0.1:1"}}, opts, cascade.NewMetrics(nil))
	if cc.MaxTxnOps != 7 || cc.MaxConcurrentStreams != 9 {
		t.Errorf("the store's front limits: %d ops, %d streams; want 7 and 9", cc.MaxTxnOps, cc.MaxConcurrentStreams)
	}
	if rc := frontConfig(zap.NewNop(), cfg, nil, nil, opts); rc.MaxRequestBytes != 4096 {
		t.Errorf("the front's request size: %d, want 4096", rc.MaxRequestBytes)
	}
}
