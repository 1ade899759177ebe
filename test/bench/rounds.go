package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// leaderRounds is how many ReadIndex rounds the replicas at urls have asked
// the leader for so far: each one's freshness rounds, less those it
// obtained through another replica (--read-index-via), from their
// /metrics. A row's rounds are the difference across it; its reads per
// round are what the leader's per-round cost is divided by.
func leaderRounds(urls []string) (float64, error) {
	var sum float64
	for _, u := range urls {
		fams, err := scrape(u)
		if err != nil {
			return 0, err
		}
		// A replica that has not finished a round yet exports no sample.
		var n float64
		if rounds := fams["understudy_replica_freshness_round_seconds"]; rounds != nil {
			for _, m := range rounds.Metric {
				n += float64(m.GetHistogram().GetSampleCount())
			}
		}
		if via := fams["understudy_replica_read_index_rounds_total"]; via != nil {
			for _, m := range via.Metric {
				for _, l := range m.Label {
					if l.GetName() == "source" && l.GetValue() == "via" {
						n -= m.GetCounter().GetValue()
					}
				}
			}
		}
		sum += n
	}
	return sum, nil
}

func scrape(url string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s/metrics: %w", url, err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s/metrics: %w", url, err)
	}
	return fams, nil
}
