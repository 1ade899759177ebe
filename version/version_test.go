package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

func vcs(rev string, modified bool) []debug.BuildSetting {
	m := "false"
	if modified {
		m = "true"
	}
	return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: m}}
}

// What each kind of build carries, as Go stamps it.
func TestFromBuildInfo(t *testing.T) {
	const rev = "975af49154114f56e0e3c68b3ecfc5b9f97bfa02"
	cases := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want Info
	}{
		{"tagged commit", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}, Settings: vcs(rev, false)}, true, Info{"v0.4.0", rev}},
		{"tagged commit, modified tree", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0+dirty"}, Settings: vcs(rev, true)}, true, Info{"v0.4.0+dirty", rev + "+dirty"}},
		{"after the tag", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.1-0.20261129010106-975af4915411"}, Settings: vcs(rev, false)}, true,
			Info{"v0.4.1-0.20261129010106-975af4915411", rev}},
		{"go install @v0.4.0", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, true, Info{"v0.4.0", Unknown}},
		{"go run, go test", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, Info{Devel, Unknown}},
		{"no build info", nil, false, Info{Devel, Unknown}},
	}
	for _, c := range cases {
		if got := FromBuildInfo(c.bi, c.ok); got != c.want {
			t.Errorf("%s: %#v, want %#v", c.name, got, c.want)
		}
	}
}

func TestStringNamesVersionAndRevision(t *testing.T) {
	s := Info{Version: "v0.9.7", Revision: "0123abcd"}.String()
	for _, want := range []string{"understudy Version: v0.9.7\n", "Git SHA: 0123abcd\n", "etcd Version: 3.", "Go OS/Arch: "} {
		if !strings.Contains(s, want) {
			t.Errorf("String() = %q, want it to contain %q", s, want)
		}
	}
}

// A binary built by go build in a git checkout prints its tag and commit,
// and says "dirty" for a modified tree: a copy of this package and a main
// that prints String, in a repository of its own, built as a release is
// (-buildvcs=true, so that a GOFLAGS=-buildvcs=false does not hide it).
func TestGoBuildStampsTagAndCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git: %v (a checkout's build stamps what git says)", err)
	}
	dir := t.TempDir()
	for src, dst := range map[string]string{"../go.mod": "go.mod", "../go.sum": "go.sum", "version.go": "version/version.go"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, dst), string(b))
	}
	write(t, filepath.Join(dir, "cmd/printversion/main.go"),
		"package main\n\nimport (\n\t\"fmt\"\n\n\t\"github.com/understudy-kv/understudy/version\"\n)\n\nfunc main() { fmt.Print(version.String()) }\n")
	write(t, filepath.Join(dir, ".gitignore"), "/bin/\n")
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	built := func() string {
		t.Helper()
		run("go", "build", "-buildvcs=true", "-o", "bin/printversion", "./cmd/printversion")
		return run(filepath.Join(dir, "bin/printversion"))
	}
	expect := func(out, version, rev string) {
		t.Helper()
		for _, want := range []string{"understudy Version: " + version + "\n", "Git SHA: " + rev + "\n"} {
			if !strings.Contains(out+"\n", want) {
				t.Errorf("--version:\n%s\nwant the line %q", out, strings.TrimSpace(want))
			}
		}
	}
	run("git", "init", "-q")
	run("git", "add", ".")
	run("git", "commit", "-qm", "first")
	run("git", "tag", "v0.9.7")
	rev := run("git", "rev-parse", "HEAD")
	expect(built(), "v0.9.7", rev)

	write(t, filepath.Join(dir, "version/extra.go"), "package version\n")
	expect(built(), "v0.9.7+dirty", rev+"+dirty")

	run("git", "add", ".")
	run("git", "commit", "-qm", "second")
	rev = run("git", "rev-parse", "HEAD")
	out := built()
	if !regexp.MustCompile(`(?m)^understudy Version: v0\.9\.8-0\.\d{14}-` + rev[:12] + `$`).MatchString(out) {
		t.Errorf("--version of a commit after the tag:\n%s\nwant a pseudo-version after v0.9.7 naming %s", out, rev[:12])
	}
	if !strings.Contains(out+"\n", "Git SHA: "+rev+"\n") {
		t.Errorf("--version of a commit after the tag:\n%s\nwant Git SHA: %s", out, rev)
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
