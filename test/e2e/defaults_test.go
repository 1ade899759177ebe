package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// Nothing joins, copies or publishes by default (issue 56): a replica or
// mirror told no cluster refuses at once and changes no cluster, even with
// a voter answering where the old default pointed; an unspecified listen
// address without its advertise flag is refused before anything is added;
// and each kind of replica refuses the other's data dir.

// oldDefault is where `replica` joined, and `replica mirror` copied from,
// when told nothing.
const oldDefault = "127.0.0.1:2379"

// forwardOldDefault makes the old default reach c's first voter, if that
// port is free: what a replica beside a production voter would have
// joined. It reports whether it does.
func forwardOldDefault(t *testing.T, c *harness.Cluster) bool {
	t.Helper()
	ln, err := net.Listen("tcp", oldDefault)
	if err != nil {
		t.Logf("%s is taken (%v): checking the refusals alone, against a cluster elsewhere", oldDefault, err)
		return false
	}
	target := strings.TrimPrefix(c.Members[0].ClientURL, "http://")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(out, in); out.Close() }()
			go func() { defer wg.Done(); _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return true
}

// refuses runs bin with args and checks that it exits 2 within 30 s,
// printing exactly one line that starts with prefix and says each of
// wants; it returns that line.
func refuses(t *testing.T, bin, prefix string, args []string, wants ...string) string {
	t.Helper()
	return refusesWith(t, harness.ProcConfig{Name: filepath.Base(bin), Bin: bin, Args: args}, prefix, wants...)
}

// refusesWith is refuses for a process with an environment of its own.
func refusesWith(t *testing.T, pc harness.ProcConfig, prefix string, wants ...string) string {
	t.Helper()
	bin, args := pc.Bin, pc.Args
	p := harness.Start(t, pc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, err := p.Wait(ctx)
	if err != nil {
		p.Kill()
		t.Fatalf("%s %s: still running after 30 s, want a refusal", filepath.Base(bin), strings.Join(args, " "))
	}
	var said []string
	for _, l := range strings.Split(p.Log(), "\n") {
		if strings.HasPrefix(l, prefix) {
			said = append(said, l)
		}
	}
	if code != 2 || len(said) != 1 {
		t.Fatalf("%s %s: exit %d with %d lines %q, want exit 2 and one line", filepath.Base(bin), strings.Join(args, " "), code, len(said), said)
	}
	mustContain(t, said[0], wants...)
	t.Logf("refused: %s", said[0])
	return said[0]
}

// memberList is a cluster's members as IDs, names and URLs, for
// "unchanged".
func memberList(t *testing.T, c *harness.Cluster) []string {
	t.Helper()
	_, ms := members(t, c)
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%x %s %v %v learner=%v", m.ID, m.Name, m.PeerURLs, m.ClientURLs, m.IsLearner))
	}
	slices.Sort(out)
	return out
}

func sameMembers(t *testing.T, c *harness.Cluster, before []string) {
	t.Helper()
	if after := memberList(t, c); !slices.Equal(after, before) {
		t.Fatalf("the member list changed:\n  before %q\n  after  %q", before, after)
	}
}

// A replica with no --join, --upstream or data dir of its own refuses at
// once, naming the flags, and adds no member, though a voter answers on
// 127.0.0.1:2379; a mirror with no --source-endpoints copies nothing.
func TestNothingJoinsOrCopiesByDefault(t *testing.T) {
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	dst := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	forwarded := forwardOldDefault(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := client(t, c.Endpoints()...).Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if forwarded {
		// The old defaults' cluster: the voter, through the forward.
		if _, err := client(t, "http://"+oldDefault).Get(ctx, "k"); err != nil {
			t.Fatalf("the voter through %s: %v", oldDefault, err)
		}
	}

	t.Run("replica", func(t *testing.T) {
		before := memberList(t, c)
		dataDir := filepath.Join(t.TempDir(), "r.replica")
		refuses(t, bins.Replica, "replica: ", []string{"--name", "r-nojoin", "--data-dir", dataDir,
			"--listen-peer-urls", harness.URL(harness.FreePort(t)), "--listen-client-urls", harness.URL(harness.FreePort(t))},
			"--join", "--upstream", dataDir, "nothing was added")
		sameMembers(t, c, before)
		if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
			t.Fatalf("the refused replica left %s: %v", dataDir, err)
		}
	})
	t.Run("mirror", func(t *testing.T) {
		dcli := client(t, dst.Endpoints()...)
		before, err := dcli.Get(ctx, "", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		refuses(t, bins.Replica, "replica: ", []string{"mirror", "--dest-endpoints", dst.Endpoints()[0]}, "--source-endpoints", "required")
		after, err := dcli.Get(ctx, "", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		if after.Header.Revision != before.Header.Revision || after.Count != 0 {
			t.Fatalf("the destination changed: revision %d → %d, %d keys", before.Header.Revision, after.Header.Revision, after.Count)
		}
	})
}

// An unspecified listen address (0.0.0.0, [::]) without its advertise flag
// is refused, naming both flags, and so is an unspecified advertised
// address; the member list stays as it was. The primary refuses an explicit
// --listen-client-urls without --advertise-client-urls, as etcd does.
func TestUnspecifiedListenWithoutAdvertiseIsRefused(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	port := func() string { return fmt.Sprint(harness.FreePort(t)) }
	for _, tc := range []struct {
		name  string
		args  []string
		wants []string
	}{
		{"peer-0.0.0.0", []string{"--listen-peer-urls", "http://0.0.0.0:" + port(), "--listen-client-urls", harness.URL(harness.FreePort(t))},
			[]string{"--listen-peer-urls http://0.0.0.0:", "give --initial-advertise-peer-urls"}},
		{"peer-[::]", []string{"--listen-peer-urls", "http://[::]:" + port(), "--listen-client-urls", harness.URL(harness.FreePort(t))},
			[]string{"--listen-peer-urls http://[::]:", "give --initial-advertise-peer-urls"}},
		{"client-0.0.0.0", []string{"--listen-peer-urls", harness.URL(harness.FreePort(t)), "--listen-client-urls", "http://0.0.0.0:" + port()},
			[]string{"--listen-client-urls http://0.0.0.0:", "give --advertise-client-urls"}},
		{"advertised-peer-0.0.0.0", []string{"--listen-peer-urls", harness.URL(harness.FreePort(t)), "--initial-advertise-peer-urls", "http://0.0.0.0:" + port(),
			"--listen-client-urls", harness.URL(harness.FreePort(t))},
			[]string{"--initial-advertise-peer-urls http://0.0.0.0:", "no address others can reach"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := memberList(t, c)
			dataDir := filepath.Join(t.TempDir(), "r.replica")
			args := append([]string{"--name", "r-" + tc.name, "--data-dir", dataDir, "--join", c.Endpoints()[0], "--join-timeout", "60s"}, tc.args...)
			refuses(t, bins.Replica, "replica: ", args, tc.wants...)
			sameMembers(t, c, before)
		})
	}
	t.Run("primary-client-0.0.0.0", func(t *testing.T) {
		refuses(t, bins.Primary, "primary: ", []string{"--name", "p", "--data-dir", filepath.Join(t.TempDir(), "p.etcd"),
			"--listen-client-urls", "http://0.0.0.0:" + port(), "--listen-peer-urls", harness.URL(harness.FreePort(t)),
			"--initial-advertise-peer-urls", harness.URL(harness.FreePort(t))}, "--advertise-client-urls")
	})
}

// treeSum is every file under dir with its size and content hash: what
// "nothing moved or lost" compares.
func treeSum(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out = append(out, rel+"/")
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %d %x", rel, len(b), sha256.Sum256(b)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, dir string, before []string) {
	t.Helper()
	if after := treeSum(t, dir); !slices.Equal(after, before) {
		t.Fatalf("%s changed:\n  before %q\n  after  %q", dir, before, after)
	}
}

// A learner replica started on a stopped cascaded replica's data dir is
// refused, naming the store it found and the fix, and joins nothing; a
// cascaded replica started on a stopped learner replica's data dir is
// refused likewise. Neither data dir changes.
func TestDataDirsAreRefusedAcrossKinds(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	up := startReplica(t, bins, c, "up", replicaOpts{})
	cas := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "cas", Upstream: []string{up.ClientURL}})
	cas.Stop()
	lrn := startReplica(t, bins, c, "lrn", replicaOpts{})
	lrn.Stop()

	t.Run("learner-on-cascaded", func(t *testing.T) {
		before, files := memberList(t, c), treeSum(t, cas.DataDir)
		r := startReplica(t, bins, c, "lrn2", replicaOpts{NoWait: true, Extra: []string{"--data-dir", cas.DataDir}})
		mustContain(t, exitsWithin(t, r, 30*time.Second), "cascaded replica's store", filepath.Join(cas.DataDir, "store"), "another --data-dir", "--upstream", "nothing was changed")
		sameMembers(t, c, before)
		sameTree(t, cas.DataDir, files)
	})
	t.Run("cascaded-on-learner", func(t *testing.T) {
		before, files := memberList(t, c), treeSum(t, lrn.DataDir)
		r := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "cas2", Upstream: []string{up.ClientURL}, NoWait: true,
			Extra: []string{"--data-dir", lrn.DataDir, "--join-timeout", "20s"}})
		mustContain(t, exitsWithin(t, r, 30*time.Second), "holds an etcd member", filepath.Join(lrn.DataDir, "member"), "another --data-dir", "nothing was changed")
		sameMembers(t, c, before)
		sameTree(t, lrn.DataDir, files)
	})
}

// A replica restarted with no --join on its own data dir comes back as the
// same member, through the members its data dir's member list names.
func TestReplicaRestartsWithoutJoin(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	id, _ := memberID(t, client(t, c.Endpoints()...), r.ClientURL)
	r.Stop()
	before := memberList(t, c)
	var args []string
	for i := 0; i < len(r.Args()); i++ {
		if a := r.Args()[i]; a == "--join" {
			i++ // and its value
			continue
		}
		args = append(args, r.Args()[i])
	}
	r.RestartWithArgs(t, args)
	r.WaitServing(t, time.Minute)
	if again, _ := memberID(t, client(t, c.Endpoints()...), r.ClientURL); again != id {
		t.Fatalf("restarted as member %x, was %x", again, id)
	}
	sameMembers(t, c, before)
	mustContain(t, r.Log(), "no --join: restarting through the members")
	u, _ := url.Parse(c.Members[0].ClientURL)
	mustContain(t, r.Log(), u.Host)
}

// A bad value is printed once, on one line naming the flag or variable and
// what is valid: `--role bogus` (it printed its error twice, and a third
// line for the role it then held), a bad UNDERSTUDY_JOIN_TIMEOUT (with a
// second, wrong error about the 0s it then held).
func TestBadInputIsPrintedOnce(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	base := []string{"--join", harness.URL(harness.FreePort(t)), "--data-dir", filepath.Join(t.TempDir(), "r.replica")}
	line := refuses(t, bins.Replica, "replica: ", append(base, "--role", "bogus"), `--role "bogus": want one of reader, standby, voter`)
	if strings.Count(line, "--role") != 1 {
		t.Errorf("%q names --role more than once", line)
	}
	refusesWith(t, harness.ProcConfig{Name: "replica", Bin: bins.Replica, Args: base, Env: []string{"UNDERSTUDY_JOIN_TIMEOUT=bogus"}},
		"replica: ", `UNDERSTUDY_JOIN_TIMEOUT="bogus": not a valid duration (such as 500ms, 10s, 2m)`)
	refusesWith(t, harness.ProcConfig{Name: "primary", Bin: bins.Primary, Args: []string{"--data-dir", filepath.Join(t.TempDir(), "p.etcd")},
		Env: []string{"ETCD_HEARTBEAT_INTERVAL=soon"}}, "primary: ", `ETCD_HEARTBEAT_INTERVAL="soon": not a valid whole number`)
}
