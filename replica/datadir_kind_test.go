package replica

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// listDir is every path under dir, for "nothing was changed".
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mkdirs(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
}

// Each kind refuses the other's data dir, naming what it found and the
// fix, and leaves it as it was.
func TestDataDirKindIsChecked(t *testing.T) {
	cascadedDir, learnerDir := t.TempDir(), t.TempDir()
	mkdirs(t, filepath.Join(cascadedDir, "store", "member", "wal"), filepath.Join(learnerDir, "member", "wal"))
	if err := os.WriteFile(filepath.Join(cascadedDir, "bootstrap.snapshot"), []byte("snap"), 0o600); err != nil {
		t.Fatal(err)
	}
	// kind is a replica to start on dir: a cascaded one, or a learner
	// replica given --join or not.
	type kind struct {
		dataDir        string
		cascaded, join bool
	}
	learnerCfg := func(dir string) kind { return kind{dataDir: dir, join: true} }
	cascadedCfg := func(dir string) kind { return kind{dataDir: dir, cascaded: true} }
	for _, tc := range []struct {
		name string
		cfg  kind
		want []string
	}{
		{"learner on a cascaded replica's", learnerCfg(cascadedDir), []string{"cascaded replica's store", filepath.Join(cascadedDir, "store"), "--upstream", "another --data-dir", "remove"}},
		{"no flag on a cascaded replica's", kind{dataDir: cascadedDir}, []string{"cascaded replica's store", "with no --upstream"}},
		{"cascaded on a learner replica's", cascadedCfg(learnerDir), []string{"holds an etcd member", filepath.Join(learnerDir, "member"), "another --data-dir", "--join"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := listDir(t, tc.cfg.dataDir)
			err := checkDataDirKind(tc.cfg.dataDir, tc.cfg.cascaded, tc.cfg.join)
			if !errors.Is(err, ErrDataDirKind) {
				t.Fatalf("checkDataDirKind = %v, want ErrDataDirKind", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("%q is more than one line", err)
			}
			if after := listDir(t, tc.cfg.dataDir); !slices.Equal(before, after) {
				t.Errorf("the data dir changed: %v, was %v", after, before)
			}
		})
	}
	// Each kind takes its own, and an empty one.
	for _, c := range []kind{learnerCfg(learnerDir), cascadedCfg(cascadedDir), learnerCfg(t.TempDir()), cascadedCfg(t.TempDir())} {
		if err := checkDataDirKind(c.dataDir, c.cascaded, c.join); err != nil {
			t.Errorf("%s (cascaded %v): %v", c.dataDir, c.cascaded, err)
		}
	}
}

// With neither --join nor --upstream, a data dir that holds no member is
// refused at once, naming the flags; nothing is created.
func TestNoClusterIsRefused(t *testing.T) {
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "absent")} {
		_, err := joinFromDataDir(dir)
		if !errors.Is(err, ErrNoCluster) {
			t.Fatalf("%s: %v, want ErrNoCluster", dir, err)
		}
		for _, w := range []string{"--join", "--upstream", "--data-dir", dir} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q does not name %q", err, w)
			}
		}
		if _, serr := os.Stat(filepath.Join(dir, "member")); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("%s/member exists after the refusal: %v", dir, serr)
		}
	}
}
