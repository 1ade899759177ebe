package loopback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

const (
	// proxyDialTimeout bounds the proxy's connection to its target.
	proxyDialTimeout = 5 * time.Second
	// proxyChunk is the most one read takes, and so one delayed chunk.
	proxyChunk = 32 << 10
	// proxyQueue bounds the chunks waiting out a delay in one direction;
	// beyond it the reader stops reading and TCP pushes back on the sender.
	proxyQueue = 256
)

// Proxy forwards TCP connections from a port on 127.0.0.1 to a target, and
// can cut or slow the link in both directions. Its methods are safe for
// concurrent use.
//
// Blackhole makes the link silently lose everything, as when a network path
// fails: connections stay open and data sent into them is read and
// dropped, never buffered for later. A connection that lost data has a gap
// in its byte stream, so Heal closes it; its endpoints see a reset and
// reconnect, as after a partition that outlived TCP's patience.
type Proxy struct {
	target string
	ln     net.Listener
	clock  clockwork.Clock // when delayed chunks are due
	ctx    context.Context // ends at Close; aborts dials in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and every pair's owner

	// traffic counts the bytes forwarded (proxy_traffic.go).
	traffic trafficCounters

	mu struct {
		sync.Mutex
		blackhole bool
		delay     time.Duration
		// jitter is the most a delayed chunk waits beyond its delay.
		jitter time.Duration
		closed bool
		// pairs maps each open connection pair to whether it has lost data
		// (or, accepted while blackholed, was never connected).
		pairs map[*pair]bool
		// cutPIDs are the processes whose connections BlackholeFrom cut;
		// delayPIDs the ones DelayFrom slows.
		cutPIDs   map[int]bool
		delayPIDs map[int]time.Duration
	}
}

// NewProxy starts a proxy to target ("host:port"), closed at e's Close.
func NewProxy(e *Env, target string) (*Proxy, error) {
	ln, err := ListenReserved()
	if err != nil {
		return nil, fmt.Errorf("loopback: proxy to %s: %w", target, err)
	}
	p := &Proxy{target: target, ln: ln, clock: clockwork.NewRealClock()}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.mu.pairs = make(map[*pair]bool)
	p.wg.Add(1)
	go p.accept()
	if err := e.own("proxy to "+target, func() error { p.Close(); return nil }); err != nil {
		return nil, fmt.Errorf("loopback: proxy to %s: %w", target, err)
	}
	return p, nil
}

// Addr is the proxy's "host:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is the proxy's http URL.
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// Blackhole drops all traffic in both directions, on open and new
// connections, until Heal. New connections are accepted but never reach
// the target.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.blackhole = true
}

// Delay delivers each chunk, in each direction, d after the proxy read it,
// in order. Zero stops delaying.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.delay = d
}

// Heal undoes Blackhole and Delay, and closes the connections that lost
// data meanwhile.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.mu.blackhole, p.mu.delay, p.mu.jitter, p.mu.cutPIDs, p.mu.delayPIDs = false, 0, 0, nil, nil
	var broken []*pair
	for pr, lost := range p.mu.pairs {
		if lost {
			broken = append(broken, pr)
		}
	}
	p.mu.Unlock()
	for _, pr := range broken {
		pr.close()
	}
}

// Close stops accepting, closes every connection and waits for all the
// proxy's goroutines. It may be called more than once.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return
	}
	p.mu.closed = true
	pairs := make([]*pair, 0, len(p.mu.pairs))
	for pr := range p.mu.pairs {
		pairs = append(pairs, pr)
	}
	p.mu.Unlock()
	p.cancel()
	p.ln.Close()
	for _, pr := range pairs {
		pr.close()
	}
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			// Closed by Close; any other accept error on loopback is
			// as fatal to the proxy.
			return
		}
		pr := &pair{p: p, client: c, done: make(chan struct{})}
		p.mu.Lock()
		if p.mu.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.mu.pairs[pr] = p.mu.blackhole
		// Added under the lock that Close takes before it waits, so the
		// wait sees every pair.
		p.wg.Add(1)
		p.mu.Unlock()
		go pr.run()
	}
}

// pass decides the fate of a chunk of pr's traffic: forwarded (with the
// current delay), or dropped, which marks pr as broken.
func (p *Proxy) pass(pr *pair) (delay time.Duration, ok bool) {
	f := p.fate(pr)
	return f.delay, f.ok
}

// chunkFate is what becomes of a chunk: whether it passes, its delay and
// the most jitter beyond it, and whether a process named by DelayFrom owns
// its connection.
type chunkFate struct {
	ok            bool
	delay, jitter time.Duration
	fromDelayed   bool
}

func (p *Proxy) fate(pr *pair) chunkFate {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.blackhole || p.mu.pairs[pr] || p.cutByOwner(pr) {
		p.mu.pairs[pr] = true
		return chunkFate{}
	}
	d, from := p.delayByOwner(pr)
	return chunkFate{ok: true, delay: max(p.mu.delay, d), jitter: p.mu.jitter, fromDelayed: from}
}

// pair is one client connection and its connection to the target. run owns
// it: it starts a reader and a writer per direction and waits for them.
type pair struct {
	p      *Proxy
	client net.Conn
	done   chan struct{} // closed by close
	// owners caches, per process id asked about, whether that process
	// holds the client end; guarded by p.mu.
	owners map[int]bool

	mu struct {
		sync.Mutex
		closed bool
		target net.Conn
	}
	once sync.Once
}

type chunk struct {
	data []byte
	due  time.Time
}

func (pr *pair) run() {
	defer pr.p.wg.Done()
	defer func() {
		pr.close()
		pr.p.mu.Lock()
		delete(pr.p.mu.pairs, pr)
		pr.p.mu.Unlock()
	}()
	if _, ok := pr.p.pass(pr); !ok {
		// Accepted while blackholed: swallow what the client sends until
		// Heal or Close closes the connection.
		pr.discard(pr.client)
		return
	}
	d := net.Dialer{Timeout: proxyDialTimeout}
	target, err := d.DialContext(pr.p.ctx, "tcp", pr.p.target)
	if err != nil {
		return
	}
	if !pr.setTarget(target) {
		return
	}
	var wg sync.WaitGroup
	for i, dir := range [][2]net.Conn{{pr.client, target}, {target, pr.client}} {
		ch := make(chan chunk, proxyQueue)
		wg.Add(2)
		go func() { defer wg.Done(); pr.read(dir[0], ch, i == 0) }()
		go func() { defer wg.Done(); pr.write(ch, dir[1]) }()
	}
	wg.Wait()
}

func (pr *pair) setTarget(c net.Conn) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.mu.closed {
		c.Close()
		return false
	}
	pr.mu.target = c
	return true
}

// close closes both connections, which ends every goroutine of the pair.
func (pr *pair) close() {
	pr.once.Do(func() {
		pr.mu.Lock()
		pr.mu.closed = true
		target := pr.mu.target
		pr.mu.Unlock()
		close(pr.done)
		pr.client.Close()
		if target != nil {
			target.Close()
		}
	})
}

func (pr *pair) discard(src net.Conn) {
	buf := make([]byte, proxyChunk)
	for {
		if _, err := src.Read(buf); err != nil {
			return
		}
		pr.p.pass(pr)
	}
}

// read reads src (the client's end if up) and queues what may pass on ch,
// closing ch at the end.
func (pr *pair) read(src net.Conn, ch chan<- chunk, up bool) {
	defer close(ch)
	buf := make([]byte, proxyChunk)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			now := pr.p.clock.Now()
			if f := pr.p.fate(pr); f.ok {
				pr.p.traffic.add(up, f.fromDelayed, n)
				// The writer delivers in order, each chunk when due and
				// after the one before: jitter never reorders.
				due := now.Add(f.delay)
				if f.delay > 0 && f.jitter > 0 {
					due = due.Add(rand.N(f.jitter))
				}
				select {
				case ch <- chunk{data: append([]byte(nil), buf[:n]...), due: due}:
				case <-pr.done:
					return
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return // the writer passes the half-close on
		}
		if err != nil {
			pr.close()
			return
		}
	}
}

// write delivers the chunks from ch to dst when they are due.
func (pr *pair) write(ch <-chan chunk, dst net.Conn) {
	for c := range ch {
		if wait := c.due.Sub(pr.p.clock.Now()); wait > 0 {
			timer := pr.p.clock.NewTimer(wait)
			select {
			case <-timer.Chan():
			case <-pr.done:
				timer.Stop()
				return
			}
		}
		// A blackhole that began while the chunk waited drops it too.
		if _, ok := pr.p.pass(pr); !ok {
			continue
		}
		if _, err := dst.Write(c.data); err != nil {
			pr.close()
			return
		}
	}
	select {
	case <-pr.done:
	default:
		// The source sent FIN and everything before it is delivered.
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}
}
