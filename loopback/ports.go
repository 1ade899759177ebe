package loopback

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// handedOut remembers every port handed out in this process: a port
// closed after probing is free again for the kernel, which may offer it to
// the next probe before the first one's process has bound it.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago and
// that no other call in this process has returned.
func FreePort() (int, error) {
	for range 100 {
		port, err := probe()
		if err != nil {
			return 0, fmt.Errorf("loopback: free port: %w", err)
		}
		if reserve(port) {
			return port, nil
		}
	}
	return 0, errors.New("loopback: free port: every probed port was already handed out")
}

// freeURLs returns a client and a peer URL (url makes them: URL or
// httpsURL) on two ports FreePort handed out, for a process that listens on
// both.
func freeURLs(url func(port int) string) (client, peer string, err error) {
	c, err := FreePort()
	if err != nil {
		return "", "", err
	}
	pp, err := FreePort()
	if err != nil {
		return "", "", err
	}
	return url(c), url(pp), nil
}

// FreePortRun returns base such that the n ports base .. base+n-1 were all
// free a moment ago and none was handed out before, for programs that take a
// base port and count up from it. The run is taken below the kernel's
// ephemeral range so that outgoing connections do not land in it.
func FreePortRun(n int) (int, error) {
	if n < 1 {
		return 0, fmt.Errorf("loopback: free port run of %d ports; want 1 or more", n)
	}
	lo, hi := 10000, ephemeralLow()-n
	if hi <= lo {
		lo, hi = 1024, 65536-n
	}
	for range 200 {
		base := lo + rand.IntN(hi-lo)
		if reserveRun(base, n) {
			return base, nil
		}
	}
	return 0, fmt.Errorf("loopback: no run of %d free ports found in %d..%d", n, lo, hi+n)
}

// ListenReserved listens on a port of 127.0.0.1 that no FreePort call has
// handed out, and reserves it: a listener in this process (a proxy) must
// not take a port handed to a process that has not bound it yet, which the
// kernel, seeing it free, would offer to a plain listen on port 0.
func ListenReserved() (net.Listener, error) {
	var refused []net.Listener // held open, so that the kernel offers others
	defer func() {
		for _, ln := range refused {
			ln.Close()
		}
	}()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		if reserve(ln.Addr().(*net.TCPAddr).Port) {
			return ln, nil
		}
		refused = append(refused, ln)
	}
	return nil, fmt.Errorf("loopback: every port the kernel offered was already handed out")
}

// URL returns the http URL of port on 127.0.0.1.
func URL(port int) string {
	return "http://127.0.0.1:" + strconv.Itoa(port)
}

func probe() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return port, ln.Close()
}

func reserve(port int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports[port] {
		return false
	}
	if handedOut.ports == nil {
		handedOut.ports = make(map[int]bool)
	}
	handedOut.ports[port] = true
	return true
}

// reserveRun holds the lock while probing, so that two concurrent runs can
// not overlap; probing n ports takes well under a millisecond each.
func reserveRun(base, n int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	for p := base; p < base+n; p++ {
		if handedOut.ports[p] {
			return false
		}
	}
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for p := base; p < base+n; p++ {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return false
		}
		lns = append(lns, ln)
	}
	if handedOut.ports == nil {
		handedOut.ports = make(map[int]bool)
	}
	for p := base; p < base+n; p++ {
		handedOut.ports[p] = true
	}
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range, or the
// Linux default when it cannot be read.
func ephemeralLow() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	var lo, hi int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &lo, &hi); err != nil || lo <= 0 {
		return linuxDefault
	}
	return lo
}
