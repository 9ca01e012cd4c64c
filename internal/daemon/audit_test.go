package daemon_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	daemonpkg "github.com/snagdev/snag/internal/daemon"
)

// auditCount counts the entries of GET /audit for action on the task
// with key key that ended with outcome.
func (d *daemon) auditCount(action, outcome, key string) int {
	d.t.Helper()
	id := d.taskID(key)
	var out struct {
		Entries []struct {
			Action, Outcome string
			TaskID          string `json:"task_id"`
		}
	}
	if code := d.get("/audit?tail=1000", &out); code != 200 {
		d.t.Fatalf("GET /audit?tail=1000: %d", code)
	}
	n := 0
	for _, e := range out.Entries {
		if e.Action == action && e.Outcome == outcome && e.TaskID == id {
			n++
		}
	}
	return n
}

// TestS1_TheAuditOutlivesACrashAndTheIndex: the audit of live actions is
// the repository's live state, not the index's. snagd dies right after a
// claim's commit, before it could send the claim's entry on: after a
// restart the log has it, once. snag.db deleted while snagd runs, and
// again before a restart (the index is rebuilt from the files), takes
// none of the log with it.
func TestS1_TheAuditOutlivesACrashAndTheIndex(t *testing.T) {
	t.Parallel()
	root, home := sampleProject(t), filepath.Join(t.TempDir(), "home")
	d := crSpawn(t, root, home, daemonpkg.FailpointEnv+"=claim:committed")
	a := startAgent(t, d, "")
	if ans := a.do("claim SNAG-11"); strings.HasPrefix(ans, "ok ") {
		t.Fatalf("the claim was acknowledged though snagd died: %s", ans)
	}
	crKilled(t, d, "claim:committed")
	d = startDaemon(t, root, home)
	if n := d.auditCount("claim", "ok", "SNAG-11"); n != 1 {
		t.Fatalf("the log has %d entries of the claim committed before the kill, want 1", n)
	}
	_, epoch := a.claim("SNAG-11") // the agent's own lease, as it was
	if ans := a.do(fmt.Sprintf("release SNAG-11 %d handing it back", epoch)); !strings.HasPrefix(ans, "ok ") {
		t.Fatalf("release: %s", ans)
	}
	claims, releases := d.auditCount("claim", "ok", "SNAG-11"), d.auditCount("release", "ok", "SNAG-11")
	if claims != 2 || releases != 1 { // the claim before the kill, the agent's claim of its own lease after
		t.Fatalf("the log has %d claims and %d releases of SNAG-11, want 2 and 1", claims, releases)
	}
	db := filepath.Join(root, ".snag", "snag.db")
	for _, f := range []string{db, db + "-wal", db + "-shm"} {
		os.Remove(f)
	}
	if c, r := d.auditCount("claim", "ok", "SNAG-11"), d.auditCount("release", "ok", "SNAG-11"); c != claims || r != releases {
		t.Fatalf("with snag.db deleted under snagd the log has %d claims and %d releases of SNAG-11, want %d and %d", c, r, claims, releases)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done
	for _, f := range []string{db, db + "-wal", db + "-shm"} {
		os.Remove(f)
	}
	d = startDaemon(t, root, home)
	if c, r := d.auditCount("claim", "ok", "SNAG-11"), d.auditCount("release", "ok", "SNAG-11"); c != claims || r != releases {
		t.Fatalf("after a restart on a rebuilt index the log has %d claims and %d releases of SNAG-11, want %d and %d", c, r, claims, releases)
	}
	cmd := exec.Command(snagdBin, "snag", "log", "--limit", "1000")
	cmd.Dir, cmd.Env = root, append(os.Environ(), "SNAG_HOME="+home, "SNAG_NO_AUTOSTART=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), " claim ") || !strings.Contains(string(out), " release ") {
		t.Errorf("snag log after the rebuilt index: %v, misses the claim or the release:\n%s", err, out)
	}
}

// TestS1_ADeletedIndexIsWrittenAgain deletes snag.db (and its -wal and
// -shm) under a running snagd whose agent holds a task: snagd notices and
// writes the file again from what it holds, so the agent's lease stays its
// own (its release, fenced by the epoch it had, works), the log says so,
// and a snagd started on the file after that finds another agent's lease
// attached, not rebuilt from the files as detached.
func TestS1_ADeletedIndexIsWrittenAgain(t *testing.T) {
	t.Parallel()
	root, home := sampleProject(t), filepath.Join(t.TempDir(), "home")
	d := startDaemon(t, root, home)
	a, b := startAgent(t, d, ""), startAgent(t, d, "")
	_, epoch := a.claim("SNAG-11")
	b.claim("SNAG-12")
	db := filepath.Join(root, ".snag", "snag.db")
	for _, f := range []string{db, db + "-wal", db + "-shm"} {
		os.Remove(f)
	}
	eventually(t, "snag.db written again", func() bool {
		_, err := os.Stat(db)
		return err == nil && d.auditHas("restore", "snag.db was deleted or moved away while snagd ran")
	})
	if ans := a.do(fmt.Sprintf("release SNAG-11 %d handing it back", epoch)); !strings.HasPrefix(ans, "ok ") {
		t.Fatalf("release after the restore: %s", ans)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done
	d = startDaemon(t, root, home)
	var held []leaseView
	for _, l := range d.leases() {
		if l.TaskID == d.taskID("SNAG-12") {
			held = append(held, l)
		}
	}
	if len(held) != 1 || held[0].Detached || held[0].Holder == "" {
		t.Errorf("after a restart on the written-again snag.db, SNAG-12's leases: %+v; want the agent's, attached", held)
	}
	if n := d.auditCount("release", "ok", "SNAG-11"); n != 1 {
		t.Errorf("the log has %d releases of SNAG-11, want 1", n)
	}
}
