package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is one scrape of a Prometheus text exposition (a /metrics page),
// parsed into its metric families by the parser Prometheus itself uses.
//
// Its queries name series as PromQL does: a counter or gauge by its family
// name, a histogram or summary by its family name plus _bucket (histograms),
// _sum or _count. Labels are given as "name=value"; a label a series does not
// have matches the empty value, as in PromQL.
type Metrics struct {
	fams map[string]*dto.MetricFamily
}

// Series is one sample of a scrape, named as PromQL names it.
type Series struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Scrape fetches and parses the exposition at url (the page itself, e.g.
// "http://127.0.0.1:2379/metrics"). tlsCfg is used for https URLs; nil means
// the default transport.
func Scrape(ctx context.Context, url string, tlsCfg *tls.Config) (Metrics, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Metrics{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	hc := http.DefaultClient
	if tlsCfg != nil {
		tr := &http.Transport{TLSClientConfig: tlsCfg}
		defer tr.CloseIdleConnections()
		hc = &http.Client{Transport: tr}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Metrics{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Metrics{}, fmt.Errorf("scrape %s: %s: %s", url, resp.Status, b)
	}
	m, err := ParseMetrics(resp.Body)
	if err != nil {
		return Metrics{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	return m, nil
}

// MustScrape is Scrape that fails t on an error.
func MustScrape(t TB, url string) Metrics {
	t.Helper()
	m, err := Scrape(context.Background(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ParseMetrics parses a Prometheus text exposition.
func ParseMetrics(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Metrics{}, fmt.Errorf("parse metrics: %w", err)
	}
	return Metrics{fams: fams}, nil
}

// Names are the metric family names of the scrape, sorted.
func (m Metrics) Names() []string {
	names := make([]string, 0, len(m.fams))
	for n := range m.fams {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// SeriesNames are the names of the scrape's series as PromQL names them
// (a histogram as its _bucket, _sum and _count), sorted, each once.
func (m Metrics) SeriesNames() []string {
	seen := map[string]bool{}
	for _, s := range m.Series("") {
		seen[s.Name] = true
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Type is a family's type as the exposition's # TYPE line writes it
// ("counter", "gauge", "histogram", ...), "" if the scrape has no such family.
func (m Metrics) Type(family string) string {
	f := m.fams[family]
	if f == nil {
		return ""
	}
	return strings.ToLower(f.GetType().String())
}

// Help is a family's # HELP text.
func (m Metrics) Help(family string) string { return m.fams[family].GetHelp() }

// Sum is the sum of the series called name whose labels include every
// "name=value" given; 0 if none does.
func (m Metrics) Sum(name string, labels ...string) float64 {
	var sum float64
	for _, s := range m.matching(name, labels) {
		sum += s.Value
	}
	return sum
}

// Value is the value of the one series called name whose labels include every
// "name=value" given; an error if none or several do.
func (m Metrics) Value(name string, labels ...string) (float64, error) {
	ss := m.matching(name, labels)
	if len(ss) != 1 {
		return 0, fmt.Errorf("%d series %s%v in the scrape, want 1", len(ss), name, labels)
	}
	return ss[0].Value, nil
}

// Format writes the series whose names start with prefix, one a line, as the
// exposition does (for a test's log).
func (m Metrics) Format(prefix string) string {
	var sb strings.Builder
	for _, s := range m.Series(prefix) {
		keys := make([]string, 0, len(s.Labels))
		for k := range s.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		pairs := make([]string, len(keys))
		for i, k := range keys {
			pairs[i] = k + "=" + strconv.Quote(s.Labels[k])
		}
		fmt.Fprintf(&sb, "%s{%s} %v\n", s.Name, strings.Join(pairs, ","), s.Value)
	}
	return sb.String()
}

func (m Metrics) matching(name string, labels []string) []Series {
	want := make(map[string]string, len(labels))
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			panic(fmt.Sprintf("harness: label matcher %q of %s is not name=value", l, name))
		}
		want[k] = v
	}
	var out []Series
	for _, s := range m.seriesOf(name) {
		if s.Name == name && hasLabels(s.Labels, want) {
			out = append(out, s)
		}
	}
	return out
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// seriesOf is the series of the family name belongs to: its own, or, for
// x_sum, x_count and x_bucket, those of histogram or summary x.
func (m Metrics) seriesOf(name string) []Series {
	if f := m.fams[name]; f != nil {
		return expand(f)
	}
	for _, suffix := range []string{"_sum", "_count", "_bucket"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && m.fams[base] != nil {
			return expand(m.fams[base])
		}
	}
	return nil
}

// Series are the scrape's series whose names start with prefix, in family
// name order.
func (m Metrics) Series(prefix string) []Series {
	var out []Series
	for _, n := range m.Names() {
		if strings.HasPrefix(n, prefix) || strings.HasPrefix(prefix, n) {
			for _, s := range expand(m.fams[n]) {
				if strings.HasPrefix(s.Name, prefix) {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// expand turns a family into its PromQL series.
func expand(f *dto.MetricFamily) []Series {
	name := f.GetName()
	var out []Series
	for _, mt := range f.GetMetric() {
		labels := map[string]string{}
		for _, lp := range mt.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		add := func(n string, v float64, extra ...string) {
			ls := labels
			if len(extra) == 2 {
				ls = make(map[string]string, len(labels)+1)
				for k, v := range labels {
					ls[k] = v
				}
				ls[extra[0]] = extra[1]
			}
			out = append(out, Series{Name: n, Labels: ls, Value: v})
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			add(name, mt.GetCounter().GetValue())
		case dto.MetricType_GAUGE:
			add(name, mt.GetGauge().GetValue())
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			h := mt.GetHistogram()
			inf := false
			for _, b := range h.GetBucket() {
				inf = math.IsInf(b.GetUpperBound(), 1)
				add(name+"_bucket", float64(b.GetCumulativeCount()), "le", formatFloat(b.GetUpperBound()))
			}
			if !inf { // the parser keeps the +Inf bucket; a family built otherwise may not
				add(name+"_bucket", float64(h.GetSampleCount()), "le", "+Inf")
			}
			add(name+"_sum", h.GetSampleSum())
			add(name+"_count", float64(h.GetSampleCount()))
		case dto.MetricType_SUMMARY:
			s := mt.GetSummary()
			for _, q := range s.GetQuantile() {
				add(name, q.GetValue(), "quantile", formatFloat(q.GetQuantile()))
			}
			add(name+"_sum", s.GetSampleSum())
			add(name+"_count", float64(s.GetSampleCount()))
		default:
			add(name, mt.GetUntyped().GetValue())
		}
	}
	return out
}

func formatFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
