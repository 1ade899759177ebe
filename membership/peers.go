package membership

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/understudy-kv/understudy/promotion"
)

// activePeersMetric is etcd's gauge of its raft transport's peer status
// (rafthttp's peerStatus): 1 while messages to and from that peer flow, 0
// once they fail, by stock etcd v3.6 and v3.7 alike.
const activePeersMetric = "etcd_network_active_peers"

// PeerView is what one member's raft transport says of its peers.
type PeerView struct {
	// Local is the member that answered.
	Local uint64
	// Active is, per peer it has had a link to since it started, whether
	// that link is active now. A peer missing has had no active link since
	// the member started (it has been trying): silent too.
	Active map[uint64]bool
}

// ReadPeerView reads etcd_network_active_peers from a member's /metrics
// (served on its client URLs) and keeps the rows of member local: a
// process that runs several members (embed) exports all their rows.
func ReadPeerView(ctx context.Context, hc *http.Client, clientURL string, local uint64) (PeerView, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/metrics", nil)
	if err != nil {
		return PeerView{}, fmt.Errorf("membership: %s/metrics: %w", clientURL, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return PeerView{}, fmt.Errorf("membership: %s/metrics: %w", clientURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return PeerView{}, fmt.Errorf("membership: %s/metrics: %s", clientURL, resp.Status)
	}
	return ParsePeerView(io.LimitReader(resp.Body, 64<<20), clientURL+"/metrics", local)
}

// ParsePeerView reads member local's rows of a /metrics document; from
// names it in errors.
func ParsePeerView(r io.Reader, from string, local uint64) (PeerView, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return PeerView{}, fmt.Errorf("membership: %s: %w", from, err)
	}
	fam, ok := fams[activePeersMetric]
	if !ok {
		return PeerView{}, fmt.Errorf("membership: %s has no %s (not an etcd member?)", from, activePeersMetric)
	}
	v := PeerView{Local: local, Active: map[uint64]bool{}}
	rows := 0
	for _, m := range fam.GetMetric() {
		of, remote, err := peerLabels(m)
		if err != nil {
			return PeerView{}, fmt.Errorf("membership: %s: %s: %w", from, activePeersMetric, err)
		}
		if of != local {
			continue
		}
		rows++
		v.Active[remote] = m.GetGauge().GetValue() > 0
	}
	if rows == 0 {
		return PeerView{}, fmt.Errorf("membership: %s: no %s of member %x (another member on that URL?)", from, activePeersMetric, local)
	}
	return v, nil
}

func peerLabels(m *dto.Metric) (local, remote uint64, err error) {
	for _, l := range m.GetLabel() {
		var dst *uint64
		switch l.GetName() {
		case "Local":
			dst = &local
		case "Remote":
			dst = &remote
		default:
			continue
		}
		if *dst, err = strconv.ParseUint(l.GetValue(), 16, 64); err != nil {
			return 0, 0, fmt.Errorf("label %s=%q: %w", l.GetName(), l.GetValue(), err)
		}
	}
	if local == 0 || remote == 0 {
		return 0, 0, fmt.Errorf("want labels Local and Remote")
	}
	return local, remote, nil
}

// WitnessOf is what the voters say of voter: views holds each voter's own
// peer view, nil for one that did not answer. The voter itself is no
// witness; every other voter counts in Of, answering or not.
func WitnessOf(voter uint64, views map[uint64]*PeerView) promotion.Witness {
	var w promotion.Witness
	for id, v := range views {
		switch {
		case id == voter:
			continue
		case v == nil:
		case v.Active[voter]:
			w.Active++
		default:
			w.Silent++
		}
		w.Of++
	}
	return w
}
