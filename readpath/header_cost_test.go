package readpath

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	hpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/wire"
)

// BenchmarkHeaderCost measures what response header fields cost grpc-go,
// client and server together, on the lightest unary call there is (a
// health check over loopback): none, one field, and the four answer
// headers, built as answer.go builds them. It reports the process's CPU
// time per call (cpu-ns/op) besides wall time: the figure behind the answer
// headers' cost in BENCHMARKS.md (issue 23).
//
//	go test ./readpath -run '^$' -bench HeaderCost -benchtime 2s -count 5 -cpu 2
func BenchmarkHeaderCost(b *testing.B) {
	a := &answerHeader{age: func() time.Duration { return 20 * time.Millisecond }, hasLeader: func() bool { return true }, rev: func() int64 { return 123456 }}
	for _, bc := range []struct {
		name string
		md   func() metadata.MD
	}{
		{"none", nil},
		{"one-field", func() metadata.MD { return metadata.MD{wire.ReadModeKey: {modeWeak}} }},
		{"answer-headers", func() metadata.MD { return a.begin(askedCtx, modeWeak).header(123456) }},
	} {
		b.Run(bc.name, func(b *testing.B) { benchUnary(b, bc.md) })
	}
}

func benchUnary(b *testing.B, md func() metadata.MD) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if md != nil {
			_ = grpc.SetHeader(ctx, md())
		}
		return h(ctx, req)
	}))
	hpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	defer s.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	c := hpb.NewHealthClient(cc)
	if _, err := c.Check(context.Background(), &hpb.HealthCheckRequest{}); err != nil {
		b.Fatal(err)
	}
	var r0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Check(context.Background(), &hpb.HealthCheckRequest{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	var r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}
