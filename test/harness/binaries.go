package harness

import (
	"github.com/understudy-kv/understudy/loopback"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// BinDirEnv names the environment variable that, when set, is the directory
// the binaries are built into.
const BinDirEnv = "UNDERSTUDY_TEST_BIN"

// buildTimeout bounds one go build; a cold cache builds etcd in 1-2 minutes
// on two cores.
const buildTimeout = 15 * time.Minute

// Bins holds the absolute paths of the binaries the tests run
// (loopback.Bins).
type Bins = loopback.Bins

// built is the once-per-test-process build: every test process builds
// afresh so that it runs the code it was compiled with.
var built struct {
	once sync.Once
	bins Bins
	err  error
}

// Binaries builds etcd, etcdctl, primary and (if present) replica once per
// test process and returns their paths. A build failure fails every test that
// asks, not only the first.
func Binaries(t TB) *Bins {
	t.Helper()
	built.once.Do(func() { built.bins, built.err = buildAll() })
	if built.err != nil {
		t.Fatalf("%v", built.err)
	}
	b := built.bins
	return &b
}

func buildAll() (Bins, error) {
	root, err := moduleRoot()
	if err != nil {
		return Bins{}, err
	}
	dir, err := binDir(root)
	if err != nil {
		return Bins{}, err
	}
	b := Bins{Missing: filepath.Join(root, "cmd", "replica"), Etcd36: func() (string, error) { return etcd36At(dir) }}
	targets := []struct {
		dst       *string
		name, pkg string
	}{
		{&b.Etcd, "etcd", "go.etcd.io/etcd/server/v3"},
		{&b.Etcdctl, "etcdctl", "go.etcd.io/etcd/etcdctl/v3"},
		{&b.Primary, "primary", "./cmd/primary"},
		{&b.Replica, "replica", "./cmd/replica"},
	}
	for _, tg := range targets {
		if strings.HasPrefix(tg.pkg, "./") {
			if _, err := os.Stat(filepath.Join(root, tg.pkg)); errors.Is(err, os.ErrNotExist) {
				continue
			}
		}
		p, err := buildOne(root, dir, tg.name, tg.pkg)
		if err != nil {
			return Bins{}, err
		}
		*tg.dst = p
	}
	return b, nil
}

// buildOne builds pkg to dir/name through a temporary name and a rename, so
// that test processes building concurrently never see a half-written binary.
func buildOne(root, dir, name, pkg string) (string, error) {
	final := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return "", fmt.Errorf("harness: build %s: %w", pkg, err)
	}
	tmpPath := tmp.Name()
	defer os.Remove(tmpPath) // a no-op once renamed
	// Seed the temporary file with the previous binary: go build reads the
	// build ID of an existing output and skips linking (seconds for etcd)
	// when it is up to date.
	seeded, err := seed(tmp, final)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("harness: build %s: seed from %s: %w", pkg, final, err)
	}
	if !seeded {
		// go build refuses to overwrite a file that is not an executable.
		if err := os.Remove(tmpPath); err != nil {
			return "", fmt.Errorf("harness: build %s: %w", pkg, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	// The tests run the binary users get: go build, no tag.
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmpPath, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("harness: go build -o %s %s (in %s): %w\n%s", final, pkg, root, err, out)
	}
	if err := os.Rename(tmpPath, final); err != nil {
		return "", fmt.Errorf("harness: build %s: %w", pkg, err)
	}
	return final, nil
}

// seed copies the binary at from into f, made executable, and reports
// whether there was one.
func seed(f *os.File, from string) (bool, error) {
	src, err := os.Open(from)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer src.Close()
	if _, err := io.Copy(f, src); err != nil {
		return false, err
	}
	return true, f.Chmod(0o755)
}

// moduleRoot walks up from the working directory (the test's package
// directory) to understudy's module: the first directory holding go.mod and
// cmd/replica, so that a test module nested in the tree (test/conformance)
// builds the binaries users get. Outside understudy it is the nearest go.mod.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("harness: find module root: %w", err)
	}
	nearest := ""
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "cmd", "replica")); err == nil {
				return dir, nil
			}
			if nearest == "" {
				nearest = dir
			}
		}
		if filepath.Dir(dir) == dir {
			if nearest != "" {
				return nearest, nil
			}
			return "", fmt.Errorf("harness: find module root: no go.mod above %s", wd)
		}
	}
}

// binDir returns BinDirEnv, or a directory under the system temp dir that is
// per user and per checkout, so that two checkouts never swap binaries under
// each other's running tests.
func binDir(root string) (string, error) {
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		sum := sha256.Sum256([]byte(root))
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("understudy-test-bin-%d-%s", os.Getuid(), hex.EncodeToString(sum[:4])))
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("harness: binaries directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("harness: binaries directory: %w", err)
	}
	return dir, nil
}

// Etcd36Version is the previous etcd minor release, which replicas must
// work beside.
const Etcd36Version = loopback.Etcd36Version

var etcd36 struct {
	once sync.Once
	path string
	err  error
}

// etcd36At builds stock etcd Etcd36Version in dir once per test process
// and returns its path (Bins.Etcd36). It cannot be in this module's graph
// (one etcd release per module), so it is built in a module of its own
// beside the binaries, with the module proxy's published dependencies.
func etcd36At(dir string) (string, error) {
	etcd36.once.Do(func() { etcd36.path, etcd36.err = buildEtcd36(dir) })
	return etcd36.path, etcd36.err
}

// Etcd36 is b.Etcd36(), failing t when it cannot build etcd
// Etcd36Version.
func Etcd36(t TB, b *Bins) string {
	t.Helper()
	if b.Etcd36 == nil {
		t.Fatalf("harness: these binaries have no etcd %s (Bins.Etcd36 is nil)", Etcd36Version)
	}
	p, err := b.Etcd36()
	Must(t, err)
	return p
}

func buildEtcd36(dir string) (string, error) {
	mod := filepath.Join(dir, "etcd-"+Etcd36Version+"-module")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module etcd36\n\ngo 1.26\n"), 0o644); err != nil {
		return "", err
	}
	final := filepath.Join(dir, "etcd-"+Etcd36Version)
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	for _, args := range [][]string{
		{"get", "go.etcd.io/etcd/server/v3@" + Etcd36Version},
		{"build", "-o", final, "go.etcd.io/etcd/server/v3"},
	} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("harness: building etcd %s: go %s: %w\n%s", Etcd36Version, strings.Join(args, " "), err, out)
		}
	}
	return final, nil
}

// UseBinaries makes Binaries return b instead of building from the module
// the working directory is in: for a program that runs the harness outside
// a checkout. It must come before the first Binaries.
func UseBinaries(b Bins) error {
	used := false
	built.once.Do(func() { built.bins, used = b, true })
	if !used {
		return errors.New("harness: UseBinaries after the binaries were built")
	}
	return nil
}

// InModule says whether the working directory is inside a module that has
// the replica's command, so that Binaries can build from it.
func InModule() bool {
	root, err := moduleRoot()
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(root, "cmd", "replica"))
	return err == nil
}

var brokenApply struct {
	once sync.Once
	path string
	err  error
}

// BrokenApplyReplica builds, once per test process, the replica whose
// cascaded store writes a wrong value for the key its --break-apply-key
// names (test/harness/brokenapply), and returns its path.
func BrokenApplyReplica(t TB) string {
	t.Helper()
	brokenApply.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			brokenApply.err = err
			return
		}
		dir, err := binDir(root)
		if err != nil {
			brokenApply.err = err
			return
		}
		brokenApply.path, brokenApply.err = buildOne(root, dir, "replica-brokenapply", "./test/harness/brokenapply")
	})
	if brokenApply.err != nil {
		t.Fatalf("%v", brokenApply.err)
	}
	return brokenApply.path
}
