package balancer

import (
	"context"
	"encoding/json"

	"go.etcd.io/etcd/client/v3/naming/endpoints"
	"go.uber.org/zap"
)

// announced is a replica that announced itself (a cascaded replica:
// Config.Announced).
type announced struct {
	name, url string
}

// announcedReplicas lists the replicas announced under Config.Announced
// (etcd's naming format: key -> {"Addr", "Metadata"}); on a failure (no
// permission to read there, no voter answering), the last list read.
func (b *Balancer) announcedReplicas(ctx context.Context) []announced {
	if b.cfg.IgnoreAnnounced {
		return nil
	}
	em, err := endpoints.NewManager(b.ctl, b.cfg.Announced)
	if err == nil {
		var eps endpoints.Key2EndpointMap
		if eps, err = em.List(ctx); err == nil {
			var list []announced
			for key, ep := range eps {
				a := announced{name: key, url: ep.Addr}
				var meta struct {
					Name string `json:"name"`
				}
				if raw, merr := json.Marshal(ep.Metadata); merr == nil && json.Unmarshal(raw, &meta) == nil && meta.Name != "" {
					a.name = meta.Name
				}
				if a.url != "" {
					list = append(list, a)
				}
			}
			b.lastAnnounced = list
			return list
		}
	}
	b.lg.Debug("balancer: listing announced replicas failed; keeping the last list", zap.String("prefix", b.cfg.Announced), zap.Error(err))
	return b.lastAnnounced
}
