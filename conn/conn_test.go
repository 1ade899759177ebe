package conn

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestValidateNamesEveryBadFlag(t *testing.T) {
	f := Flags{Endpoints: []string{"127.0.0.1:2379"}, Credentials: Credentials{Cert: "c.pem", Password: "p"}}
	err := f.Validate("source-")
	if err == nil {
		t.Fatal("bad flags passed")
	}
	for _, want := range []string{`--source-endpoints "127.0.0.1:2379": want http:// or https://`, "--source-cert and --source-key", "--source-password: needs --source-user"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if err := (Flags{}).Validate(""); err == nil || !strings.Contains(err.Error(), "--endpoints: give at least one") {
		t.Errorf("no endpoints: %v", err)
	}
	if err := (Flags{Endpoints: []string{"https://a:2379"}, Credentials: Credentials{Cert: "c", Key: "k", User: "u"}}).Validate(""); err != nil {
		t.Errorf("good flags: %v", err)
	}
}

func TestUserPassword(t *testing.T) {
	for _, c := range []struct {
		in         Credentials
		user, pass string
	}{
		{Credentials{User: "root:pw"}, "root", "pw"},
		{Credentials{User: "root:pw", Password: "other"}, "root", "other"},
		{Credentials{User: "root"}, "root", ""},
		{Credentials{}, "", ""},
	} {
		if u, p := c.in.UserPassword(); u != c.user || p != c.pass {
			t.Errorf("%+v: %q, %q; want %q, %q", c.in, u, p, c.user, c.pass)
		}
	}
}

func TestTLSOnlyWhenAsked(t *testing.T) {
	tc, err := Credentials{}.TLS([]string{"http://a:2379"})
	if tc != nil || err != nil {
		t.Fatalf("plain http without certificates: %v, %v; want no TLS", tc, err)
	}
	if tc, err = (Credentials{}).TLS([]string{"https://a:2379"}); tc == nil || err != nil {
		t.Fatalf("an https endpoint: %v, %v; want TLS with the system roots", tc, err)
	}
	if tc, err = (Credentials{InsecureSkipVerify: true}).TLS(nil); tc == nil || !tc.InsecureSkipVerify || err != nil {
		t.Fatalf("--insecure-skip-tls-verify: %+v, %v", tc, err)
	}
	if _, err = (Credentials{CACert: "/nonexistent/ca.pem"}).TLS(nil); err == nil || !strings.Contains(err.Error(), "/nonexistent/ca.pem") {
		t.Fatalf("a missing CA bundle: %v; want an error naming it", err)
	}
}

func TestRegisterUsesThePrefix(t *testing.T) {
	var c Credentials
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.Register(fs, "dest-", "the destination cluster's")
	if c.DialTimeout != DefaultDialTimeout {
		t.Fatalf("--dest-dial-timeout defaults to %v, want etcdctl's %v", c.DialTimeout, DefaultDialTimeout)
	}
	if err := fs.Parse([]string{"--dest-cacert", "ca", "--dest-cert", "c", "--dest-key", "k", "--dest-insecure-skip-tls-verify", "--dest-user", "u", "--dest-password", "p", "--dest-dial-timeout", "7s"}); err != nil {
		t.Fatal(err)
	}
	want := Credentials{CACert: "ca", Cert: "c", Key: "k", InsecureSkipVerify: true, User: "u", Password: "p", DialTimeout: 7 * time.Second}
	if c != want {
		t.Fatalf("parsed %+v, want %+v", c, want)
	}
}
