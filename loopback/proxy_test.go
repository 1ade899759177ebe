package loopback

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// echoServer serves TCP echo on 127.0.0.1 until the test ends, and waits
// for its goroutines then.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				// Echo until EOF, then half-close so the peer sees the end.
				if _, err := io.Copy(c, c); err == nil {
					c.(*net.TCPConn).CloseWrite()
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ping writes a message on c and reads the echo within timeout, returning
// how long that took.
func ping(c net.Conn, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	if err := c.SetDeadline(start.Add(timeout)); err != nil {
		return 0, err
	}
	msg := []byte("ping\n")
	if _, err := c.Write(msg); err != nil {
		return 0, err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return 0, err
	}
	if !bytes.Equal(got, msg) {
		return 0, errors.New("echo returned " + string(got))
	}
	return time.Since(start), nil
}

func TestProxyForwardsBothWaysAndHalfClose(t *testing.T) {
	p := must[*Proxy](t)(NewProxy(testEnv(t), echoServer(t)))
	c := dial(t, p.Addr())
	if _, err := ping(c, 5*time.Second); err != nil {
		t.Fatalf("ping through the proxy: %v", err)
	}
	// More than one chunk each way, ended by a half-close that must reach
	// the echo server and come back as EOF.
	payload := bytes.Repeat([]byte("0123456789abcdef"), 64<<10)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, werr = c.Write(payload); werr == nil {
			werr = c.(*net.TCPConn).CloseWrite()
		}
	}()
	got, err := io.ReadAll(c)
	wg.Wait()
	if werr != nil || err != nil {
		t.Fatalf("1 MiB through the proxy: write %v, read %v", werr, err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("echoed %d bytes, want the %d sent", len(got), len(payload))
	}
}

func TestProxyBlackholeThenHeal(t *testing.T) {
	p := must[*Proxy](t)(NewProxy(testEnv(t), echoServer(t)))
	before := dial(t, p.Addr())
	if _, err := ping(before, 5*time.Second); err != nil {
		t.Fatalf("ping before blackhole: %v", err)
	}

	p.Blackhole()
	if _, err := ping(before, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ping on an open connection through a blackhole: %v, want a read timeout", err)
	}
	during := dial(t, p.Addr())
	if _, err := ping(during, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ping on a new connection through a blackhole: %v, want a read timeout", err)
	}

	p.Heal()
	// Both lost data, so Heal closes them rather than let a stream with a
	// gap carry on.
	for name, c := range map[string]net.Conn{"opened before": before, "opened during": during} {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("connection %s the blackhole, after heal: read %v, want it closed", name, err)
		}
	}
	if _, err := ping(dial(t, p.Addr()), 5*time.Second); err != nil {
		t.Fatalf("ping on a new connection after heal: %v", err)
	}
}

func TestProxyDelayIsAtLeastDEachWay(t *testing.T) {
	const d = 100 * time.Millisecond
	p := must[*Proxy](t)(NewProxy(testEnv(t), echoServer(t)))
	c := dial(t, p.Addr())
	p.Delay(d)
	for range 3 {
		rtt, err := ping(c, 10*time.Second)
		if err != nil {
			t.Fatalf("ping through a %v delay: %v", d, err)
		}
		if rtt < 2*d {
			t.Fatalf("round trip %v through a %v delay each way, want at least %v", rtt, d, 2*d)
		}
	}
	p.Heal()
	if _, err := ping(c, 5*time.Second); err != nil {
		t.Fatalf("ping after the delay was healed: %v", err)
	}
}

// Close must not wait out a delay, and must end open connections.
func TestProxyCloseEndsConnectionsAndDelayedChunks(t *testing.T) {
	p := must[*Proxy](t)(NewProxy(testEnv(t), echoServer(t)))
	c := dial(t, p.Addr())
	if _, err := ping(c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Delay(time.Hour)
	if _, err := c.Write([]byte("held back\n")); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for a delayed chunk")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after Close: %v, want the connection closed", err)
	}
	p.Close() // again, as cleanup will
}

func TestProxyBlackholeFromCutsOnlyThatProcess(t *testing.T) {
	p := must[*Proxy](t)(NewProxy(testEnv(t), echoServer(t)))
	before := dial(t, p.Addr())
	if _, err := ping(before, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// Another process's connections pass.
	p.BlackholeFrom(os.Getppid())
	if _, err := ping(before, 5*time.Second); err != nil {
		t.Fatalf("ping with another process cut: %v", err)
	}
	if _, err := ping(dial(t, p.Addr()), 5*time.Second); err != nil {
		t.Fatalf("new connection with another process cut: %v", err)
	}
	// This process's, open and new, do not.
	p.BlackholeFrom(os.Getpid())
	if _, err := ping(before, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ping on this process's open connection after BlackholeFrom: %v, want a read timeout", err)
	}
	if _, err := ping(dial(t, p.Addr()), 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ping on this process's new connection after BlackholeFrom: %v, want a read timeout", err)
	}
	p.Heal()
	if _, err := ping(dial(t, p.Addr()), 5*time.Second); err != nil {
		t.Fatalf("ping after heal: %v", err)
	}
}
