package harness

import (
	"net"
	"strconv"
	"testing"
)

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

func TestFreePortRunIsFreeAndReserved(t *testing.T) {
	const n = 10
	base := FreePortRun(t, n)
	for p := base; p < base+n; p++ {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d of the run %d..%d: %v", p, base, base+n-1, err)
		}
		ln.Close()
	}
	if other := FreePortRun(t, n); other < base+n && base < other+n {
		t.Fatalf("runs %d..%d and %d..%d overlap", base, base+n-1, other, other+n-1)
	}
}
