package loopback

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// BlackholeFrom drops all traffic, both ways, of the connections that
// process pid opened to the proxy (open and new ones), until Heal; other
// processes' connections pass. With every member's peer URL behind a proxy,
// it cuts one process's raft links and leaves the rest of the cluster whole.
// (Linux: the owner of a connection is found through /proc.)
func (p *Proxy) BlackholeFrom(pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.cutPIDs == nil {
		p.mu.cutPIDs = map[int]bool{}
	}
	p.mu.cutPIDs[pid] = true
}

// DelayFrom delays, by d each way, the connections that process pid opened
// to the proxy (open and new ones), until Heal.
func (p *Proxy) DelayFrom(pid int, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.delayPIDs == nil {
		p.mu.delayPIDs = map[int]time.Duration{}
	}
	p.mu.delayPIDs[pid] = d
}

// cutByOwner reports whether pr's client is a process cut by BlackholeFrom;
// called with p.mu held.
func (p *Proxy) cutByOwner(pr *pair) bool {
	for pid := range p.mu.cutPIDs {
		if p.ownedBy(pr, pid) {
			return true
		}
	}
	return false
}

// delayByOwner is the DelayFrom delay of pr's client, or 0, and whether a
// process named by DelayFrom (even with 0) holds it; called with p.mu held.
func (p *Proxy) delayByOwner(pr *pair) (d time.Duration, named bool) {
	for pid, pd := range p.mu.delayPIDs {
		if p.ownedBy(pr, pid) {
			d, named = max(d, pd), true
		}
	}
	return d, named
}

// ownedBy reports, once per pair and process, whether pid holds pr's client
// end; called with p.mu held.
func (p *Proxy) ownedBy(pr *pair, pid int) bool {
	owned, ok := pr.owners[pid]
	if !ok {
		owned = ownsConn(pid, pr.client.RemoteAddr(), pr.client.LocalAddr())
		if pr.owners == nil {
			pr.owners = map[int]bool{}
		}
		pr.owners[pid] = owned
	}
	return owned
}

// ownsConn reports whether process pid holds the socket whose local address
// is local and whose peer is remote.
func ownsConn(pid int, local, remote net.Addr) bool {
	inode, err := socketInode(local, remote)
	if err != nil {
		return false
	}
	want := fmt.Sprintf("socket:[%s]", inode)
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && l == want {
			return true
		}
	}
	return false
}

// socketInode finds the inode of the TCP socket local → remote in
// /proc/net/tcp (IPv4 loopback, as the harness uses).
func socketInode(local, remote net.Addr) (string, error) {
	l, lok := local.(*net.TCPAddr)
	r, rok := remote.(*net.TCPAddr)
	if !lok || !rok {
		return "", fmt.Errorf("loopback: not TCP addresses: %v, %v", local, remote)
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return "", err
	}
	defer f.Close()
	wantL, wantR := procAddr(l), procAddr(r)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 9 && fields[1] == wantL && fields[2] == wantR {
			return fields[9], nil
		}
	}
	return "", fmt.Errorf("loopback: no socket %v → %v in /proc/net/tcp", local, remote)
}

// procAddr is a as /proc/net/tcp writes it: the IPv4 address as a
// little-endian hex word, then the port in hex.
func procAddr(a *net.TCPAddr) string {
	ip := a.IP.To4()
	if ip == nil {
		return ""
	}
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], a.Port)
}
