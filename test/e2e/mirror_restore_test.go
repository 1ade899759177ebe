package e2e

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// A mirror's source restored behind the mirror's checkpoint (a cold copy
// of its data dir: the same cluster ID, an older revision) holds another
// history than the one the destination copied: the mirror, restarted or
// running, refuses to go on, naming both revisions; restarted with
// --resync it syncs in full and verify agrees.
func TestMirrorRefusesASourceRestoredBehindItsCheckpoint(t *testing.T) {
	beside(t)
	for _, restarted := range []bool{true, false} {
		name := "running"
		if restarted {
			name = "restarted"
		}
		t.Run(name, func(t *testing.T) { mirrorSourceRestored(t, restarted) })
	}
}

func mirrorSourceRestored(t *testing.T, restarted bool) {
	p := startMirrorPair(t)
	put := func(k, v string) {
		t.Helper()
		if _, err := p.s.Put(context.Background(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	put("r/a", "1")
	put("r/b", "1")
	// The backup: a cold copy of the source's only member's data dir.
	m := p.src.Members[0]
	backup := t.TempDir() + "/backup"
	m.Proc.Stop()
	if out, err := exec.Command("cp", "-a", m.DataDir, backup).CombinedOutput(); err != nil {
		t.Fatalf("copying the data dir: %v\n%s", err, out)
	}
	m.Proc.Restart(t)
	p.s = p.src.Client(t)
	backedUp := p.head(t)

	proc := p.start(t, "--prefix", "r/")
	put("r/a", "2")
	put("r/c", "1")
	if _, err := p.s.Delete(context.Background(), "r/b"); err != nil {
		t.Fatal(err)
	}
	put("r/d", "1")
	p.waitCaughtUp(t, "default")
	checkpointed := p.checkpoint(t, "default").Revision

	if restarted {
		proc.Kill()
	}
	// The restore: the source's data dir is the backup's again.
	m.Proc.Stop()
	if err := os.RemoveAll(m.DataDir); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", backup, m.DataDir).CombinedOutput(); err != nil {
		t.Fatalf("restoring the data dir: %v\n%s", err, out)
	}
	m.Proc.Restart(t)
	p.s = p.src.Client(t)
	put("r/e", "restored") // the restored history moves on, still behind
	now := p.head(t)
	if now >= checkpointed || now != backedUp+1 {
		t.Fatalf("the restored source is at revision %d (backed up at %d), the checkpoint at %d: the scenario needs it behind", now, backedUp, checkpointed)
	}

	if restarted {
		proc.Restart(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, err := proc.Wait(ctx)
	if err != nil {
		t.Fatalf("the mirror goes on against a source restored behind its checkpoint (revision %d < %d): %v", now, checkpointed, err)
	}
	log := proc.Log()
	if code == 0 || !strings.Contains(log, strconv.FormatInt(checkpointed, 10)) || !strings.Contains(log, "--resync") {
		t.Fatalf("the mirror exited %d; want a refusal naming the checkpoint's revision %d, the source's and --resync:\n%s", code, checkpointed, tailLines(log, 10))
	}
	// The running mirror may look before or after the restored source's
	// first put: its revision then, either way.
	if !strings.Contains(log, "revision "+strconv.FormatInt(now, 10)) && !strings.Contains(log, "revision "+strconv.FormatInt(backedUp, 10)) {
		t.Errorf("the refusal does not name the source's revision (%d or %d):\n%s", backedUp, now, tailLines(log, 5))
	}
	// Nothing of the restored history was copied on top of the old one.
	if r, err := p.d.Get(context.Background(), "r/e"); err != nil || len(r.Kvs) != 0 {
		t.Errorf("the destination has r/e of the restored history (%v)", err)
	}

	// With --resync, a full sync: the destination is the restored source.
	resyncs := p.checkpoint(t, "default").Resyncs
	proc.RestartWithArgs(t, p.args("--prefix", "r/", "--resync"))
	harness.WaitFor(t, time.Minute, "the mirror resynced", func() (bool, error) {
		cp := p.checkpoint(t, "default")
		return cp != nil && cp.Resyncs == resyncs+1 && cp.Phase == "stream" && cp.Revision >= now, nil
	})
	mustVerify(t, p, "--prefix", "r/")
	for k, want := range map[string]string{"r/a": "1", "r/b": "1", "r/e": "restored"} {
		r, err := p.d.Get(context.Background(), k)
		if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != want {
			t.Errorf("destination %s after --resync: %v (%v), want %q", k, r.Kvs, err, want)
		}
	}
	for _, k := range []string{"r/c", "r/d"} {
		if r, err := p.d.Get(context.Background(), k, clientv3.WithCountOnly()); err != nil || r.Count != 0 {
			t.Errorf("destination %s after --resync: still there (%v); the restored source lacks it", k, err)
		}
	}
}

// A destination restored behind a mirror's writes (a cold copy of its data
// dir, taken before a restart of the mirror) holds the mirror's keys and
// checkpoint of then, written together: the running mirror resumes from
// that checkpoint and copies again what the restore took back.
func TestMirrorResumesFromADestinationRestoredBehindItsWrites(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	put := func(k, v string) {
		t.Helper()
		if _, err := p.s.Put(context.Background(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	put("w/a", "1")
	proc := p.start(t, "--prefix", "w/")
	p.waitCaughtUp(t, "default")
	m := p.dst.Members[0]
	backup := t.TempDir() + "/backup"
	m.Proc.Stop()
	if out, err := exec.Command("cp", "-a", m.DataDir, backup).CombinedOutput(); err != nil {
		t.Fatalf("copying the data dir: %v\n%s", err, out)
	}
	m.Proc.Restart(t)
	// The mirror refuses at once a destination that is not listening: start
	// it once the destination serves again.
	p.dst.WaitLeader(t, 30*time.Second)
	proc.Restart(t) // another process: the backup's checkpoint is not its own
	put("w/b", "1")
	put("w/a", "2")
	p.waitCaughtUp(t, "default")

	m.Proc.Stop()
	if err := os.RemoveAll(m.DataDir); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", backup, m.DataDir).CombinedOutput(); err != nil {
		t.Fatalf("restoring the data dir: %v\n%s", err, out)
	}
	m.Proc.Restart(t)
	p.d = p.dst.Client(t)
	put("w/c", "1") // the mirror's next write meets the restored checkpoint
	p.waitCaughtUp(t, "default")
	if proc.Exited() {
		t.Fatalf("the mirror exited:\n%s", tailLines(proc.Log(), 10))
	}
	if !strings.Contains(proc.Log(), "the destination was restored from a backup") {
		t.Errorf("the mirror did not say it resumes from the restored checkpoint:\n%s", tailLines(proc.Log(), 10))
	}
	mustVerify(t, p, "--prefix", "w/")
}
