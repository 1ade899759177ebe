package harness

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1024)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

func roundTrip(t *testing.T, addr string, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	if err := c.SetDeadline(start.Add(timeout)); err != nil {
		return 0, err
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, err
	}
	if line != "ping\n" {
		t.Fatalf("echo returned %q", line)
	}
	return time.Since(start), nil
}

func TestProxyForwardsBlackholesAndDelays(t *testing.T) {
	p := NewProxy(t, echoServer(t))
	if _, err := roundTrip(t, p.Addr(), 5*time.Second); err != nil {
		t.Fatalf("through a healthy proxy: %v", err)
	}

	p.Blackhole()
	_, err := roundTrip(t, p.Addr(), 300*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("through a blackholed proxy: %v, want a timeout", err)
	}

	p.Heal()
	if _, err := roundTrip(t, p.Addr(), 5*time.Second); err != nil {
		t.Fatalf("after heal: %v", err)
	}

	p.Delay(150 * time.Millisecond)
	d, err := roundTrip(t, p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatalf("through a delaying proxy: %v", err)
	}
	// Both directions are delayed; assert only the lower bound.
	if d < 300*time.Millisecond {
		t.Fatalf("round trip took %v through a 150ms delay each way, want at least 300ms", d)
	}
}

func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}
