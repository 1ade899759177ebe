package conformance

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting"
	examplev1 "k8s.io/apiserver/pkg/apis/example/v1"
	"k8s.io/apiserver/pkg/features"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"github.com/understudy-kv/understudy/test/harness"
)

// targets are the kinds -targets may name: the three the suite runs by
// default, and etcd's grpc-proxy, which is measured beside them
// (docs/cascaded.md) but is not understudy's to pass.
const defaultTargets = "cascaded,replica,voter"

var (
	targets    = flag.String("targets", defaultTargets, "the fronts to run the suite against, comma-separated: cascaded, replica, voter, grpc-proxy (etcd grpc-proxy start in front of 3 stock voters; fails what etcd's issues say it fails)")
	knownKinds = []string{"cascaded", "replica", "voter", "grpc-proxy"}
)

// TestStorageConformance runs the suite against each of -targets: by
// default a cascaded replica, a learner replica and a stock voter. The
// suite's own runs give every test a fresh etcd; here the tests of one
// target share a cluster, each with its own key prefix, except those that
// compact (a compaction is cluster-wide, and the watch tests from resource
// version 1 need revision 1), which get a cluster of their own. The servers
// send watch progress notifications every second, as the suite's progress
// and bookmark tests ask of them.
func TestStorageConformance(t *testing.T) {
	kinds := strings.Split(*targets, ",")
	for _, kind := range kinds {
		if !slices.Contains(knownKinds, kind) {
			t.Fatalf("-targets %q: unknown target %q; give a comma-separated list of %s (default %s)", *targets, kind, strings.Join(knownKinds, ", "), defaultTargets)
		}
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			tg := start(t, kind)
			t.Run("store", func(t *testing.T) { storeSuite(t, tg) })
			t.Run("list", func(t *testing.T) { listSuite(t, tg) })
			t.Run("watch", func(t *testing.T) { watchSuite(t, tg) })
		})
	}
}

// start brings up 3 stock voters and, for a replica or a cascaded replica,
// a learner replica and a cascaded replica fed by it, or for grpc-proxy,
// etcd's grpc-proxy in front of the voters; it returns the target of that
// kind.
func start(t *testing.T, kind string) *target {
	t.Helper()
	progress := []string{"--watch-progress-notify-interval=1s"}
	c := harness.StartCluster(t, harness.ClusterConfig{Kinds: []harness.Kind{harness.KindEtcd, harness.KindEtcd, harness.KindEtcd},
		ExtraArgs: progress})
	tg := &target{kind: kind, url: c.Members[0].ClientURL}
	switch kind {
	case "voter":
		return tg
	case "grpc-proxy":
		_, tg.url = harness.StartGRPCProxy(t, c.Endpoints())
		return tg
	}
	rep := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1", Extra: progress})
	tg.url = rep.ClientURL
	if kind == "cascaded" {
		tg.url = harness.StartReplica(t, c, harness.ReplicaConfig{Name: "c1", Upstream: []string{rep.ClientURL}, Extra: progress}).ClientURL
	}
	return tg
}

// alone runs a test that compacts on a cluster of its own.
func alone(t *testing.T, tg *target, test func(*testing.T, *fixture)) {
	test(t, start(t, tg.kind).setup(t))
}

// storeSuite is the create, get, delete and update part of the suite, as
// k8s.io/apiserver/pkg/storage/etcd3's store_test.go runs it.
func storeSuite(t *testing.T, tg *target) {
	plain := map[string]func(*testing.T, *fixture){
		"Create":              func(t *testing.T, f *fixture) { storagetesting.RunTestCreate(f.ctx, t, f.store, f.invariants()) },
		"CreateWithTTL":       func(t *testing.T, f *fixture) { storagetesting.RunTestCreateWithTTL(f.ctx, t, f.store) },
		"CreateWithKeyExist":  func(t *testing.T, f *fixture) { storagetesting.RunTestCreateWithKeyExist(f.ctx, t, f.store) },
		"Get":                 func(t *testing.T, f *fixture) { storagetesting.RunTestGet(f.ctx, t, f.store) },
		"UnconditionalDelete": func(t *testing.T, f *fixture) { storagetesting.RunTestUnconditionalDelete(f.ctx, t, f.store) },
		"ConditionalDelete":   func(t *testing.T, f *fixture) { storagetesting.RunTestConditionalDelete(f.ctx, t, f.store) },
		"DeleteWithSuggestion": func(t *testing.T, f *fixture) {
			storagetesting.RunTestDeleteWithSuggestion(f.ctx, t, f.store)
		},
		"DeleteWithSuggestionAndConflict": func(t *testing.T, f *fixture) {
			storagetesting.RunTestDeleteWithSuggestionAndConflict(f.ctx, t, f.store)
		},
		"DeleteWithSuggestionOfDeletedObject": func(t *testing.T, f *fixture) {
			storagetesting.RunTestDeleteWithSuggestionOfDeletedObject(f.ctx, t, f.store)
		},
		"ValidateDeletionWithSuggestion": func(t *testing.T, f *fixture) {
			storagetesting.RunTestValidateDeletionWithSuggestion(f.ctx, t, f.store)
		},
		"ValidateDeletionWithOnlySuggestionValid": func(t *testing.T, f *fixture) {
			storagetesting.RunTestValidateDeletionWithOnlySuggestionValid(f.ctx, t, f.store)
		},
		"DeleteWithConflict": func(t *testing.T, f *fixture) { storagetesting.RunTestDeleteWithConflict(f.ctx, t, f.store) },
		"PreconditionalDeleteWithSuggestion": func(t *testing.T, f *fixture) {
			storagetesting.RunTestPreconditionalDeleteWithSuggestion(f.ctx, t, f.store)
		},
		"PreconditionalDeleteWithOnlySuggestionPass": func(t *testing.T, f *fixture) {
			storagetesting.RunTestPreconditionalDeleteWithOnlySuggestionPass(f.ctx, t, f.store)
		},
		"GuaranteedUpdate": func(t *testing.T, f *fixture) {
			storagetesting.RunTestGuaranteedUpdate(f.ctx, t, withPrefixTransformer{f.store, f}, f.invariants())
		},
		"GuaranteedUpdateWithTTL": func(t *testing.T, f *fixture) { storagetesting.RunTestGuaranteedUpdateWithTTL(f.ctx, t, f.store) },
		"GuaranteedUpdateChecksStoredData": func(t *testing.T, f *fixture) {
			storagetesting.RunTestGuaranteedUpdateChecksStoredData(f.ctx, t, withPrefixTransformer{f.store, f})
		},
		"GuaranteedUpdateWithConflict": func(t *testing.T, f *fixture) {
			storagetesting.RunTestGuaranteedUpdateWithConflict(f.ctx, t, f.store)
		},
		"GuaranteedUpdateWithSuggestionAndConflict": func(t *testing.T, f *fixture) {
			storagetesting.RunTestGuaranteedUpdateWithSuggestionAndConflict(f.ctx, t, f.store)
		},
		"TransformationFailure": func(t *testing.T, f *fixture) {
			storagetesting.RunTestTransformationFailure(f.ctx, t, withPrefixTransformer{f.store, f})
		},
		"KeySchema": func(t *testing.T, f *fixture) { storagetesting.RunTestKeySchema(f.ctx, t, f.store) },
	}
	for _, name := range sorted(plain) {
		t.Run(name, func(t *testing.T) { plain[name](t, tg.setup(t)) })
	}

	// The deletes of objects the store cannot read.
	t.Run("DeleteWithConflictAndMissingExpectedTransformOrDecodeError", func(t *testing.T) {
		unsafeDeletion(t)
		codec := &failingCodec{Codec: apitesting.TestCodec(codecs, examplev1.SchemeGroupVersion)}
		f := tg.setup(t, withCodec(codec))
		storagetesting.RunTestDeleteWithConflictAndMissingExpectedTransformOrDecodeError(f.ctx, t, f.store, codec.set)
	})
	t.Run("DeleteWithConflictAndExpectedTransformError", func(t *testing.T) {
		unsafeDeletion(t)
		tr := &failingTransformer{Transformer: storagetesting.NewPrefixTransformer([]byte(storedPrefix), false)}
		f := tg.setup(t, withTransformer(tr))
		storagetesting.RunTestDeleteExpectedTransformOrDecodeError(f.ctx, t, f.store, tr.set)
	})
	t.Run("DeleteWithConflictAndExpectedDecodeError", func(t *testing.T) {
		unsafeDeletion(t)
		codec := &failingCodec{Codec: apitesting.TestCodec(codecs, examplev1.SchemeGroupVersion)}
		f := tg.setup(t, withCodec(codec))
		storagetesting.RunTestDeleteExpectedTransformOrDecodeError(f.ctx, t, f.store, codec.set)
	})
	t.Run("DeleteWithSuggestionAndMissingExpectedTransformOrDecodeFailure", func(t *testing.T) {
		unsafeDeletion(t)
		f := tg.setup(t)
		storagetesting.RunTestDeleteWithSuggestionAndMissingExpectedTransformOrDecodeError(f.ctx, t, f.store)
	})
	t.Run("Stats", func(t *testing.T) {
		f := tg.setup(t)
		storagetesting.RunTestStats(f.ctx, t, f.store, f.codec, f.transformer, false)
	})
}

// listSuite is the list part: paging, continuation, consistency,
// resource-version matching and compaction, with and without etcd 3.7's
// RangeStream.
func listSuite(t *testing.T, tg *target) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("rangeStream=%v", stream), func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.EtcdRangeStream, stream)
			freshFeatureCheck(t)
			t.Run("List", func(t *testing.T) {
				f := start(t, tg.kind).setup(t)
				storagetesting.RunTestList(f.ctx, t, f.store, f.compaction(false), false, f.client.Kubernetes.(*storagetesting.KubernetesRecorder))
				if reads := f.recorder.GetStreamReadsAndReset(); stream != (reads > 0) {
					t.Errorf("RangeStream enabled: %v, but %d lists were served by RangeStream", stream, reads)
				}
			})
			t.Run("ConsistentList", func(t *testing.T) {
				f := tg.setup(t)
				storagetesting.RunTestConsistentList(f.ctx, t, f.store, f.increaseRV(), false, true, false)
			})
		})
	}
	plain := map[string]func(*testing.T, *fixture){
		"ListPaging": func(t *testing.T, f *fixture) { storagetesting.RunTestListPaging(f.ctx, t, f.store) },
		"GetListNonRecursive": func(t *testing.T, f *fixture) {
			storagetesting.RunTestGetListNonRecursive(f.ctx, t, f.increaseRV(), f.store)
		},
		"GetListRecursivePrefix": func(t *testing.T, f *fixture) { storagetesting.RunTestGetListRecursivePrefix(f.ctx, t, f.store) },
		"ListContinuation":       func(t *testing.T, f *fixture) { storagetesting.RunTestListContinuation(f.ctx, t, f.store, f.calls()) },
		"ListContinuationWithFilter": func(t *testing.T, f *fixture) {
			storagetesting.RunTestListContinuationWithFilter(f.ctx, t, f.store, f.calls())
		},
		"NamespaceScopedList": func(t *testing.T, f *fixture) { storagetesting.RunTestNamespaceScopedList(f.ctx, t, f.store) },
		"ListResourceVersionMatch": func(t *testing.T, f *fixture) {
			storagetesting.RunTestListResourceVersionMatch(f.ctx, t, withPrefixTransformer{f.store, f})
		},
	}
	for _, name := range sorted(plain) {
		t.Run(name, func(t *testing.T) { plain[name](t, tg.setup(t)) })
	}
	t.Run("ListPaginationRareObject", func(t *testing.T) {
		// As the suite's own: the snapshot feature's extra read of the
		// compaction key would be counted.
		featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.ListFromCacheSnapshot, false)
		f := tg.setup(t)
		storagetesting.RunTestListPaginationRareObject(f.ctx, t, f.store, f.calls())
	})
	t.Run("ListInconsistentContinuation", func(t *testing.T) {
		alone(t, tg, func(t *testing.T, f *fixture) {
			storagetesting.RunTestListInconsistentContinuation(f.ctx, t, f.store, f.compaction(false))
		})
	})
	t.Run("CompactRevision", func(t *testing.T) {
		featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.ListFromCacheSnapshot, true)
		alone(t, tg, func(t *testing.T, f *fixture) {
			storagetesting.RunTestCompactRevision(f.ctx, t, f.store, f.increaseRV(), f.compaction(true))
		})
	})
}

// watchSuite is the watch part, as etcd3's watcher_test.go runs it.
func watchSuite(t *testing.T, tg *target) {
	plain := map[string]func(*testing.T, *fixture){
		"Watch":              func(t *testing.T, f *fixture) { storagetesting.RunTestWatch(f.ctx, t, f.store) },
		"ClusterScopedWatch": func(t *testing.T, f *fixture) { storagetesting.RunTestClusterScopedWatch(f.ctx, t, f.store) },
		"NamespaceScopedWatch": func(t *testing.T, f *fixture) {
			storagetesting.RunTestNamespaceScopedWatch(f.ctx, t, f.store)
		},
		"DeleteTriggerWatch":   func(t *testing.T, f *fixture) { storagetesting.RunTestDeleteTriggerWatch(f.ctx, t, f.store) },
		"WatchFromNonZero":     func(t *testing.T, f *fixture) { storagetesting.RunTestWatchFromNonZero(f.ctx, t, f.store) },
		"DelayedWatchDelivery": func(t *testing.T, f *fixture) { storagetesting.RunTestDelayedWatchDelivery(f.ctx, t, f.store) },
		"WatchError": func(t *testing.T, f *fixture) {
			storagetesting.RunTestWatchError(f.ctx, t, withPrefixTransformer{f.store, f})
		},
		"WatchContextCancel": func(t *testing.T, f *fixture) { storagetesting.RunTestWatchContextCancel(f.ctx, t, f.store) },
		"WatcherTimeout":     func(t *testing.T, f *fixture) { storagetesting.RunTestWatcherTimeout(f.ctx, t, f.store) },
		"WatchDeleteEventObjectHaveLatestRV": func(t *testing.T, f *fixture) {
			storagetesting.RunTestWatchDeleteEventObjectHaveLatestRV(f.ctx, t, f.store)
		},
		"WatchInitializationSignal": func(t *testing.T, f *fixture) {
			storagetesting.RunTestWatchInitializationSignal(f.ctx, t, f.store)
		},
		"ProgressNotify": func(t *testing.T, f *fixture) {
			storagetesting.RunOptionalTestProgressNotify(f.ctx, t, f.store, f.increaseRV())
		},
		"WatchDispatchBookmarkEvents": func(t *testing.T, f *fixture) {
			storagetesting.RunTestWatchDispatchBookmarkEvents(f.ctx, t, f.store, false)
		},
		"SendInitialEventsBackwardCompatibility": func(t *testing.T, f *fixture) {
			storagetesting.RunSendInitialEventsBackwardCompatibility(f.ctx, t, f.store)
		},
		"WatchErrorEventIsBlockingFurtherEvent": func(t *testing.T, f *fixture) {
			storagetesting.RunWatchErrorIsBlockingFurtherEvents(f.ctx, t, withPrefixTransformer{f.store, f})
		},
	}
	for _, name := range sorted(plain) {
		t.Run(name, func(t *testing.T) { plain[name](t, tg.setup(t)) })
	}
	t.Run("WatchFromZero", func(t *testing.T) {
		alone(t, tg, func(t *testing.T, f *fixture) {
			storagetesting.RunTestWatchFromZero(f.ctx, t, f.store, f.compaction(false))
		})
	})
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("RangeStream=%v", stream), func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.EtcdRangeStream, stream)
			freshFeatureCheck(t)
			t.Run("WatchSemantics", func(t *testing.T) {
				f := tg.setup(t)
				storagetesting.RunWatchSemantics(f.ctx, t, f.store)
			})
			t.Run("WatchSemanticsWithConcurrentDecode", func(t *testing.T) {
				featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.ConcurrentWatchObjectDecode, true)
				f := tg.setup(t)
				storagetesting.RunWatchSemantics(f.ctx, t, f.store)
			})
			t.Run("WatchSemanticInitialEventsExtended", func(t *testing.T) {
				f := tg.setup(t)
				storagetesting.RunWatchSemanticInitialEventsExtended(f.ctx, t, f.store)
			})
			t.Run("WatchListMatchSingle", func(t *testing.T) {
				f := tg.setup(t)
				storagetesting.RunWatchListMatchSingle(f.ctx, t, f.store)
			})
		})
	}
}

// unsafeDeletion turns on the feature the delete-unreadable tests need.
func unsafeDeletion(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.AllowUnsafeMalformedObjectDeletion, true)
}

// sorted gives a table's names in order, so that runs are repeatable.
func sorted(m map[string]func(*testing.T, *fixture)) []string {
	return slices.Sorted(maps.Keys(m))
}
