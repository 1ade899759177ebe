package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// Files under test, relative to this package.
var (
	dashboardFile      = filepath.Join("..", "..", "deploy", "monitoring", "dashboard.json")
	rulesFile          = filepath.Join("..", "..", "deploy", "monitoring", "alerts.yaml")
	rulesTestFile      = filepath.Join("..", "..", "deploy", "monitoring", "alerts_test.yaml")
	prometheusRuleFile = filepath.Join("..", "..", "deploy", "kubernetes", "monitoring", "prometheusrule.yaml")
)

// external are the metrics the alert rules may name that neither a replica
// nor a mirror exports, and who exports them.
var external = map[string]string{
	"up":                    "Prometheus, for every target it scrapes",
	"kube_pod_status_ready": "kube-state-metrics",
}

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"` // a string, or {"query": …}
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int                      `json:"id"`
	Type    string                   `json:"type"`
	Title   string                   `json:"title"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource map[string]any `json:"datasource"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardFile, err)
	}
	return d
}

// labelValues matches Grafana's label_values(metric selector, label).
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*[a-zA-Z_]+\)$`)

// dashboardQueries are the PromQL expressions of every panel and variable,
// each with where it is.
func dashboardQueries(t *testing.T, d dashboard) map[string]string {
	t.Helper()
	q := map[string]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			q[fmt.Sprintf("panel %d %q target %s", p.ID, p.Title, tg.RefID)] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		s, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			s, _ = m["query"].(string)
		}
		sub := labelValues.FindStringSubmatch(s)
		if sub == nil {
			t.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, s)
			continue
		}
		q["variable "+v.Name] = sub[1]
	}
	return q
}

// TestDashboardIsWellFormed: the dashboard loads (valid JSON), every panel
// has a query through the dashboard's data source variable, ids are unique
// and panels stay within the 24-column grid without overlapping.
func TestDashboardIsWellFormed(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q, title %q: both are needed to import and link it", d.UID, d.Title)
	}
	ids := map[int]bool{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %d %q: gridPos %+v is outside the 24-column grid", p.ID, p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Errorf("panel %d %q overlaps %s at column %d, row %d", p.ID, p.Title, other, x, y)
				}
				taken[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %d %q has no query", p.ID, p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %d %q target %s: empty expr", p.ID, p.Title, tg.RefID)
			}
			if tg.Datasource["uid"] != "${datasource}" {
				t.Errorf("panel %d %q target %s: data source %v, want the ${datasource} variable", p.ID, p.Title, tg.RefID, tg.Datasource)
			}
		}
	}
	for where, expr := range dashboardQueries(t, d) {
		if names, err := MetricNames(expr); err != nil || len(names) == 0 {
			t.Errorf("%s: %q names no metric (%v)", where, expr, err)
		}
	}
}

type rulesDoc struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func loadYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// alertQueries are the rules' expressions by alert name.
func alertQueries(t *testing.T) map[string]string {
	t.Helper()
	var doc rulesDoc
	loadYAML(t, rulesFile, &doc)
	q := map[string]string{}
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			q["alert "+r.Alert] = r.Expr
		}
	}
	return q
}

// TestAlertRulesAreWellFormed: the rules file parses, every rule is an
// alert with an expression naming a metric, a for, a severity and a
// summary and description.
func TestAlertRulesAreWellFormed(t *testing.T) {
	var doc rulesDoc
	loadYAML(t, rulesFile, &doc)
	n := 0
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" {
				t.Errorf("group %s: a rule without an alert name (expr %q)", g.Name, r.Expr)
			}
			if names, err := MetricNames(r.Expr); err != nil || len(names) == 0 {
				t.Errorf("alert %s: expr %q names no metric (%v)", r.Alert, r.Expr, err)
			}
			if r.For == "" || !slices.Contains([]string{"warning", "critical"}, r.Labels["severity"]) ||
				r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: wants a for, severity warning or critical, a summary and a description", r.Alert)
			}
		}
	}
	if n == 0 {
		t.Fatalf("%s has no rules", rulesFile)
	}
}

// TestPrometheusRuleIsTheRulesFile: the PrometheusRule's groups are the
// rules file's, so promtool tests what Kubernetes runs.
func TestPrometheusRuleIsTheRulesFile(t *testing.T) {
	var rules map[string]any
	loadYAML(t, rulesFile, &rules)
	var pr struct {
		APIVersion string         `yaml:"apiVersion"`
		Kind       string         `yaml:"kind"`
		Spec       map[string]any `yaml:"spec"`
	}
	loadYAML(t, prometheusRuleFile, &pr)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("%s is a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", prometheusRuleFile, pr.APIVersion, pr.Kind)
	}
	if !reflect.DeepEqual(pr.Spec["groups"], rules["groups"]) {
		t.Errorf("%s's groups differ from %s: run scripts/gen-prometheusrule.sh", prometheusRuleFile, rulesFile)
	}
}

// TestEveryAlertHasAFiringAndAQuietTest: alerts_test.yaml (run by promtool
// in scripts/test-alerts.sh) tests every alert of the rules file at least
// once expecting it to fire and once expecting it not to.
func TestEveryAlertHasAFiringAndAQuietTest(t *testing.T) {
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name          string `yaml:"name"`
			AlertRuleTest []struct {
				AlertName string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	loadYAML(t, rulesTestFile, &tests)
	if !slices.Contains(tests.RuleFiles, filepath.Base(rulesFile)) {
		t.Errorf("%s tests %v, not %s", rulesTestFile, tests.RuleFiles, filepath.Base(rulesFile))
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	for name := range alertQueries(t) {
		alert := strings.TrimPrefix(name, "alert ")
		if !fires[alert] {
			t.Errorf("%s: no test in %s expects it to fire", alert, rulesTestFile)
		}
		if !quiet[alert] {
			t.Errorf("%s: no test in %s expects it not to fire", alert, rulesTestFile)
		}
	}
}
