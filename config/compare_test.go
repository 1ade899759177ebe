package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/conn"
)

func TestCompareValidateNamesEveryBadFlag(t *testing.T) {
	c := DefaultCompare()
	c.Local = true
	if err := c.Validate(); err != nil {
		t.Fatalf("the defaults with --local: %v", err)
	}
	c.Fault = FaultReplicaPartition
	if err := c.Validate(); err != nil {
		t.Fatalf("--local --fault replica-partition: %v", err)
	}

	bad := Compare{Endpoints: CompareEndpoints{Primary: []string{"127.0.0.1:2379"}, Credentials: conn.Credentials{Cert: "c.pem"}}, Prefix: "/", Duration: time.Second,
		Keys: 5000, Fault: "flood", Doc: "README.md", LogLevel: "loud"}
	err := bad.Validate()
	if err == nil {
		t.Fatal("a config bad in every field passed")
	}
	for _, want := range []string{"--primary \"127.0.0.1:2379\"", "--replica", "--cert and --key", "--prefix", "--duration", "--rate", "--keys",
		"--readers", "--read-rate", "--bound", "--request-timeout", "--drain", "--check-timeout", "--fault \"flood\": want one of none, replica-partition, mirror-kill, leader-kill", "--doc",
		`--log-level "loud"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s:\n%v", want, err)
		}
	}

	remote := DefaultCompare()
	remote.Endpoints = CompareEndpoints{Primary: []string{"http://a:2379"}, Replica: []string{"http://b:2379"}, MirrorDest: []string{"http://c:2379"}}
	if err := remote.Validate(); err != nil {
		t.Fatalf("existing endpoints: %v", err)
	}
	remote.Fault = FaultLeaderKill
	if err := remote.Validate(); err == nil || !strings.Contains(err.Error(), "--local") {
		t.Fatalf("a fault without --local: %v, want an error saying faults need --local", err)
	}
	late := DefaultCompare()
	late.Local, late.Fault, late.FaultAt, late.FaultDuration = true, FaultMirrorKill, 15*time.Second, 10*time.Second
	if err := late.Validate(); err == nil || !strings.Contains(err.Error(), "--fault-at") {
		t.Fatalf("a fault ending after the run: %v", err)
	}
}

// TestCompareTakesCredentialsFromTheEnvironment: replica compare reads
// UNDERSTUDY_<FLAG> variables through the loader the other commands use:
// UNDERSTUDY_PASSWORD keeps the password out of ps, and --password wins
// over it; a bad value in a variable is named by the variable.
func TestCompareTakesCredentialsFromTheEnvironment(t *testing.T) {
	clearEnv(t)
	load := func(args ...string) (Compare, error) {
		cfg := DefaultCompare()
		err := LoadCompare(&cfg, NewCompareFlags(&cfg), args)
		return cfg, errors.Join(err, cfg.Validate())
	}
	t.Setenv("UNDERSTUDY_PASSWORD", "envpw")
	t.Setenv("UNDERSTUDY_USER", "cmp")
	cfg, err := load("--local")
	if err != nil {
		t.Fatal(err)
	}
	if u, pw := cfg.Endpoints.UserPassword(); u != "cmp" || pw != "envpw" {
		t.Errorf("UNDERSTUDY_USER, UNDERSTUDY_PASSWORD: user %q password %q, want cmp envpw", u, pw)
	}
	if cfg, err = load("--local", "--password", "flagpw"); err != nil {
		t.Fatal(err)
	}
	if _, pw := cfg.Endpoints.UserPassword(); pw != "flagpw" {
		t.Errorf("--password beside UNDERSTUDY_PASSWORD: password %q, want the flag's", pw)
	}
	t.Setenv("UNDERSTUDY_USER", "")
	if _, err = load("--local"); err == nil || !strings.Contains(err.Error(), "--password: needs --user") {
		t.Errorf("UNDERSTUDY_PASSWORD without a user: %v, want --password refused without --user", err)
	}
	t.Setenv("UNDERSTUDY_DURATION", "soon")
	if _, err = load("--local"); err == nil || !strings.Contains(err.Error(), `UNDERSTUDY_DURATION="soon": not a valid duration`) {
		t.Errorf("UNDERSTUDY_DURATION=soon: %v", err)
	}
}

// TestCompareFlagsLoad: the flags land in the config, the command line is
// recorded for --doc, and a stray argument is refused.
func TestCompareFlagsLoad(t *testing.T) {
	clearEnv(t)
	cfg := DefaultCompare()
	args := []string{"--primary", "http://a:1, http://b:1", "--replica", "http://c:1", "--mirror-dest", "http://d:1", "--fault-at", "2s", "--json"}
	if err := LoadCompare(&cfg, NewCompareFlags(&cfg), args); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Endpoints.Primary, ","); got != "http://a:1,http://b:1" || cfg.FaultAt != 2*time.Second || !cfg.JSON {
		t.Errorf("loaded %+v", cfg)
	}
	if want := "replica compare " + strings.Join(args, " "); cfg.Command != want {
		t.Errorf("Command %q, want %q", cfg.Command, want)
	}
	cfg = DefaultCompare()
	if err := LoadCompare(&cfg, NewCompareFlags(&cfg), []string{"--local", "extra"}); err == nil || !strings.Contains(err.Error(), `"extra": unexpected argument`) {
		t.Errorf("a stray argument: %v", err)
	}
}
