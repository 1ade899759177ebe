package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// connCommand is a command that dials endpoints from flags, as its error
// lines name them.
type connCommand struct {
	name string
	// args are the command's arguments for endpoints and the credentials
	// (ca, cert, key, user), empty ones left out.
	args func(endpoints, ca, cert, key, user string) []string
	// flags name the endpoints' flag and the credentials' in its errors.
	endpoints, ca, cert, key, user, password string
	// dialTimeout is the time the command has to fail in; it must return
	// by three times it.
	dialTimeout time.Duration
	// prefix starts its error lines; code is its exit code for them.
	prefix string
	code   int
}

// TestConnErrorsNameEndpointAndCause runs replica status, replica mirror
// and replica --join against real endpoints that are wrong in one way
// each: a closed port, a blackholed endpoint (a proxy that passes no
// data), a TLS voter (client certificates required) dialled without TLS,
// without its CA or without a client certificate, a plaintext voter
// dialled with TLS, a TLS voter whose certificate lacks 127.0.0.1,
// endpoints of two clusters, and a wrong password on an auth-enabled
// voter. Each command returns within three times its dial timeout (2 s,
// etcdctl's --dial-timeout; the replica's 5 s) with one error line that
// names the flag, the endpoint, the cause and the advice for that cause,
// said once; --join adds no member.
func TestConnErrorsNameEndpointAndCause(t *testing.T) {
	timed(t)
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	certs, other, named := harness.NewCerts(t), harness.NewCerts(t), harness.NewCertsAddressOnly(t)
	tlsVoter := harness.StartCluster(t, harness.ClusterConfig{N: 1, TLS: certs})
	namedVoter := harness.StartCluster(t, harness.ClusterConfig{N: 1, TLS: named})
	plain := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	for _, args := range authSetup {
		harness.MustEtcdctl(t, bins, plain.Endpoints(), args...)
	}
	tlsURL, plainURL, namedURL := tlsVoter.Members[0].ClientURL, plain.Members[0].ClientURL, namedVoter.Members[0].ClientURL
	hole := harness.NewProxy(t, strings.TrimPrefix(plainURL, "http://"))
	hole.Blackhole()
	closed := harness.URL(harness.FreePort(t))
	asPlain := "http://" + strings.TrimPrefix(tlsURL, "https://")
	asTLS := "https://" + strings.TrimPrefix(plainURL, "http://")
	byName := strings.Replace(namedURL, "127.0.0.1", "localhost", 1)

	opt := func(args []string, flag, v string) []string {
		if v == "" {
			return args
		}
		return append(args, flag, v)
	}
	commands := []connCommand{
		{name: "status", endpoints: "--endpoints", ca: "--cacert", cert: "--cert", key: "--key", user: "--user", password: "--password",
			dialTimeout: 2 * time.Second, prefix: "replica status: ", code: 2,
			args: func(eps, ca, cert, key, user string) []string {
				args := []string{"status", "--endpoints", eps}
				args = opt(args, "--cacert", ca)
				args = opt(args, "--cert", cert)
				args = opt(args, "--key", key)
				return opt(args, "--user", user)
			}},
		{name: "leave", endpoints: "--endpoints", ca: "--cacert", cert: "--cert", key: "--key", user: "--user", password: "--password",
			dialTimeout: 2 * time.Second, prefix: "replica leave: ", code: 2,
			args: func(eps, ca, cert, key, user string) []string {
				args := []string{"leave", "m1", "--endpoints", eps}
				args = opt(args, "--cacert", ca)
				args = opt(args, "--cert", cert)
				args = opt(args, "--key", key)
				return opt(args, "--user", user)
			}},
		{name: "mirror", endpoints: "--source-endpoints", ca: "--source-cacert", cert: "--source-cert", key: "--source-key", user: "--source-user", password: "--source-password",
			dialTimeout: 2 * time.Second, prefix: "replica: ", code: 1,
			args: func(eps, ca, cert, key, user string) []string {
				args := []string{"mirror", "--source-endpoints", eps, "--dest-endpoints", plainURL, "--dest-user", "root:rootpw"}
				args = opt(args, "--source-cacert", ca)
				args = opt(args, "--source-cert", cert)
				args = opt(args, "--source-key", key)
				return opt(args, "--source-user", user)
			}},
		{name: "join", endpoints: "--join", ca: "--trusted-ca-file", cert: "--cert-file", key: "--key-file", user: "--user", password: "--password",
			dialTimeout: 5 * time.Second, prefix: "replica: ", code: 1,
			args: func(eps, ca, cert, key, user string) []string {
				args := []string{"--name", "r-conn", "--data-dir", filepath.Join(t.TempDir(), "r.replica"), "--join", eps,
					"--listen-client-urls", harness.URL(harness.FreePort(t)), "--listen-peer-urls", harness.URL(harness.FreePort(t))}
				args = opt(args, "--trusted-ca-file", ca)
				args = opt(args, "--cert-file", cert)
				args = opt(args, "--key-file", key)
				return opt(args, "--user", user)
			}},
	}
	cases := []struct {
		name, endpoints, ca, cert, key, user string
		// want are what the error line says after "FLAG ENDPOINT: ",
		// with {ca}, {cert}, {key}, {user}, {password} and {timeout}
		// for the command's own; want[0] is the cause, said once.
		want []string
	}{
		{name: "closed port", endpoints: closed,
			want: []string{"connection refused", "is etcd running there"}},
		{name: "blackholed", endpoints: hole.URL(),
			want: []string{"connected, but nothing answered within {timeout}", "hung or overloaded"}},
		{name: "plaintext to a TLS voter", endpoints: asPlain,
			want: []string{"the endpoint serves TLS, and the client spoke plaintext", "name it " + tlsURL + ", with {ca}"}},
		{name: "TLS to a plaintext voter", endpoints: asTLS, user: "root:rootpw",
			want: []string{"the endpoint serves plaintext, not TLS", "name it " + plainURL}},
		{name: "unknown authority", endpoints: tlsURL, ca: other.CA, cert: certs.Cert, key: certs.Key,
			want: []string{`TLS: the server's certificate is signed by "CN=understudy test CA", an unknown authority (not a CA in {ca} ` + other.CA + ")", "give {ca} the CA that signed"}},
		{name: "no client certificate", endpoints: tlsURL, ca: certs.CA,
			want: []string{"TLS: the server requires a client certificate and none was given", "give {cert} and {key}"}},
		{name: "name not in the certificate", endpoints: byName, ca: named.CA, cert: named.Cert, key: named.Key,
			want: []string{"TLS: the server's certificate does not cover localhost", "the certificate lists 127.0.0.1", "with localhost in its subject alternative names"}},
		{name: "two clusters", endpoints: tlsURL + "," + plainURL, ca: certs.CA, cert: certs.Cert, key: certs.Key, user: "root:rootpw",
			want: []string{"a member of cluster", "not of the cluster of {endpoints} " + tlsURL, "client URLs of one cluster"}},
		{name: "wrong password", endpoints: plainURL, user: "root:wrong",
			want: []string{`authentication failed for user "root": wrong user name or password`, "check {user} and {password}"}},
	}
	for _, cmd := range commands {
		t.Run(cmd.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					fill := strings.NewReplacer("{ca}", cmd.ca, "{cert}", cmd.cert, "{key}", cmd.key, "{user}", cmd.user,
						"{password}", cmd.password, "{timeout}", cmd.dialTimeout.String(), "{endpoints}", cmd.endpoints)
					limit := 3 * cmd.dialTimeout
					code, stderr := runBounded(t, limit, bins.Replica, cmd.args(c.endpoints, c.ca, c.cert, c.key, c.user)...)
					lines := linesWith(stderr, cmd.prefix)
					if code != cmd.code || len(lines) != 1 {
						t.Fatalf("exit %d with %d error lines, want %d and one line; stderr:\n%s", code, len(lines), cmd.code, harnessTail(stderr))
					}
					line := lines[0]
					// The endpoint that failed: the last one, for two clusters.
					failed := c.endpoints[strings.LastIndex(c.endpoints, ",")+1:]
					if !strings.HasPrefix(line, cmd.prefix+cmd.endpoints+" "+failed+": ") {
						t.Errorf("%s\ndoes not start with the flag and the endpoint", line)
					}
					for _, w := range c.want {
						if w = fill.Replace(w); !strings.Contains(line, w) {
							t.Errorf("%s\ndoes not say %q", line, w)
						}
					}
					if n := strings.Count(stderr, fill.Replace(c.want[0])); n != 1 {
						t.Errorf("the cause is said %d times, want once; stderr:\n%s", n, harnessTail(stderr))
					}
				})
			}
		})
	}
	// compare probes its four sides at once: a --primary that does not
	// answer, and a --replica of another cluster than --primary's.
	t.Run("compare", func(t *testing.T) {
		for _, c := range []struct {
			name             string
			primary, replica string
			line             string
		}{
			{"closed port", closed, plainURL, "replica: --primary " + closed + ": connection refused: nothing listens there"},
			{"two clusters", plainURL, tlsURL, "replica: --replica " + tlsURL + ": a member of cluster"},
		} {
			t.Run(c.name, func(t *testing.T) {
				code, stderr := runBounded(t, 3*2*time.Second, bins.Replica, "compare", "--primary", c.primary, "--replica", c.replica, "--mirror-dest", tlsURL,
					"--user", "root:rootpw", "--cacert", certs.CA, "--cert", certs.Cert, "--key", certs.Key, "--out", "")
				lines := linesWith(stderr, "replica: ")
				if code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], c.line) {
					t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and one line starting %q", code, harnessTail(stderr), c.line)
				}
			})
		}
	})
	// A user the cluster takes but whose role lacks the right: leave
	// names the endpoint, the user and what removing a member needs.
	t.Run("leave/no right", func(t *testing.T) {
		out := harness.MustEtcdctl(t, bins, plain.Endpoints(), "member", "add", "r-entry", "--learner", "--peer-urls", harness.URL(harness.FreePort(t)), "--user", "root:rootpw")
		f := strings.Fields(out) // Member ID added to cluster …
		if len(f) < 2 || f[0] != "Member" {
			t.Fatalf("member add: %q", out)
		}
		id := f[1]
		code, stderr := runBounded(t, time.Minute, bins.Replica, "leave", id, "--endpoints", plainURL, "--user", "alice:alicepw")
		lines := linesWith(stderr, "replica leave: ")
		want := "replica leave: --endpoints " + plainURL + `: permission denied: user "alice" may not make this request (`
		if code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], want) || !strings.Contains(lines[0], "member changes need the root role") {
			t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and one line starting %q, saying what member changes need", code, harnessTail(stderr), want)
		}
		if code, stderr := runBounded(t, time.Minute, bins.Replica, "leave", id, "--endpoints", plainURL, "--user", "root:rootpw"); code != 0 {
			t.Fatalf("leave %s as root: exit %d\n%s", id, code, stderr)
		}
	})
	// No refused --join or leave changed the members.
	for _, c := range []struct {
		cluster *harness.Cluster
		flags   []string
	}{{tlsVoter, certs.EtcdctlFlags()}, {plain, []string{"--user", "root:rootpw"}}} {
		list := harness.MustEtcdctl(t, bins, c.cluster.Endpoints(), append([]string{"member", "list"}, c.flags...)...)
		if n := strings.Count(strings.TrimSpace(list), "\n") + 1; n != 1 {
			t.Errorf("the cluster of %s lists %d members after the refused joins, want its one voter:\n%s", c.cluster.Members[0].ClientURL, n, list)
		}
	}
}

// runBounded runs bin with args, killed at limit, and returns its exit code
// and stderr; it fails the test if bin has not returned by limit.
func runBounded(t *testing.T, limit time.Duration, bin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %s did not return within %v; stderr:\n%s", filepath.Base(bin), strings.Join(args, " "), limit, harnessTail(stderr.String()))
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), stderr.String()
	case err != nil:
		t.Fatalf("%s: %v", bin, err)
	}
	return 0, stderr.String()
}

// linesWith are the lines of s that start with prefix.
func linesWith(s, prefix string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// TestReplicaPeerTLSIsCheckedBeforeJoin: a replica whose peer TLS cannot
// reach the voters' peer URLs (no --peer-trusted-ca-file; no
// --peer-cert-file where the voters require one) would be added as a
// learner that never starts, and removed after --join-timeout. It is
// refused before the join, within three times the replica's dial timeout,
// in one line naming the voter's peer URL, the cause and the flag to give;
// the voters are left as they were.
func TestReplicaPeerTLSIsCheckedBeforeJoin(t *testing.T) {
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	certs := harness.NewCerts(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1, TLS: certs})
	peer := c.Members[0].PeerURL
	https := func() string { return "https" + strings.TrimPrefix(harness.URL(harness.FreePort(t)), "http") }
	for _, tc := range []struct {
		name string
		peer []string
		want []string
	}{
		{"no peer CA", []string{"--listen-peer-urls", https(), "--peer-cert-file", certs.Cert, "--peer-key-file", certs.Key},
			[]string{"replica: voter peer URL " + peer + `: TLS: the server's certificate is signed by "CN=understudy test CA", an unknown authority (not a CA this system trusts; no --peer-trusted-ca-file was given)`,
				"give --peer-trusted-ca-file the CA that signed"}},
		// Plain peer URLs need no certificate of their own; the voters'
		// https ones ask for one.
		{"no peer certificate", []string{"--listen-peer-urls", harness.URL(harness.FreePort(t)), "--peer-trusted-ca-file", certs.CA},
			[]string{"replica: voter peer URL " + peer + ": TLS: the server requires a client certificate and none was given",
				"give --peer-cert-file and --peer-key-file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--name", "r-peer", "--data-dir", filepath.Join(t.TempDir(), "r.replica"), "--join", c.Members[0].ClientURL,
				"--trusted-ca-file", certs.CA, "--cert-file", certs.Cert, "--key-file", certs.Key, "--listen-client-urls", https()}, tc.peer...)
			code, stderr := runBounded(t, 3*5*time.Second, bins.Replica, args...)
			lines := linesWith(stderr, "replica: ")
			if code != 1 || len(lines) != 1 {
				t.Fatalf("exit %d with %d error lines, want 1 and one; stderr:\n%s", code, len(lines), harnessTail(stderr))
			}
			for _, w := range tc.want {
				if !strings.Contains(lines[0], w) {
					t.Errorf("%s\ndoes not say %q", lines[0], w)
				}
			}
			if strings.Contains(stderr, "DNS") || strings.Contains(stderr, "added as a learner") {
				t.Errorf("the replica joined, or blamed DNS; stderr:\n%s", harnessTail(stderr))
			}
			list := harness.MustEtcdctl(t, bins, c.Endpoints(), append([]string{"member", "list"}, certs.EtcdctlFlags()...)...)
			if n := strings.Count(strings.TrimSpace(list), "\n") + 1; n != 1 {
				t.Fatalf("%d members after the refusal, want the one voter:\n%s", n, list)
			}
		})
	}
}
