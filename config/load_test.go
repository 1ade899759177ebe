package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/readindex"
)

func TestReplicaPrecedenceFlagOverEnvOverFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "r.yml")
	writeFile(t, file, "name: from-file\nmax-staleness: 1s\njoin: [http://a:1, http://b:2]\nfreshness-interval: 7ms\n")
	t.Setenv("UNDERSTUDY_MAX_STALENESS", "2s")
	t.Setenv("UNDERSTUDY_FRESHNESS_INTERVAL", "9ms")

	cfg := DefaultReplica()
	fs := NewReplicaFlags(&cfg)
	if err := LoadReplica(&cfg, fs, []string{"--config-file", file, "--freshness-interval=11ms"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "from-file" {
		t.Errorf("name = %q, want the file's value", cfg.Name)
	}
	if cfg.MaxStaleness != 2*time.Second {
		t.Errorf("max-staleness = %v, want the environment's 2s over the file's 1s", cfg.MaxStaleness)
	}
	if cfg.ReadIndex.Interval != 11*time.Millisecond {
		t.Errorf("freshness-interval = %v, want the flag's 11ms over env and file", cfg.ReadIndex.Interval)
	}
	if got := strings.Join(cfg.Learner.Join, ","); got != "http://a:1,http://b:2" {
		t.Errorf("join = %q, want the file's list", got)
	}
	if cfg.DataDir != "from-file.replica" {
		t.Errorf("data-dir = %q, want the default derived from the name", cfg.DataDir)
	}
}

func TestPrimaryReportsEveryProblemOnItsOwnLine(t *testing.T) {
	cfg := DefaultPrimary()
	pf := NewPrimaryFlags(&cfg)
	err := pf.Load([]string{"--bogus", "1", "-listen-peer-urls", "htp:/x", "--max-learners", "-1",
		"--name", "n1", "--initial-cluster", "n2=http://127.0.0.1:2380", "--heartbeat-interval=x"})
	if err == nil {
		t.Fatal("Load accepted bad flags")
	}
	all := err.Error() + "\n" + cfg.Validate().Error()
	for _, want := range []string{
		"--bogus: unknown flag",
		`--listen-peer-urls "htp:/x"`,
		`--heartbeat-interval "x": not a valid whole number`,
		"--max-learners -1: must be 0 or more",
		`--initial-cluster "n2=http://127.0.0.1:2380": has no member named "n1"`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing problem %q in:\n%s", want, all)
		}
	}
	for _, line := range strings.Split(all, "\n") {
		if !strings.HasPrefix(line, "--") {
			t.Errorf("problem line does not start with the flag it is about: %q", line)
		}
	}
}

func TestPrimaryDefaultsAreEtcdsButMaxLearners(t *testing.T) {
	cfg := DefaultPrimary()
	pf := NewPrimaryFlags(&cfg)
	if err := pf.Load(nil); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ec := cfg.Etcd
	if ec.Name != "default" || ec.Dir != "default.etcd" {
		t.Errorf("name, data-dir = %q, %q; want etcd's default and default.etcd", ec.Name, ec.Dir)
	}
	if got := ec.ListenClientUrls[0].String(); got != "http://localhost:2379" {
		t.Errorf("listen-client-urls = %s", got)
	}
	if ec.MaxLearners != DefaultMaxLearners {
		t.Errorf("max-learners = %d, want understudy's %d", ec.MaxLearners, DefaultMaxLearners)
	}
	if ec.InitialCluster != "default=http://localhost:2380" {
		t.Errorf("initial-cluster = %q", ec.InitialCluster)
	}
}

func TestPrimaryNameAloneDerivesClusterAndDataDir(t *testing.T) {
	cfg := DefaultPrimary()
	pf := NewPrimaryFlags(&cfg)
	if err := pf.Load([]string{"--name", "n7", "--initial-advertise-peer-urls", "http://127.0.0.1:9"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Etcd.InitialCluster != "n7=http://127.0.0.1:9" || cfg.Etcd.Dir != "n7.etcd" {
		t.Errorf("initial-cluster %q, data-dir %q", cfg.Etcd.InitialCluster, cfg.Etcd.Dir)
	}
}

func TestPrimaryReadsEtcdConfigFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "etcd.yml")
	writeFile(t, file, `name: infra9
data-dir: /tmp/x
max-learners: 3
listen-client-urls: http://127.0.0.1:5000
advertise-client-urls: http://127.0.0.1:5000
log-outputs: [stderr]
client-transport-security:
  cert-file: /c.pem
peer-transport-security:
  key-file: /p.key
`)
	cfg := DefaultPrimary()
	pf := NewPrimaryFlags(&cfg)
	if err := pf.Load([]string{"--config-file", file, "--max-learners", "5"}); err != nil {
		t.Fatal(err)
	}
	ec := cfg.Etcd
	if ec.Name != "infra9" || ec.Dir != "/tmp/x" || ec.MaxLearners != 5 {
		t.Errorf("name %q dir %q max-learners %d", ec.Name, ec.Dir, ec.MaxLearners)
	}
	if ec.ClientTLSInfo.CertFile != "/c.pem" || ec.PeerTLSInfo.KeyFile != "/p.key" {
		t.Errorf("TLS sections not read: %+v / %+v", ec.ClientTLSInfo.CertFile, ec.PeerTLSInfo.KeyFile)
	}
	if ec.AdvertiseClientUrls[0].String() != "http://127.0.0.1:5000" {
		t.Errorf("advertise-client-urls %v", ec.AdvertiseClientUrls)
	}
}

func TestConfigFileProblemsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, body, want string }{
		{"unknown", "nmae: x\n", `unknown key "nmae"`},
		{"type", "max-learners: many\n", `key "max-learners": value "many": not a valid whole number`},
		{"yaml", "name: [x\n", "not valid YAML"},
		{"section", "client-transport-security: 3\n", `key "client-transport-security": must be a mapping`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, tc.name+".yml")
			writeFile(t, file, tc.body)
			cfg := DefaultPrimary()
			err := NewPrimaryFlags(&cfg).Load([]string{"--config-file=" + file})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	cfg := DefaultPrimary()
	err := NewPrimaryFlags(&cfg).Load([]string{"--config-file", filepath.Join(dir, "absent.yml")})
	if err == nil || !strings.Contains(err.Error(), "cannot read: no such file") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestEnvProblemNamesTheVariable(t *testing.T) {
	t.Setenv("UNDERSTUDY_JOIN_TIMEOUT", "soon")
	cfg := DefaultReplica()
	err := LoadReplica(&cfg, NewReplicaFlags(&cfg), nil)
	if err == nil || !strings.Contains(err.Error(), `UNDERSTUDY_JOIN_TIMEOUT="soon": not a valid duration`) {
		t.Fatalf("error %v", err)
	}
}

func TestReplicaValidate(t *testing.T) {
	cfg := DefaultReplica()
	cfg.Learner.Join = []string{"127.0.0.1:2379"}
	cfg.ListenClientURLs = nil
	cfg.MaxStaleness = -time.Second
	cfg.Learner.ElectionMs = 100
	cfg.ListenMetricsURLs = []string{"https://127.0.0.1:2381"}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad config")
	}
	for _, want := range []string{
		"--listen-metrics-urls https://127.0.0.1:2381: this listener serves plain HTTP only",
		`--join: "127.0.0.1:2379": not a URL; must be scheme://host:port`,
		"--listen-client-urls: must name at least one URL",
		"--max-staleness -1s: must be 0 (no bound) or more",
		"--election-timeout 100: must be at least 5 × --heartbeat-interval",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if err := DefaultReplica().Validate(); err != nil {
		t.Errorf("default replica config invalid: %v", err)
	}
}

func TestReplicaQuietIntervalMustBeSlowerThanTheOthers(t *testing.T) {
	for _, tc := range []struct {
		quiet time.Duration
		want  string
	}{
		{-time.Second, "--freshness-quiet-interval -1s: must be 0 (never quiet) or more than --freshness-interval and --freshness-idle-interval (1s)"},
		{time.Second, "--freshness-quiet-interval 1s: must be 0 (never quiet) or more than --freshness-interval and --freshness-idle-interval (1s)"},
		{0, ""},
		{2 * time.Second, ""},
	} {
		cfg := DefaultReplica()
		cfg.ReadIndex.QuietInterval = tc.quiet
		err := cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("--freshness-quiet-interval %v refused: %v", tc.quiet, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("--freshness-quiet-interval %v: got %v, want %q", tc.quiet, err, tc.want)
		}
	}
	// A replica set up before quiet replicas, with idle rounds 30s or more
	// apart, keeps starting: the default then means never quiet.
	cfg := DefaultReplica()
	cfg.ReadIndex.IdleInterval = time.Minute
	if err := cfg.Validate(); err != nil {
		t.Errorf("--freshness-idle-interval 1m with the default quiet interval refused: %v", err)
	}
	if q := cfg.QuietInterval(); q != 0 {
		t.Errorf("--freshness-idle-interval 1m: quiet interval in force %v, want 0 (never quiet)", q)
	}
	if q := DefaultReplica().QuietInterval(); q != readindex.DefaultQuietInterval {
		t.Errorf("default quiet interval in force %v, want %v", q, readindex.DefaultQuietInterval)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownEnvNamesMisspeltVariables(t *testing.T) {
	cfg := DefaultReplica()
	fs := NewReplicaFlags(&cfg)
	t.Setenv("UNDERSTUDY_FAILOVER_AFTR", "5s")
	t.Setenv("UNDERSTUDY_FAILOVER_AFTER", "5s")
	t.Setenv("UNDERSTUDY_MAX_STALENESS", "1s")
	if got := UnknownEnv(fs); len(got) != 1 || got[0] != "UNDERSTUDY_FAILOVER_AFTR" {
		t.Fatalf("UnknownEnv = %v, want [UNDERSTUDY_FAILOVER_AFTR]", got)
	}
}

// An etcd unit file's ETCD_* environment works for the primary as it does
// for etcd; UNDERSTUDY_* overrides it, a flag overrides both, and an
// ETCD_* variable that names no flag is reported.
func TestPrimaryReadsEtcdsEnvironment(t *testing.T) {
	t.Setenv("ETCD_NAME", "from-etcd")
	t.Setenv("ETCD_SNAPSHOT_COUNT", "1234")
	t.Setenv("ETCD_HEARTBEAT_INTERVAL", "50")
	t.Setenv("UNDERSTUDY_HEARTBEAT_INTERVAL", "60")
	t.Setenv("ETCD_NO_SUCH_FLAG", "1")
	cfg := DefaultPrimary()
	pf := NewPrimaryFlags(&cfg)
	if err := pf.Load([]string{"--snapshot-count", "99"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Etcd.Name != "from-etcd" || cfg.Etcd.SnapshotCount != 99 || cfg.Etcd.TickMs != 60 {
		t.Errorf("name %q, snapshot-count %d, heartbeat %d; want from-etcd (ETCD_NAME), 99 (the flag), 60 (UNDERSTUDY_ over ETCD_)", cfg.Etcd.Name, cfg.Etcd.SnapshotCount, cfg.Etcd.TickMs)
	}
	if got := UnknownEnv(pf.FS, EtcdEnvPrefix, EnvPrefix); !slices.Contains(got, "ETCD_NO_SUCH_FLAG") {
		t.Errorf("UnknownEnv = %v, want ETCD_NO_SUCH_FLAG in it", got)
	}
	// The replica is not etcd: it does not read ETCD_*.
	rcfg := DefaultReplica()
	if err := LoadReplica(&rcfg, NewReplicaFlags(&rcfg), nil); err != nil || rcfg.Name == "from-etcd" {
		t.Errorf("replica: name %q, %v; ETCD_NAME must not reach it", rcfg.Name, err)
	}
}
