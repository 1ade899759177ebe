package replica

import (
	"net/url"
	"strings"
	"testing"

	"github.com/understudy-kv/understudy/config"
)

func TestSameListener(t *testing.T) {
	for _, tc := range []struct {
		join, own string
		same      bool
	}{
		{"http://127.0.0.1:2479", "http://127.0.0.1:2479", true},
		{"https://localhost:2479", "http://127.0.0.1:2479", true},
		{"http://[::1]:2479", "http://localhost:2479", true},
		{"http://127.0.0.1:2479", "http://0.0.0.0:2479", true},
		{"http://Replica.example:2479", "http://replica.example:2479", true},
		{"http://127.0.0.1:2379", "http://127.0.0.1:2479", false},
		{"http://10.255.255.1:2479", "http://127.0.0.1:2479", false},
		{"http://voter.example:2479", "http://0.0.0.0:2479", false},
	} {
		j, _ := url.Parse(tc.join)
		o, _ := url.Parse(tc.own)
		if got := sameListener(j, o); got != tc.same {
			t.Errorf("sameListener(%s, %s) = %v, want %v", tc.join, tc.own, got, tc.same)
		}
	}
}

func TestJoinsItself(t *testing.T) {
	cfg := learnerConfig{Front: config.DefaultFront(), Learner: config.DefaultLearner()}
	cfg.ListenClientURLs = []string{"http://0.0.0.0:2479"}
	cfg.AdvertiseClientURLs = []string{"http://10.0.0.5:2479"}
	cfg.Join = []string{"http://10.0.0.1:2379", "http://10.0.0.5:2479"}
	err := joinsItself(cfg)
	if err == nil || !strings.Contains(err.Error(), "--join http://10.0.0.5:2479") {
		t.Fatalf("joinsItself = %v; want --join http://10.0.0.5:2479 refused", err)
	}
	cfg.Join = cfg.Join[:1]
	if err := joinsItself(cfg); err != nil {
		t.Fatalf("joinsItself(voters only) = %v", err)
	}
}
