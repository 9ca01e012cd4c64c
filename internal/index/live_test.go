package index_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// TestTxSyncFileMatchesARebuild rewrites task files the ways snag and
// people do and brings each row in step inside a transaction, as the
// daemon does after its own writes: the index must then equal one rebuilt
// from the files. A rewrite that leaves the text, id, alias and
// dependencies alone (a claim) must not touch the full-text index.
func TestTxSyncFileMatchesARebuild(t *testing.T) {
	e := newEnv(t)
	a := e.put(task(1, "Login button does nothing", withFiles("web/login.ts"), withConsole("TypeError: x is undefined")))
	b := e.put(task(2, "Crash on save", withDeps("SNAG-1")))
	c := e.put(task(3, "Slow search"))
	e.rebuild()

	syncTx := func(name string) {
		t.Helper()
		if err := e.db.Update(e.ctx, func(tx *index.Tx) error { return tx.SyncFile(e.dir, name) }); err != nil {
			t.Fatalf("SyncFile(%q): %v", name, err)
		}
	}
	edit := func(name string, fields ...codec.Field) {
		t.Helper()
		p := filepath.Join(e.folder, name)
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out, err := codec.Edit(raw, fields...)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
		syncTx(name)
	}
	ftsRows := func() int {
		conn := e.conn()
		defer conn.Close()
		return int(query(t, conn, `SELECT count(*) AS n FROM tasks_fts_data`)[0]["n"].(int64))
	}
	same := func(what string) {
		t.Helper()
		other := filepath.Join(t.TempDir(), "rebuilt.db")
		db := openDB(t, other)
		if _, err := db.Rebuild(e.ctx, e.dir); err != nil {
			t.Fatal(err)
		}
		got, want := dumpIndex(t, e.dbPath), dumpIndex(t, other)
		if got.FTS != "ok" {
			t.Errorf("%s: full-text index: %s", what, got.FTS)
		}
		if diff := cmp.Diff(want.Tasks, got.Tasks); diff != "" {
			t.Errorf("%s: task rows differ from a rebuild (-want +got):\n%s", what, diff)
		}
		if diff := cmp.Diff(want.Deps, got.Deps); diff != "" {
			t.Errorf("%s: dependencies differ from a rebuild (-want +got):\n%s", what, diff)
		}
	}

	before := ftsRows()
	edit(a, codec.Set("status", "claimed"), codec.Set("assignee", "VESPER"))
	if after := ftsRows(); after != before {
		t.Errorf("a claim's rewrite wrote %d full-text rows; want none", after-before)
	}
	same("claim")
	edit(b, codec.Set("status", "claimed"), codec.Set("assignee", "ORCA"), codec.Set("severity", "high"))
	same("claim and severity")
	edit(a, codec.Set("title", "Login button does nothing on Safari"))
	same("new title")
	if hits, err := e.db.Search(e.ctx, "safari", 10); err != nil || len(hits) != 1 {
		t.Errorf("search for the new title: %v %v", hits, err)
	}
	if e.put(task(2, "Crash on save", withDeps("SNAG-1", "SNAG-3"), withStatus(queue.StatusClaimed))) != b {
		t.Fatal("the task file got another name")
	}
	syncTx(b)
	same("new dependency")
	edit(c, codec.Set("id", e.mustGet("SNAG-1").ID))
	same("a second file with the same id")
	edit(c, codec.Set("status", "claimed"))
	same("claim of a duplicated task")
}

// TestNextReadyAgreesWithNext drains a queue with every kind of task that
// claim-next must skip (blocked, invalid, duplicated, not open) and checks that
// NextReady picks what Next picks, every time, down to nothing, and so does
// NextReadyFrom walking from the Mark of the walk before (only claims were
// written in between), and passing over a task taken.
func TestNextReadyAgreesWithNext(t *testing.T) {
	e := newEnv(t)
	e.put(task(1, "Wave two, low", withWave(2), withSeverity(queue.SeverityLow)))
	e.put(task(2, "Wave one, high", withSeverity(queue.SeverityHigh)))
	e.put(task(3, "Blocked by an open task", withSeverity(queue.SeverityCritical), withDeps("SNAG-2")))
	e.put(task(4, "Depends on a resolved task", withDeps("SNAG-5")))
	e.put(task(5, "Done", withStatus(queue.StatusResolved)))
	e.put(task(6, "In the inbox", withStatus(queue.StatusInbox)))
	seven := task(7, "Wave one, medium")
	e.put(seven)
	e.put(task(8, "Same id as seven", withID(seven.ID)))
	e.write("SNAG-9 - broken.md", "---\nid: [unclosed\n---\n")
	e.put(task(10, "Wave three", withWave(3)))
	e.rebuild()

	var order []string
	var mark index.Mark
	for range 20 {
		id, err := e.db.NextReady(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		var fromMark, skipping string
		err = e.db.Read(e.ctx, func(tx *index.Tx) (err error) {
			fromMark, mark, err = tx.NextReadyFrom(mark, nil)
			if err != nil || fromMark == "" {
				return err
			}
			// The mark holds the task found: a walk from it before the
			// claim finds it again.
			again, _, err := tx.NextReadyFrom(mark, nil)
			if err != nil {
				return err
			}
			if again != fromMark {
				t.Errorf("from its own mark the walk finds %q, not %q", again, fromMark)
			}
			// With the task found taken, the walk from the same mark
			// finds the one after it, as from the start.
			taken := func(id string) bool { return id == fromMark }
			after, _, err := tx.NextReadyFrom(index.Mark{}, taken)
			if err != nil {
				return err
			}
			skipping, _, err = tx.NextReadyFrom(mark, taken)
			if err == nil && skipping != after {
				t.Errorf("from the mark, passing over %s: %q; from the start: %q", fromMark, skipping, after)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if fromMark != id {
			t.Fatalf("NextReadyFrom the last mark = %q, NextReady = %q", fromMark, id)
		}
		row, _, err := e.db.Next(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if row == nil {
			if id != "" {
				t.Fatalf("NextReady found %s where Next finds nothing", id)
			}
			break
		}
		if id != row.ID {
			t.Fatalf("NextReady = %q, Next = %s (%s)", id, row.ID, row.Key)
		}
		order = append(order, row.Key)
		it := e.mustGet(row.Key)
		name := filepath.Base(it.Path)
		raw, err := os.ReadFile(filepath.Join(e.folder, name))
		if err != nil {
			t.Fatal(err)
		}
		out, err := codec.Edit(raw, codec.Set("status", "claimed"))
		if err != nil {
			t.Fatal(err)
		}
		e.write(name, string(out))
		if err := e.db.Update(e.ctx, func(tx *index.Tx) error { return tx.SyncFile(e.dir, name) }); err != nil {
			t.Fatal(err)
		}
	}
	// SNAG-3 stays blocked: SNAG-2 is claimed, not resolved.
	want := []string{"SNAG-2", "SNAG-4", "SNAG-1", "SNAG-10"}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("claim order (-want +got):\n%s", diff)
	}
}

// TestActivityResolvedMeansResolved: an agent's resolve on a branch hands
// its task to verify; the branch's activity lists it as resolved only
// once its task is: one whose verify failed (back to claimed) is not.
func TestActivityResolvedMeansResolved(t *testing.T) {
	e := newEnv(t)
	done := task(1, "Verified and resolved", withStatus(queue.StatusResolved))
	failed := task(2, "Verify failed", withStatus(queue.StatusClaimed))
	e.put(done)
	e.put(failed)
	e.scan()
	for _, tk := range []*queue.Task{done, failed} {
		if err := e.db.Audit(e.ctx, snag.AuditEntry{Actor: queue.Agent, Agent: "ADA", Action: "resolve", TaskID: tk.ID, Outcome: "ok", Branch: "feat/x"}); err != nil {
			t.Fatal(err)
		}
	}
	acts, _, err := e.db.Activity(e.ctx, time.Now().Add(-time.Hour), 10)
	if err != nil || len(acts) != 1 {
		t.Fatalf("activity: %+v %v", acts, err)
	}
	if !slices.Equal(acts[0].Resolved, []string{"SNAG-1"}) {
		t.Errorf("resolved on feat/x: %v, want SNAG-1 alone (SNAG-2's verify failed)", acts[0].Resolved)
	}
}

// TestCountsDanglingDependencies: Count counts the depends_on entries of
// readable tasks that name no task, by key or id, as the board's
// Problems page lists them.
func TestCountsDanglingDependencies(t *testing.T) {
	e := newEnv(t)
	first := task(1, "There")
	e.put(first)
	e.put(task(2, "Waits on one there and one not", withDeps("SNAG-1", "SNAG-404")))
	e.put(task(3, "Waits by id", withDeps(first.ID)))
	e.scan()
	c, err := e.db.Count(e.ctx)
	if err != nil || c.Dangling != 1 || c.Tasks != 3 {
		t.Errorf("Count: %+v %v; want 3 tasks, 1 dangling entry", c, err)
	}
}
