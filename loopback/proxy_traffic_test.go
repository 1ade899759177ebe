package loopback

import (
	"bytes"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// echo sends payload through c, half-closes, and returns what came back.
func echo(t *testing.T, c net.Conn, payload []byte) []byte {
	t.Helper()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Many small writes: many chunks, each with its own jitter.
		for i := 0; i < len(payload) && werr == nil; i += 1000 {
			_, werr = c.Write(payload[i:min(i+1000, len(payload))])
		}
		if werr == nil {
			werr = c.(*net.TCPConn).CloseWrite()
		}
	}()
	got, err := io.ReadAll(c)
	wg.Wait()
	if werr != nil || err != nil {
		t.Fatalf("echo through the proxy: write %v, read %v", werr, err)
	}
	return got
}

func TestProxyCountsTrafficEachWayAndFromDelayedProcesses(t *testing.T) {
	p := must[*Proxy](t)(NewProxy(testEnv(t), echoServer(t)))
	payload := bytes.Repeat([]byte("0123456789abcdef"), 4<<10) // 64 KiB
	if got := echo(t, dial(t, p.Addr()), payload); !bytes.Equal(got, payload) {
		t.Fatalf("echoed %d bytes, want the %d sent", len(got), len(payload))
	}
	n := int64(len(payload))
	if got := p.Traffic(); got != (Traffic{Up: n, Down: n}) {
		t.Fatalf("Traffic after a %d-byte echo: %+v, want %d each way", n, got, n)
	}
	if got := p.TrafficFrom(); got.Total() != 0 {
		t.Fatalf("TrafficFrom with no process named by DelayFrom: %+v, want 0", got)
	}
	// Another process named: this one's bytes are still not from it.
	p.DelayFrom(os.Getppid(), 0)
	echo(t, dial(t, p.Addr()), payload)
	if got := p.TrafficFrom(); got.Total() != 0 {
		t.Fatalf("TrafficFrom with another process named: %+v, want 0", got)
	}
	p.DelayFrom(os.Getpid(), 0)
	echo(t, dial(t, p.Addr()), payload)
	if got := p.TrafficFrom(); got != (Traffic{Up: n, Down: n}) {
		t.Fatalf("TrafficFrom with this process named: %+v, want %d each way", got, n)
	}
	if got := p.Traffic(); got != (Traffic{Up: 3 * n, Down: 3 * n}) {
		t.Fatalf("Traffic after three echoes: %+v, want %d each way", got, 3*n)
	}
}

func TestProxyJitterKeepsOrder(t *testing.T) {
	const d, j = 20 * time.Millisecond, 30 * time.Millisecond
	p := must[*Proxy](t)(NewProxy(testEnv(t), echoServer(t)))
	p.Delay(d)
	p.Jitter(j)
	payload := make([]byte, 256<<10)
	for i := range payload {
		payload[i] = byte(i * 7919 >> 3)
	}
	if got := echo(t, dial(t, p.Addr()), payload); !bytes.Equal(got, payload) {
		t.Fatalf("echo through delay %v and jitter %v: %d bytes back, not the %d sent in order", d, j, len(got), len(payload))
	}
	c := dial(t, p.Addr())
	for range 10 {
		rtt, err := ping(c, 10*time.Second)
		if err != nil {
			t.Fatalf("ping: %v", err)
		}
		if rtt < 2*d {
			t.Fatalf("round trip %v through a %v delay each way and jitter, want at least %v", rtt, d, 2*d)
		}
	}
}
