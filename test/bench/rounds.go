package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/understudy-kv/understudy/test/harness"
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

// quietInterval is the --freshness-quiet-interval that args (the replicas'
// extra arguments) leave in force: the replica's default, 30s, unless they
// set it; 0 means never quiet.
func quietInterval(args []string) time.Duration {
	d := 30 * time.Second
	for i, a := range args {
		v, ok := strings.CutPrefix(a, "--freshness-quiet-interval=")
		if !ok && a == "--freshness-quiet-interval" && i+1 < len(args) {
			v, ok = args[i+1], true
		}
		if ok {
			if q, err := time.ParseDuration(v); err == nil {
				d = q
			}
		}
	}
	return d
}

// waitQuiet waits until every replica at urls runs its background rounds at
// its quiet interval (understudy_replica_freshness_period_seconds): one no
// client has asked anything for that long, as an idle replica is. It returns
// at once if args keep replicas from going quiet.
func waitQuiet(r *runner, urls, args []string) {
	q := quietInterval(args)
	if q <= 0 {
		return
	}
	harness.WaitFor(r, q+time.Minute, "every replica quiet", func() (bool, error) {
		for _, u := range urls {
			fams, err := scrape(u)
			if err != nil {
				return false, err
			}
			var p float64
			if f := fams["understudy_replica_freshness_period_seconds"]; f != nil && len(f.Metric) > 0 {
				p = f.Metric[0].GetGauge().GetValue()
			}
			if time.Duration(p*float64(time.Second)) != q {
				return false, fmt.Errorf("%s: background rounds every %vs, not yet every %v", u, p, q)
			}
		}
		return true, nil
	})
}
