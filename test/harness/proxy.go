package harness

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections to a target and can cut or slow the link:
// Blackhole drops everything in both directions (connections stay open, as
// when a network path silently fails), Delay holds each chunk back.
type Proxy struct {
	target string
	l      net.Listener

	mu struct {
		sync.Mutex
		blackhole bool
		delay     time.Duration
		conns     map[net.Conn]struct{}
		closed    bool
	}
	wg sync.WaitGroup
}

// NewProxy starts a proxy on 127.0.0.1 to target ("host:port"), closed when
// the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("harness: proxy: %v", err)
	}
	p := &Proxy{target: target, l: l}
	p.mu.conns = map[net.Conn]struct{}{}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's "host:port".
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// URL is the proxy's http URL.
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// Blackhole drops all traffic from now on, on open and new connections.
func (p *Proxy) Blackhole() { p.set(true, 0) }

// Delay delivers every chunk d after it arrived, in order.
func (p *Proxy) Delay(d time.Duration) { p.set(false, d) }

// Heal restores normal forwarding. Data dropped meanwhile stays lost, so
// peers usually need a new connection to recover.
func (p *Proxy) Heal() { p.set(false, 0) }

func (p *Proxy) set(blackhole bool, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.blackhole, p.mu.delay = blackhole, delay
}

func (p *Proxy) mode() (blackhole bool, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.blackhole, p.mu.delay
}

// Close stops accepting, closes every connection and waits for every
// goroutine of the proxy.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return
	}
	p.mu.closed = true
	for c := range p.mu.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.l.Close()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		c.Close()
		return false
	}
	p.mu.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.mu.conns, c)
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(in)
	}
}

// serve owns one client connection and its upstream connection.
func (p *Proxy) serve(in net.Conn) {
	defer p.wg.Done()
	if !p.track(in) {
		return
	}
	defer p.untrack(in)
	out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(out) {
		return
	}
	defer p.untrack(out)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(out, in); closeBoth(in, out) }()
	go func() { defer wg.Done(); p.pipe(in, out); closeBoth(in, out) }()
	wg.Wait()
}

func closeBoth(a, b net.Conn) { a.Close(); b.Close() }

type chunk struct {
	data []byte
	at   time.Time
}

// pipe copies src to dst, dropping or delaying by the proxy's mode. A
// reader and a writer goroutine keep order while chunks wait out a delay.
func (p *Proxy) pipe(dst io.Writer, src io.Reader) {
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			if d := time.Until(c.at); d > 0 {
				time.Sleep(d) // the injected delay itself
			}
			if blackhole, _ := p.mode(); blackhole {
				continue
			}
			if _, err := dst.Write(c.data); err != nil {
				// Keep draining so the reader never blocks on q.
				for range q {
				}
				return
			}
		}
	}()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			blackhole, delay := p.mode()
			if !blackhole {
				q <- chunk{data: append([]byte(nil), buf[:n]...), at: time.Now().Add(delay)}
			}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-done
}
