package index_test

import (
	"os"
	"strings"
	"testing"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// TestRestoreWritesADeletedFileAgain deletes snag.db (with its -wal and
// -shm) under an open DB, as a person's rm does while snagd runs: Restore
// writes everything the DB holds to the path again (the tasks, the audit
// log), the DB goes on in the new file (a later write is in it when it is
// opened anew), and a file in place is left alone.
func TestRestoreWritesADeletedFileAgain(t *testing.T) {
	e := newEnv(t)
	for i := 1; i <= 5; i++ {
		e.put(task(i, "restored"))
	}
	if _, err := e.db.Scan(e.ctx, e.dir, index.ScanOptions{}); err != nil {
		t.Fatal(err)
	}
	audit := func(detail string) {
		t.Helper()
		if err := e.db.Update(e.ctx, func(tx *index.Tx) error {
			return tx.Audit(snag.AuditEntry{Actor: queue.Person, Agent: "dana", Action: "edit", Outcome: "ok", Detail: detail})
		}); err != nil {
			t.Fatal(err)
		}
	}
	audit("before the rm")
	if done, err := e.db.Restore(e.ctx); err != nil || done {
		t.Fatalf("Restore with the file in place = %v, %v; want nothing done", done, err)
	}
	for _, side := range []string{"", "-wal", "-shm"} {
		os.Remove(e.dbPath + side)
	}
	if done, err := e.db.Restore(e.ctx); err != nil || !done {
		t.Fatalf("Restore of a deleted file = %v, %v; want it written again", done, err)
	}
	if _, err := os.Stat(e.dbPath); err != nil {
		t.Fatalf("no file after Restore: %v", err)
	}
	audit("after the restore")
	if done, err := e.db.Restore(e.ctx); err != nil || done {
		t.Fatalf("a second Restore = %v, %v; want nothing done", done, err)
	}

	// What a process opening the path now reads: all of it.
	again := openDB(t, e.dbPath)
	page, err := again.List(e.ctx, index.Filter{All: true, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Rows) != 5 {
		t.Errorf("the restored file lists %d tasks, want 5", len(page.Rows))
	}
	log, err := again.AuditLog(e.ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, a := range log {
		details = append(details, a.Detail)
	}
	if got := strings.Join(details, "|"); !strings.Contains(got, "before the rm") || !strings.Contains(got, "after the restore") {
		t.Errorf("the restored file's audit log: %q; want the entries from before and after", got)
	}
}
