package harness

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/understudy-kv/understudy/loopback"
)

// Net is a network of hosts, each in a network namespace of its own with
// one address and etcd's ports to itself, joined by a bridge in this
// process's namespace that holds the network's first address, so that the
// test reaches every host directly. A cut is made with iptables in a host's
// own namespace (NetHost.Cut), as a firewall on that machine would make it:
// nothing between the other hosts changes. Net needs root, ip (iproute2)
// and iptables; everything it adds is removed at cleanup.
type Net struct {
	Hosts []*NetHost
}

// nets counts the Nets made by this process, for their names; netsMu
// serialises their making.
var (
	nets   atomic.Int32
	netsMu sync.Mutex
)

// NetHost is one host of a Net: its loopback.Host (address and how to run
// a program there) and its namespace's name.
type NetHost struct {
	loopback.Host
	NS string
}

// NewNet makes a Net of n hosts on a free 10.126.X.0/24, X after this
// process's id.
func NewNet(t TB, n int) *Net {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("harness: NewNet makes network namespaces and iptables rules: run as root")
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("harness: NewNet needs %s: %v", tool, err)
		}
	}
	if n < 1 || n > 200 {
		t.Fatalf("harness: NewNet of %d hosts; want 1 to 200", n)
	}
	// Names unique to this Net, and the subnet chosen and taken while no
	// other Net of this process chooses one.
	netsMu.Lock()
	defer netsMu.Unlock()
	id := strconv.Itoa(os.Getpid()%100000) + strconv.Itoa(int(nets.Add(1)))
	subnet := freeSubnet(t)
	bridge := "usn" + id
	ipCmd(t, "link", "add", bridge, "type", "bridge")
	t.Cleanup(func() { logErr(t, run("ip", "link", "del", bridge)) })
	ipCmd(t, "addr", "add", subnet+"1/24", "dev", bridge)
	ipCmd(t, "link", "set", bridge, "up")
	// Bridged frames pass this namespace's FORWARD chain when
	// br_netfilter is loaded; a host whose policy drops them (Docker's)
	// would cut the whole network.
	accept := []string{"FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"}
	must(t, run("iptables", append([]string{"-I"}, accept...)...))
	t.Cleanup(func() { logErr(t, run("iptables", append([]string{"-D"}, accept...)...)) })
	nw := &Net{}
	for i := range n {
		h := &NetHost{NS: bridge + "-" + strconv.Itoa(i+1)}
		h.Addr = subnet + strconv.Itoa(i+2)
		h.Exec = []string{"ip", "netns", "exec", h.NS}
		veth := bridge + "v" + strconv.Itoa(i+1)
		ipCmd(t, "netns", "add", h.NS)
		t.Cleanup(func() { logErr(t, run("ip", "netns", "del", h.NS)) })
		ipCmd(t, "-n", h.NS, "link", "set", "lo", "up")
		ipCmd(t, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", h.NS)
		t.Cleanup(func() { logErr(t, run("ip", "link", "del", veth)) }) // both ends, at once
		ipCmd(t, "link", "set", veth, "master", bridge, "up")
		ipCmd(t, "-n", h.NS, "addr", "add", h.Addr+"/24", "dev", "eth0")
		ipCmd(t, "-n", h.NS, "link", "set", "eth0", "up")
		nw.Hosts = append(nw.Hosts, h)
	}
	return nw
}

// Cut drops every packet between h and other, both ways, in h's namespace:
// other and everyone else still reach each other.
func (h *NetHost) Cut(t TB, other *NetHost) {
	t.Helper()
	h.iptables(t, "-A", "INPUT", "-s", other.Addr, "-j", "DROP")
	h.iptables(t, "-A", "OUTPUT", "-d", other.Addr, "-j", "DROP")
}

// CutPort drops what h sends to other's TCP port, such as its client
// URL's: the replies to connections other opens are not cut.
func (h *NetHost) CutPort(t TB, other *NetHost, port int) {
	t.Helper()
	h.iptables(t, "-A", "OUTPUT", "-d", other.Addr, "-p", "tcp", "--dport", strconv.Itoa(port), "-j", "DROP")
}

// Rules is h's iptables rules, as iptables -S prints them.
func (h *NetHost) Rules(t TB) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", h.NS, "iptables", "-S").CombinedOutput()
	if err != nil {
		t.Fatalf("harness: iptables -S in %s: %v: %s", h.NS, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (h *NetHost) iptables(t TB, args ...string) {
	t.Helper()
	must(t, run("ip", append([]string{"netns", "exec", h.NS, "iptables"}, args...)...))
}

// freeSubnet is the first 10.126.X. (with its trailing dot) from this
// process's id on that no route here overlaps, so that its own route takes
// no traffic from another network.
func freeSubnet(t TB) string {
	t.Helper()
	out, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		t.Fatalf("harness: ip -4 route: %v", err)
	}
	var routes []*net.IPNet
	for _, line := range strings.Split(string(out), "\n") {
		// The destination is the first field, or the second after a
		// route type (local, broadcast, unreachable, …).
		f := strings.Fields(line)
		for _, dst := range f[:min(2, len(f))] {
			if !strings.Contains(dst, "/") {
				dst += "/32"
			}
			if _, n, err := net.ParseCIDR(dst); err == nil {
				routes = append(routes, n)
				break
			}
		}
	}
	for i := range 250 {
		s := "10.126." + strconv.Itoa((os.Getpid()+i)%250+1) + "."
		_, want, _ := net.ParseCIDR(s + "0/24")
		if !slices.ContainsFunc(routes, func(r *net.IPNet) bool { return r.Contains(want.IP) || want.Contains(r.IP) }) {
			return s
		}
	}
	t.Fatalf("harness: every 10.126.X.0/24 overlaps a route here")
	return ""
}

func ipCmd(t TB, args ...string) {
	t.Helper()
	must(t, run("ip", args...))
}

// logErr logs a cleanup's failure, which leaves something behind: the
// command says what.
func logErr(t TB, err error) {
	if err != nil {
		t.Logf("harness: cleanup: %v", err)
	}
}

func must(t TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
