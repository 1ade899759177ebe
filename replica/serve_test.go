package replica

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zaptest"
)

// --remove-on-exit removes what etcd wrote, then the data dir only if it
// is empty and no symlink: an operator's files, and a symlink's target,
// stay.
func TestRemoveMemberDataKeepsWhatIsNotEtcds(t *testing.T) {
	lg := zaptest.NewLogger(t)
	member := func(dir string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, "member", "wal"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(p string) bool { _, err := os.Lstat(p); return os.IsNotExist(err) }

	empty := filepath.Join(t.TempDir(), "r1")
	member(empty)
	if err := removeMemberData(lg, empty); err != nil || !gone(empty) {
		t.Fatalf("a data dir holding only member/: %v, gone %v; want it removed", err, gone(empty))
	}

	shared := t.TempDir()
	member(shared)
	notes := filepath.Join(shared, "notes")
	if err := os.WriteFile(notes, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := removeMemberData(lg, shared); err != nil || !gone(filepath.Join(shared, "member")) || gone(notes) {
		t.Fatalf("a data dir with the operator's file: %v; member gone %v, notes gone %v; want member/ only gone", err, gone(filepath.Join(shared, "member")), gone(notes))
	}

	target := t.TempDir()
	member(target)
	link := filepath.Join(t.TempDir(), "data")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := removeMemberData(lg, link); err != nil || !gone(filepath.Join(target, "member")) || gone(link) || gone(target) {
		t.Fatalf("a symlinked data dir: %v; member gone %v, link gone %v, target gone %v; want member/ only gone", err, gone(filepath.Join(target, "member")), gone(link), gone(target))
	}

	if err := removeMemberData(lg, filepath.Join(t.TempDir(), "never-made")); err != nil {
		t.Fatalf("a data dir already gone: %v", err)
	}
}
