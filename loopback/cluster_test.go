package loopback

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestClusterConfigValidateNamesEveryBadField(t *testing.T) {
	err := ClusterConfig{N: 2, Kinds: []Kind{KindEtcd, KindEtcd, KindEtcd}, TLS: &Certs{}, PeerProxies: true, Hosts: []Host{{Addr: "10.0.0.1"}}}.Validate()
	for _, want := range []string{"ClusterConfig.Bins", "N=2 with 3 kinds", "PeerProxies and ClientProxies", "1 hosts for 2 members", "Hosts is for plain http"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want it to say %q", err, want)
		}
	}
	if err := (ClusterConfig{Bins: &Bins{}}).Validate(); err != nil {
		t.Errorf("Validate of a plain 3-member cluster: %v", err)
	}
}

// A member that exits while the cluster starts ends the wait, rather than
// the deadline, with why: here a shell given etcd's flags, which it
// refuses.
func TestStartClusterSaysWhyAMemberExited(t *testing.T) {
	e := testEnv(t)
	_, err := StartCluster(e, ClusterConfig{Bins: &Bins{Primary: "/bin/sh"}, N: 1})
	if err == nil {
		t.Fatal("StartCluster of a member that cannot start: no error")
	}
	for _, want := range []string{"member m1 (primary) exited while the cluster was starting", "exit status", "its log ends:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("StartCluster: %v; want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "not within") {
		t.Errorf("StartCluster: %v; want the exit to end the wait, not the deadline", err)
	}
	t.Log(err)
}

func TestWaitForStopsAtAStopError(t *testing.T) {
	calls := 0
	cause := errors.New("gone for good")
	err := WaitFor(time.Minute, "something", func() (bool, error) {
		calls++
		if calls == 2 {
			return false, stop{cause}
		}
		return false, errors.New("not yet")
	})
	if !errors.Is(err, cause) || calls != 2 {
		t.Fatalf("WaitFor: %v after %d calls; want the stop's cause after 2", err, calls)
	}
	err = WaitFor(50*time.Millisecond, "something", func() (bool, error) { return false, errors.New("not yet") })
	if err == nil || !strings.Contains(err.Error(), "something: not within 50ms (last error: not yet)") {
		t.Fatalf("WaitFor past its deadline: %v", err)
	}
}
