package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// scrapeFamilies returns, for every understudy_ metric family a /metrics
// page lists, its TYPE and HELP.
func scrapeFamilies(t *testing.T, url string) map[string][2]string {
	t.Helper()
	m := harness.MustScrape(t, url)
	fams := map[string][2]string{}
	for _, name := range m.Names() {
		if strings.HasPrefix(name, "understudy_") {
			fams[name] = [2]string{m.Type(name), m.Help(name)}
		}
	}
	return fams
}

// documentedMetrics are the metric names docs/metrics.md lists, each at the
// start of a table row.
func documentedMetrics(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(understudy_[a-z_]+)").FindAllStringSubmatch(string(b), -1) {
		names = append(names, m[1])
	}
	return names
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", dir, err)
	}
	return dir
}

// productSource is the text of every non-test Go file outside test/.
func productSource(t *testing.T) string {
	t.Helper()
	root := moduleRoot(t)
	var sb strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "test" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sb.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// TestMetricsReferenceListsEveryMetric: every understudy_ metric a live
// standby replica and a live mirror export is in docs/metrics.md, and every
// metric the reference lists is defined in the code (by its name's last
// part), so the reference can be neither short nor stale.
func TestMetricsReferenceListsEveryMetric(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	r := startReplica(t, bins, c, "standby", replicaOpts{Extra: []string{"--role", "standby", "--max-staleness", "1s"}})
	dst := harness.StartCluster(t, harness.ClusterConfig{N: 1, Token: "metrics-dest"})
	mirrorMetrics := harness.URL(harness.FreePort(t))
	harness.Start(t, harness.ProcConfig{Name: "mirror", Bin: bins.Replica, Args: []string{"mirror",
		"--source-endpoints", c.Endpoints()[0], "--dest-endpoints", dst.Endpoints()[0], "--prefix", "m/",
		"--listen-metrics-urls", mirrorMetrics}})
	cli := client(t, r.ClientURL)
	ctx := t.Context()
	if _, err := cli.Put(ctx, "m/k", "v"); err != nil { // a forwarded write, copied by the mirror
		t.Fatal(err)
	}
	if _, err := cli.Get(ctx, "m/k"); err != nil { // a strong read
		t.Fatal(err)
	}
	scraped := scrapeFamilies(t, r.ClientURL+"/metrics")
	harness.WaitFor(t, 30*time.Second, "the mirror's metrics", func() (bool, error) {
		_, err := harness.Scrape(t.Context(), mirrorMetrics+"/metrics", nil)
		return err == nil, err
	})
	for name, e := range scrapeFamilies(t, mirrorMetrics+"/metrics") {
		scraped[name] = e
	}
	documented := documentedMetrics(t)
	var missing []string
	for name, e := range scraped {
		if !slices.Contains(documented, name) {
			missing = append(missing, fmt.Sprintf("| `%s` | %s | %s |", name, e[0], e[1]))
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("docs/metrics.md does not list %d exported metrics; rows to add:\n%s", len(missing), strings.Join(missing, "\n"))
	}
	src := productSource(t)
	for _, name := range documented {
		if _, ok := scraped[name]; ok {
			continue
		}
		parts := strings.SplitN(name, "_", 3) // understudy, subsystem, name
		if len(parts) < 3 || !strings.Contains(src, `"`+parts[2]+`"`) {
			t.Errorf("docs/metrics.md lists %s, which no code defines", name)
		}
	}
	if len(scraped) < 20 {
		t.Fatalf("only %d understudy metrics scraped; the scrape is broken", len(scraped))
	}
	t.Logf("%d metrics exported, %d documented", len(scraped), len(documented))
}
