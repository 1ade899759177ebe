package balancer

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"

	"go.etcd.io/etcd/client/v3/naming/endpoints"
	"go.uber.org/zap"
)

// announced is a replica that announced itself (a cascaded replica:
// Config.Announced).
type announced struct {
	name, url string
}

// announcements follows the replicas announced under Config.Announced
// (etcd's naming format: key -> {"Addr", "Metadata"}) with one read and
// then a watch, through the discovery client: served by the replicas once
// they are known, and not asked again at every refresh. It hands each new
// list to the loop (changes). A read that fails, or a watch that ends
// (compacted, no permission to read there), is tried again after
// ProbeInterval; the loop keeps the last list meanwhile.
type announcements struct {
	b       *Balancer
	changes chan []announced
	done    chan struct{}
}

func newAnnouncements(b *Balancer) *announcements {
	return &announcements{b: b, changes: make(chan []announced), done: make(chan struct{})}
}

// run follows the announcements until ctx ends.
func (a *announcements) run(ctx context.Context) {
	defer close(a.done)
	for {
		current, wch, err := a.open(ctx)
		if err == nil && a.hand(ctx, current) {
			a.follow(ctx, current, wch)
		} else if err != nil && ctx.Err() == nil {
			a.b.lg.Debug("balancer: reading the announced replicas failed; keeping the last list", zap.String("prefix", a.b.cfg.Announced), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			if wch != nil {
				for range wch { // closed once etcd's watch goroutine has seen ctx end
				}
			}
			return
		case <-a.b.clock.After(a.b.cfg.ProbeInterval):
		}
	}
}

// open reads the announcements and opens their watch.
func (a *announcements) open(ctx context.Context) (map[string]announced, endpoints.WatchChannel, error) {
	em, err := endpoints.NewManager(a.b.ctl, a.b.cfg.Announced)
	if err != nil {
		return nil, nil, err
	}
	wch, err := em.NewWatchChannel(ctx)
	if err != nil {
		return nil, nil, err
	}
	current := map[string]announced{}
	// What the read found is in the channel when NewWatchChannel returns
	// (nothing if nothing is announced).
	select {
	case ups := <-wch:
		apply(current, ups)
	default:
	}
	return current, wch, nil
}

// follow applies the watch's updates to current and hands each new list
// to the loop, until the watch ends.
func (a *announcements) follow(ctx context.Context, current map[string]announced, wch endpoints.WatchChannel) {
	for ups := range wch {
		apply(current, ups)
		if !a.hand(ctx, current) {
			return
		}
	}
}

// hand gives the loop current as a list; false once ctx ended.
func (a *announcements) hand(ctx context.Context, current map[string]announced) bool {
	list := make([]announced, 0, len(current))
	for _, r := range current {
		list = append(list, r)
	}
	slices.SortFunc(list, func(x, y announced) int { return cmp.Compare(x.url, y.url) })
	select {
	case a.changes <- list:
		return true
	case <-ctx.Done():
		return false
	}
}

// apply applies etcd naming updates to current (key -> replica).
func apply(current map[string]announced, ups []*endpoints.Update) {
	for _, u := range ups {
		if u.Op != endpoints.Add || u.Endpoint.Addr == "" {
			delete(current, u.Key)
			continue
		}
		r := announced{name: u.Key, url: u.Endpoint.Addr}
		var meta struct {
			Name string `json:"name"`
		}
		if raw, err := json.Marshal(u.Endpoint.Metadata); err == nil && json.Unmarshal(raw, &meta) == nil && meta.Name != "" {
			r.name = meta.Name
		}
		current[u.Key] = r
	}
}
