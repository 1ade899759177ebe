package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/test/harness"
	"github.com/understudy-kv/understudy/wire"
)

// answer is what a replica says about one answer in its four headers.
type answer struct {
	mode   string
	bound  time.Duration
	leader bool
	rev    int64
}

// parseAnswer reads the four headers through get, failing on any missing
// or malformed one.
func parseAnswer(get func(key string) string) (answer, error) {
	var a answer
	var err error
	a.mode = get(wire.ReadModeKey)
	switch a.mode {
	case wire.ReadModeStrong, wire.ReadModeWeak, wire.ReadModeBounded, wire.ReadModeForwarded:
	default:
		return a, fmt.Errorf("%s = %q, want a read mode", wire.ReadModeKey, a.mode)
	}
	if a.bound, err = time.ParseDuration(get(wire.StalenessBoundKey)); err != nil || a.bound < 0 {
		return a, fmt.Errorf("%s = %q: %v", wire.StalenessBoundKey, get(wire.StalenessBoundKey), err)
	}
	if a.leader, err = strconv.ParseBool(get(wire.KnownLeaderKey)); err != nil {
		return a, fmt.Errorf("%s = %q: %v", wire.KnownLeaderKey, get(wire.KnownLeaderKey), err)
	}
	if a.rev, err = strconv.ParseInt(get(wire.AppliedRevisionKey), 10, 64); err != nil || a.rev <= 0 {
		return a, fmt.Errorf("%s = %q: %v", wire.AppliedRevisionKey, get(wire.AppliedRevisionKey), err)
	}
	return a, nil
}

func grpcAnswer(md metadata.MD) (answer, error) {
	return parseAnswer(func(k string) string {
		if v := md.Get(k); len(v) == 1 {
			return v[0]
		}
		return ""
	})
}

// askHeaders asks a replica for the answer headers (wire.FreshnessKey): it
// sends them only when asked, by default.
func askHeaders(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, wire.FreshnessKey, "1")
}

// askHTTP is the JSON gateway's request header that asks for them.
var askHTTP = []string{"Understudy-Freshness", "1"}

// answerKeys are the four answer headers.
var answerKeys = []string{wire.ReadModeKey, wire.StalenessBoundKey, wire.KnownLeaderKey, wire.AppliedRevisionKey}

// gatewayHeader is the HTTP header under which the JSON gateway forwards a
// gRPC header key: grpc-gateway's prefix, canonicalised, as wire documents.
func gatewayHeader(key string) string {
	return http.CanonicalHeaderKey("Grpc-Metadata-" + key)
}

func httpAnswer(h http.Header) (answer, error) {
	return parseAnswer(func(k string) string {
		if v := h[gatewayHeader(k)]; len(v) == 1 { // the exact name, not a case-folded match
			return v[0]
		}
		return ""
	})
}

// checkAnswer fails unless a has mode, a bound within [minBound, maxBound]
// (0 for strong reads and writes), the leader knowledge and a revision of
// at least minRev.
func checkAnswer(t *testing.T, what string, a answer, err error, mode string, minBound, maxBound time.Duration, leader bool, minRev int64) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if a.mode != mode || a.bound < minBound || a.bound > maxBound || a.leader != leader || a.rev < minRev {
		t.Errorf("%s: %+v; want mode %s, bound in [%v, %v], known leader %v, revision ≥ %d", what, a, mode, minBound, maxBound, leader, minRev)
	}
}

// jsonPost sends one JSON gateway request and returns its status, body and
// headers; hdr adds request headers.
func jsonPost(t *testing.T, url, body string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	return resp.StatusCode, string(buf[:n]), resp.Header
}

// jsonWatchHeader opens a watch through the JSON gateway (a streaming POST)
// and returns the response headers, sent with the stream's first message;
// hdr adds request headers.
func jsonWatchHeader(t *testing.T, url, key string, hdr ...string) (http.Header, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body := fmt.Sprintf(`{"create_request":{"key":%q}}`, base64.StdEncoding.EncodeToString([]byte(key)))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v3/watch", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("watch: %s", resp.Status)
	}
	return resp.Header, nil
}

// Every answer of a replica that the request asked for (wire.FreshnessKey)
// tells its read mode, the staleness it can prove, whether it knows a
// leader and its revision, through gRPC and the JSON gateway; with its
// peer links cut, the bound grows with the cut. Answers not asked for
// carry none of it (the default, --freshness-headers=on-request).
func TestFreshnessHeadersWhenAsked(t *testing.T) {
	harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, PeerProxies: true})
	r := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1", PeerProxy: true})

	t.Run("not asked", func(t *testing.T) { checkNoAnswerHeaders(t, r, context.Background(), nil) })

	ctx, cancel := context.WithTimeout(askHeaders(context.Background()), 3*time.Minute)
	defer cancel()
	put, err := client(t, c.Endpoints()...).Put(ctx, "k", "v0")
	if err != nil {
		t.Fatal(err)
	}
	written := put.Header.Revision
	conn, err := grpc.NewClient(strings.TrimPrefix(r.ClientURL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kv := pb.NewKVClient(conn)
	bounded := metadata.AppendToOutgoingContext(ctx, wire.MaxStalenessKey, "3s")
	const weakMax = time.Minute // the replica has just caught up; its rounds run every 100ms by default

	var md metadata.MD
	_, err = kv.Range(ctx, &pb.RangeRequest{Key: []byte("k")}, grpc.Header(&md))
	a, perr := grpcAnswer(md)
	checkAnswer(t, "gRPC strong Range", a, firstErr(err, perr), wire.ReadModeStrong, 0, 0, true, written)
	_, err = kv.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Serializable: true}, grpc.Header(&md))
	a, perr = grpcAnswer(md)
	checkAnswer(t, "gRPC weak Range", a, firstErr(err, perr), wire.ReadModeWeak, 0, weakMax, true, 1)
	_, err = kv.Range(bounded, &pb.RangeRequest{Key: []byte("k"), Serializable: true}, grpc.Header(&md))
	a, perr = grpcAnswer(md)
	checkAnswer(t, "gRPC bounded Range (3s)", a, firstErr(err, perr), wire.ReadModeBounded, 0, 3*time.Second, true, written)
	_, err = kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k")}}}}}, grpc.Header(&md))
	a, perr = grpcAnswer(md)
	checkAnswer(t, "gRPC strong read-only Txn", a, firstErr(err, perr), wire.ReadModeStrong, 0, 0, true, written)
	rs, err := kv.RangeStream(ctx, &pb.RangeRequest{Key: []byte("k")})
	if err == nil {
		md, err = rs.Header()
	}
	a, perr = grpcAnswer(md)
	checkAnswer(t, "gRPC strong RangeStream", a, firstErr(err, perr), wire.ReadModeStrong, 0, 0, true, written)
	presp, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v1")}, grpc.Header(&md))
	a, perr = grpcAnswer(md)
	if err == nil {
		written = presp.Header.Revision
	}
	checkAnswer(t, "gRPC Put (forwarded)", a, firstErr(err, perr), wire.ReadModeForwarded, 0, 0, true, written)
	wctx, wcancel := context.WithCancel(ctx)
	ws, err := pb.NewWatchClient(conn).Watch(wctx)
	if err == nil {
		md, err = ws.Header() // sent when the stream opens, before any request
	}
	a, perr = grpcAnswer(md)
	checkAnswer(t, "gRPC Watch", a, firstErr(err, perr), wire.ReadModeWeak, 0, weakMax, true, written)
	wcancel()

	key := base64.StdEncoding.EncodeToString([]byte("k"))
	rangeBody := fmt.Sprintf(`{"key":%q}`, key)
	weakBody := fmt.Sprintf(`{"key":%q,"serializable":true}`, key)
	code, body, h := jsonPost(t, r.ClientURL+"/v3/kv/range", rangeBody, askHTTP...)
	a, perr = httpAnswer(h)
	checkAnswer(t, fmt.Sprintf("JSON strong range (%d %s)", code, body), a, perr, wire.ReadModeStrong, 0, 0, true, written)
	code, body, h = jsonPost(t, r.ClientURL+"/v3/kv/range", weakBody, gatewayHeader(wire.FreshnessKey), "1")
	a, perr = httpAnswer(h)
	checkAnswer(t, fmt.Sprintf("JSON weak range, asked by Grpc-Metadata-Understudy-Freshness (%d %s)", code, body), a, perr, wire.ReadModeWeak, 0, weakMax, true, written)
	code, body, h = jsonPost(t, r.ClientURL+"/v3/kv/range", weakBody, append([]string{gatewayHeader(wire.MaxStalenessKey), "3s"}, askHTTP...)...)
	a, perr = httpAnswer(h)
	checkAnswer(t, fmt.Sprintf("JSON bounded range (%d %s)", code, body), a, perr, wire.ReadModeBounded, 0, 3*time.Second, true, written)
	code, body, h = jsonPost(t, r.ClientURL+"/v3/kv/put", fmt.Sprintf(`{"key":%q,"value":"djI="}`, key), askHTTP...)
	a, perr = httpAnswer(h)
	checkAnswer(t, fmt.Sprintf("JSON put (%d %s)", code, body), a, perr, wire.ReadModeForwarded, 0, 0, true, written+1)
	h, err = jsonWatchHeader(t, r.ClientURL, "k", askHTTP...)
	a, perr = httpAnswer(h)
	checkAnswer(t, "JSON watch", a, firstErr(err, perr), wire.ReadModeWeak, 0, weakMax, true, written+1)
	if t.Failed() {
		t.FailNow()
	}

	// Cut off, the replica still answers weak reads and watches; what
	// it can prove ages with the cut, and it soon knows no leader.
	r.CutPeerLinks(t, c)
	cut := time.Now()
	weak := func(what string) answer {
		t.Helper()
		since := time.Since(cut)
		var md metadata.MD
		_, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Serializable: true}, grpc.Header(&md))
		a, perr := grpcAnswer(md)
		checkAnswer(t, what, a, firstErr(err, perr), wire.ReadModeWeak, since, time.Hour, a.leader, written+1)
		return a
	}
	harness.WaitFor(t, 30*time.Second, "the cut-off replica to say it knows no leader", func() (bool, error) {
		a := weak("gRPC weak Range during the cut")
		return !a.leader, fmt.Errorf("%+v", a)
	})
	first := weak("gRPC weak Range during the cut")
	harness.WaitFor(t, 30*time.Second, "the bound to grow with the cut", func() (bool, error) {
		a := weak("gRPC weak Range during the cut")
		return a.bound > first.bound+time.Second && !a.leader, fmt.Errorf("%+v after %+v", a, first)
	})
	since := time.Since(cut)
	code, body, h = jsonPost(t, r.ClientURL+"/v3/kv/range", weakBody, askHTTP...)
	a, perr = httpAnswer(h)
	checkAnswer(t, fmt.Sprintf("JSON weak range during the cut (%d %s)", code, body), a, perr, wire.ReadModeWeak, since, time.Hour, false, written+1)
	since = time.Since(cut)
	ws, err = pb.NewWatchClient(conn).Watch(ctx)
	if err == nil {
		md, err = ws.Header()
	}
	a, perr = grpcAnswer(md)
	checkAnswer(t, "gRPC Watch during the cut", a, firstErr(err, perr), wire.ReadModeWeak, since, time.Hour, false, written+1)
	if t.Failed() {
		t.FailNow()
	}

	r.HealPeerLinks(c)
	harness.WaitFor(t, time.Minute, "a strong read after the heal", func() (bool, error) {
		var md metadata.MD
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		defer scancel()
		_, err := kv.Range(sctx, &pb.RangeRequest{Key: []byte("k")}, grpc.Header(&md))
		a, perr := grpcAnswer(md)
		if err = firstErr(err, perr); err != nil {
			return false, err
		}
		return a.mode == wire.ReadModeStrong && a.bound == 0 && a.leader, fmt.Errorf("%+v", a)
	})
	_, err = kv.Range(bounded, &pb.RangeRequest{Key: []byte("k"), Serializable: true}, grpc.Header(&md))
	a, perr = grpcAnswer(md)
	checkAnswer(t, "gRPC bounded Range after the heal", a, firstErr(err, perr), wire.ReadModeBounded, 0, 3*time.Second, true, written+1)
}

// firstErr is the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// --freshness-headers=always attaches the headers to answers not asked
// for; --freshness-headers=off leaves them out of answers asked for
// (--freshness-headers=false, its old spelling, too), through gRPC and the
// JSON gateway.
func TestFreshnessHeadersAlwaysAndOff(t *testing.T) {
	beside(t)
	harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	always := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "always", Extra: []string{"--freshness-headers=always"}})
	off := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "off", Extra: []string{"--freshness-headers=off"}})
	old := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "old", Extra: []string{"--freshness-headers=false"}})
	t.Run("off", func(t *testing.T) { checkNoAnswerHeaders(t, off, askHeaders(context.Background()), askHTTP) })
	t.Run("false", func(t *testing.T) { checkNoAnswerHeaders(t, old, askHeaders(context.Background()), askHTTP) })
	t.Run("always", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn := grpcConn(t, always.ClientURL)
		var md metadata.MD
		_, err := pb.NewKVClient(conn).Range(ctx, &pb.RangeRequest{Key: []byte("k"), Serializable: true}, grpc.Header(&md))
		a, perr := grpcAnswer(md)
		checkAnswer(t, "gRPC weak Range, not asked", a, firstErr(err, perr), wire.ReadModeWeak, 0, math.MaxInt64, true, 1)
		ws, err := pb.NewWatchClient(conn).Watch(ctx)
		if err == nil {
			md, err = ws.Header()
		}
		a, perr = grpcAnswer(md)
		checkAnswer(t, "gRPC Watch, not asked", a, firstErr(err, perr), wire.ReadModeWeak, 0, math.MaxInt64, true, 1)
		code, body, h := jsonPost(t, always.ClientURL+"/v3/kv/range", `{"key":"aw=="}`)
		a, perr = httpAnswer(h)
		checkAnswer(t, fmt.Sprintf("JSON strong range, not asked (%d %s)", code, body), a, perr, wire.ReadModeStrong, 0, 0, true, 1)
	})
}

// grpcConn is a plain gRPC connection to a client URL, closed at cleanup.
func grpcConn(t *testing.T, url string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(strings.TrimPrefix(url, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// checkNoAnswerHeaders fails if any answer of r carries an answer header:
// strong, weak and bounded Range, a read-only Txn, RangeStream, Put and a
// Watch's first header through gRPC (ctx's metadata sent), and a range, a
// put and a watch through the JSON gateway (hdr sent).
func checkNoAnswerHeaders(t *testing.T, r *harness.Replica, ctx context.Context, hdr []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn := grpcConn(t, r.ClientURL)
	kv := pb.NewKVClient(conn)
	none := func(what string, md metadata.MD, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		for _, k := range answerKeys {
			if v := md.Get(k); len(v) > 0 {
				t.Errorf("%s carries %s: %q; want none", what, k, v)
			}
		}
	}
	var md metadata.MD
	_, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("k")}, grpc.Header(&md))
	none("gRPC strong Range", md, err)
	_, err = kv.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Serializable: true}, grpc.Header(&md))
	none("gRPC weak Range", md, err)
	_, err = kv.Range(metadata.AppendToOutgoingContext(ctx, wire.MaxStalenessKey, "3s"), &pb.RangeRequest{Key: []byte("k"), Serializable: true}, grpc.Header(&md))
	none("gRPC bounded Range", md, err)
	_, err = kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k")}}}}}, grpc.Header(&md))
	none("gRPC read-only Txn", md, err)
	rs, err := kv.RangeStream(ctx, &pb.RangeRequest{Key: []byte("k")})
	if err == nil {
		md, err = rs.Header()
	}
	none("gRPC RangeStream", md, err)
	_, err = kv.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v")}, grpc.Header(&md))
	none("gRPC Put", md, err)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	ws, err := pb.NewWatchClient(conn).Watch(wctx)
	if err == nil {
		// Any header a replica sends comes when the stream opens; a
		// create request makes grpc-go flush it if there is none.
		err = ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("k")}}})
		if err == nil {
			md, err = ws.Header()
		}
	}
	none("gRPC Watch", md, err)
	for _, c := range []struct{ what, path, body string }{
		{"JSON range", "/v3/kv/range", `{"key":"aw==","serializable":true}`},
		{"JSON put", "/v3/kv/put", `{"key":"aw==","value":"dg=="}`},
	} {
		code, body, h := jsonPost(t, r.ClientURL+c.path, c.body, hdr...)
		if code != 200 {
			t.Errorf("%s: %d %s", c.what, code, body)
			continue
		}
		none(c.what, httpMD(h), nil)
	}
	h, err := jsonWatchHeader(t, r.ClientURL, "k", hdr...)
	none("JSON watch", httpMD(h), err)
}

// httpMD is the answer headers among a gateway answer's HTTP headers, as
// gRPC metadata.
func httpMD(h http.Header) metadata.MD {
	md := metadata.MD{}
	for _, k := range answerKeys {
		if v := h.Values(gatewayHeader(k)); len(v) > 0 {
			md.Set(k, v...)
		}
	}
	return md
}
