package compare

import (
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/conn"
)

func TestValidateNamesEveryBadFlag(t *testing.T) {
	c := DefaultConfig()
	c.Local = true
	if err := c.Validate(); err != nil {
		t.Fatalf("the defaults with --local: %v", err)
	}
	c.Fault = FaultReplicaPartition
	if err := c.Validate(); err != nil {
		t.Fatalf("--local --fault replica-partition: %v", err)
	}

	bad := Config{Endpoints: Endpoints{Primary: []string{"127.0.0.1:2379"}, Credentials: conn.Credentials{Cert: "c.pem"}}, Prefix: "/", Duration: time.Second,
		Keys: 5000, Fault: "flood", Doc: "README.md"}
	err := bad.Validate()
	if err == nil {
		t.Fatal("a config bad in every field passed")
	}
	for _, want := range []string{"--primary \"127.0.0.1:2379\"", "--replica", "--cert and --key", "--prefix", "--duration", "--rate", "--keys",
		"--readers", "--read-rate", "--bound", "--request-timeout", "--drain", "--check-timeout", "--fault \"flood\": want one of none, replica-partition, mirror-kill, leader-kill", "--doc"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s:\n%v", want, err)
		}
	}

	remote := DefaultConfig()
	remote.Endpoints = Endpoints{Primary: []string{"http://a:2379"}, Replica: []string{"http://b:2379"}, MirrorDest: []string{"http://c:2379"}}
	if err := remote.Validate(); err != nil {
		t.Fatalf("existing endpoints: %v", err)
	}
	remote.Fault = FaultLeaderKill
	if err := remote.Validate(); err == nil || !strings.Contains(err.Error(), "--local") {
		t.Fatalf("a fault without --local: %v, want an error saying faults need --local", err)
	}
	late := DefaultConfig()
	late.Local, late.Fault, late.FaultAt, late.FaultDuration = true, FaultMirrorKill, 15*time.Second, 10*time.Second
	if err := late.Validate(); err == nil || !strings.Contains(err.Error(), "--fault-at") {
		t.Fatalf("a fault ending after the run: %v", err)
	}
}
