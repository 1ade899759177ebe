package loopback

import (
	"net"
	"strconv"
)

// Host is where a member or replica runs when it is not on this machine's
// 127.0.0.1: an address of its own, in a network namespace of its own, as
// a machine of a real cluster is (test/harness's Net makes them). There it
// listens on etcd's default ports, since nothing else shares the address.
type Host struct {
	// Addr is the host's IP address, which every other host and this
	// process reach.
	Addr string
	// Exec is the command that runs a program on the host, the program's
	// path and arguments appended (such as ip netns exec NAME); the
	// program keeps the process id that Start returns, so that Kill and
	// a pause by PID reach it.
	Exec []string
}

// etcd's default ports, which a Host's processes listen on.
const (
	HostClientPort = 2379
	HostPeerPort   = 2380
)

// ClientURL is the http client URL of a process on h.
func (h Host) ClientURL() string { return h.url(HostClientPort) }

// PeerURL is the http peer URL of a process on h.
func (h Host) PeerURL() string { return h.url(HostPeerPort) }

func (h Host) url(port int) string {
	return "http://" + net.JoinHostPort(h.Addr, strconv.Itoa(port))
}
