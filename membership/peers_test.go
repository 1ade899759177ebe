package membership

import (
	"strings"
	"testing"

	"github.com/understudy-kv/understudy/promotion"
)

func TestParsePeerView(t *testing.T) {
	doc := `# HELP etcd_network_active_peers The current number of active peer connections.
# TYPE etcd_network_active_peers gauge
etcd_network_active_peers{Local="8e9e05c52164694d",Remote="91bc3c398fb3c146"} 1
etcd_network_active_peers{Local="8e9e05c52164694d",Remote="fd422379fda50e48"} 0
# HELP etcd_server_has_leader Whether or not a leader exists.
# TYPE etcd_server_has_leader gauge
etcd_server_has_leader 1
`
	v, err := ParsePeerView(strings.NewReader(doc+`etcd_network_active_peers{Local="1",Remote="fd422379fda50e48"} 1`+"\n"), "m1", 0x8e9e05c52164694d)
	if err != nil {
		t.Fatal(err)
	}
	if v.Local != 0x8e9e05c52164694d || !v.Active[0x91bc3c398fb3c146] || v.Active[0xfd422379fda50e48] || v.Active[0x1234] {
		t.Fatalf("view %+v: want local 8e9e…, 91bc… active, fd42… silent, others silent", v)
	}
	for _, bad := range []string{
		"etcd_server_has_leader 1\n",
		`etcd_network_active_peers{Local="zz",Remote="91bc3c398fb3c146"} 1` + "\n",
		`etcd_network_active_peers{Local="1"} 1` + "\n",
		`etcd_network_active_peers{Remote="91bc3c398fb3c146"} 1` + "\n",
		`etcd_network_active_peers{Local="3",Remote="2"} 1` + "\n", // another member's rows only
	} {
		if _, err := ParsePeerView(strings.NewReader(bad), "m1", 0x1); err == nil || !strings.Contains(err.Error(), "m1") {
			t.Errorf("ParsePeerView(%q) = %v, want an error naming the source", bad, err)
		}
	}
}

func TestWitnessOf(t *testing.T) {
	sees := func(active ...uint64) *PeerView {
		v := &PeerView{Active: map[uint64]bool{}}
		for _, id := range active {
			v.Active[id] = true
		}
		return v
	}
	for _, c := range []struct {
		views map[uint64]*PeerView
		want  promotion.Witness
	}{
		{map[uint64]*PeerView{1: sees(3), 2: sees(3), 3: sees(1, 2)}, promotion.Witness{Active: 2, Of: 2}},
		{map[uint64]*PeerView{1: sees(2), 2: sees(1), 3: nil}, promotion.Witness{Silent: 2, Of: 2}},
		{map[uint64]*PeerView{1: nil, 2: sees(1), 3: nil}, promotion.Witness{Silent: 1, Of: 2}},
		{map[uint64]*PeerView{1: nil, 2: nil}, promotion.Witness{Of: 2}},
		{map[uint64]*PeerView{3: sees()}, promotion.Witness{}},
	} {
		if got := WitnessOf(3, c.views); got != c.want {
			t.Errorf("WitnessOf(3, %v) = %+v, want %+v", c.views, got, c.want)
		}
	}
}
