package index_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
	"github.com/snagdev/snag/internal/taskgen"
)

// TestBuildMatchesRebuild makes the index of 600 generated tasks, a file
// that does not parse, one without frontmatter and two with the same id,
// once by a cold Build and once by a Rebuild into a new database, and
// holds the two to the same thing: every row with its row number, the
// full-text index's own tables byte for byte, the epochs and sessions a
// fence writes, and what a list, searches and counts answer.
func TestBuildMatchesRebuild(t *testing.T) {
	defer index.SetStampMargin(0)() // every stamp trusted: ctime is the same in both
	ctx := t.Context()
	base := t.TempDir()
	folder := filepath.Join(base, "tasks")
	if err := taskgen.Write(folder, 600, 7); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"SNAG-9001 - broken.md":    "---\nid: [unclosed\n---\nbody\n",
		"notes.md":                 "just some notes about the checkout button\n",
		"SNAG-9002 - copy of 1.md": "",
	} {
		if data == "" {
			entries, _ := os.ReadDir(folder)
			b, err := os.ReadFile(filepath.Join(folder, entries[0].Name()))
			if err != nil {
				t.Fatal(err)
			}
			data = string(b)
		}
		if err := os.WriteFile(filepath.Join(folder, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := openDir(t, folder)
	const floor = 1_700_000_000_000

	rebuiltPath := filepath.Join(base, "rebuilt.db")
	rebuilt := openDB(t, rebuiltPath)
	want, err := rebuilt.Rebuild(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := rebuilt.Fence(ctx, floor); err != nil {
		t.Fatal(err)
	}

	builtPath := filepath.Join(base, "built.db")
	var steps []string
	got, err := index.Build(ctx, builtPath, dir, index.BuildOptions{Fence: floor, OnStep: func(_ context.Context, step string) error {
		steps = append(steps, step)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	want.Duration, got.Duration = 0, 0
	if want != got {
		t.Errorf("Build's stats %+v, Rebuild's %+v", got, want)
	}
	if diff := cmp.Diff([]string{index.StepBuildLoaded, index.StepBuildSynced}, steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	for _, sfx := range []string{index.BuildSuffix, index.BuildSuffix + "-fts", "-wal", "-shm", "-journal"} {
		if _, err := os.Stat(builtPath + sfx); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left beside the built database (%v)", filepath.Base(builtPath+sfx), err)
		}
	}
	if err := index.Check(ctx, builtPath, true); err != nil {
		t.Errorf("Check of the built database: %v", err)
	}
	built := openDB(t, builtPath)

	raw := func(path string) map[string][]record {
		conn := rawConn(t, path)
		defer conn.Close()
		out := map[string][]record{}
		for name, q := range map[string]string{
			"mode":     `SELECT (SELECT journal_mode FROM pragma_journal_mode) AS j, (SELECT page_size FROM pragma_page_size) AS p`,
			"tasks":    `SELECT * FROM tasks ORDER BY n`,
			"deps":     `SELECT * FROM deps ORDER BY task_n, ref`,
			"data":     `SELECT * FROM tasks_fts_data ORDER BY id`,
			"idx":      `SELECT * FROM tasks_fts_idx ORDER BY segid, term`,
			"docsize":  `SELECT * FROM tasks_fts_docsize ORDER BY id`,
			"config":   `SELECT * FROM tasks_fts_config ORDER BY k`,
			"epochs":   `SELECT * FROM epochs ORDER BY task_id`,
			"sessions": `SELECT id, name, end_reason FROM sessions ORDER BY id`,
		} {
			out[name] = query(t, conn, q)
		}
		return out
	}
	if diff := cmp.Diff(raw(rebuiltPath), raw(builtPath)); diff != "" {
		t.Errorf("the built database differs from the rebuilt one (-rebuilt +built):\n%s", diff)
	}
	if diff := cmp.Diff(dumpIndex(t, rebuiltPath), dumpIndex(t, builtPath)); diff != "" {
		t.Errorf("the built index differs from the rebuilt one (-rebuilt +built):\n%s", diff)
	}

	for _, f := range []index.Filter{{Limit: 1000}, {All: true, Limit: 1000}, {Statuses: []queue.Status{queue.StatusOpen}, Limit: 50}, {Wave: 3, Limit: 50}} {
		w, err := rebuilt.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		g, err := built.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(asJSON(t, w), asJSON(t, g)); diff != "" {
			t.Errorf("List(%+v) differs (-rebuilt +built):\n%s", f, diff)
		}
	}
	for _, q := range []string{taskgen.Words[0], taskgen.Words[len(taskgen.Words)-1], "checkout button", "chec", "quota", "notes"} {
		w, err := rebuilt.Search(ctx, q, 50)
		if err != nil {
			t.Fatal(err)
		}
		g, err := built.Search(ctx, q, 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(w) == 0 {
			t.Errorf("Search(%q) found nothing in the rebuilt index", q)
		}
		if diff := cmp.Diff(asJSON(t, w), asJSON(t, g)); diff != "" {
			t.Errorf("Search(%q) differs (-rebuilt +built):\n%s", q, diff)
		}
	}
	wc, err := rebuilt.Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gc, err := built.Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if wc != gc || wc.Problems < 3 {
		t.Errorf("Count: built %+v, rebuilt %+v (want equal, with at least 3 problems)", gc, wc)
	}
}

// TestBuildLeavesNoDatabaseWhenCutOff: a build that fails part way (here,
// at its loaded step, as a kill there would) leaves no database at the
// path and removes its temporary files, and the next build makes it
// whole; a build refuses to replace a database that exists.
func TestBuildLeavesNoDatabaseWhenCutOff(t *testing.T) {
	e := newEnv(t)
	for i := 1; i <= 5; i++ {
		e.put(task(i, "Task number"))
	}
	path := filepath.Join(t.TempDir(), "snag.db")
	// What a killed build leaves: its temporary file, half written, and a
	// log of a database that is gone.
	for _, p := range []string{path + index.BuildSuffix, path + "-wal"} {
		if err := os.WriteFile(p, []byte("half a database"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cut := errors.New("cut off")
	_, err := index.Build(e.ctx, path, e.dir, index.BuildOptions{OnStep: func(_ context.Context, step string) error {
		if step == index.StepBuildLoaded {
			return cut
		}
		return nil
	}})
	if !errors.Is(err, cut) {
		t.Fatalf("Build = %v, want the step's error", err)
	}
	for _, p := range []string{path, path + index.BuildSuffix, path + index.BuildSuffix + "-fts"} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is there after a build that failed (%v)", filepath.Base(p), err)
		}
	}
	st, err := index.Build(e.ctx, path, e.dir, index.BuildOptions{})
	if err != nil || st.Parsed != 5 {
		t.Fatalf("Build after a cut-off one = %+v, %v; want 5 parsed", st, err)
	}
	if _, err := os.Stat(path + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the log of the database that was gone is still there (%v)", err)
	}
	if c, err := openDB(t, path).Count(e.ctx); err != nil || c.Tasks != 5 {
		t.Errorf("Count = %+v, %v; want 5 tasks", c, err)
	}
	if _, err := index.Build(e.ctx, path, e.dir, index.BuildOptions{}); err == nil {
		t.Error("Build over a database that exists did not fail")
	}
}

// asJSON is v as indented JSON, for a diff of what an answer says.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEditsAfterALoadLeaveItsFullTextIndexAlone makes the index of 2,000
// generated tasks by each load into empty tables (a cold Build, a Rebuild,
// a first scan), then edits one file at a time, 30 times, and watches the
// write-ahead log: each edit writes its own pages (about 14), never the
// load's full-text index again. Before a load ended with its full-text
// index on a level of its own, the 15th edit or so merged it with the
// edits' small segments (FTS5's crisis merge) and wrote it all: hundreds
// of pages here, 1,500 at 10,000 tasks.
func TestEditsAfterALoadLeaveItsFullTextIndexAlone(t *testing.T) {
	folder := filepath.Join(t.TempDir(), "tasks")
	if err := taskgen.Write(folder, 2000, 3); err != nil {
		t.Fatal(err)
	}
	for _, load := range []string{"build", "rebuild", "scan"} {
		t.Run(load, func(t *testing.T) {
			ctx := t.Context()
			dir := openDir(t, folder)
			path := filepath.Join(t.TempDir(), "snag.db")
			if load == "build" {
				if _, err := index.Build(ctx, path, dir, index.BuildOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			db := openDB(t, path)
			switch load {
			case "rebuild":
				_, err := db.Rebuild(ctx, dir)
				must(t, err)
			case "scan":
				_, err := db.Scan(ctx, dir, index.ScanOptions{})
				must(t, err)
			}
			entries, err := dir.List()
			must(t, err)
			slices.SortFunc(entries, func(a, b taskfs.Entry) int { return strings.Compare(a.Name, b.Name) })
			conn := rawConn(t, path)
			for i := range 30 {
				// The log is emptied before each edit, so what it holds
				// after is what the edit wrote.
				ck := query(t, conn, `PRAGMA wal_checkpoint(TRUNCATE)`)
				if ck[0]["busy"] != int64(0) {
					t.Fatalf("checkpoint: %v", ck)
				}
				name := entries[i*11].Name
				file := filepath.Join(folder, name)
				raw, err := os.ReadFile(file)
				must(t, err)
				edited, err := codec.Edit(raw, codec.Set("title", fmt.Sprintf("Edited %d in %s", i, load)))
				must(t, err)
				must(t, os.WriteFile(file, edited, 0o644))
				t.Cleanup(func() { os.WriteFile(file, raw, 0o644) })
				_, err = db.SyncFile(ctx, dir, name)
				must(t, err)
				fi, err := os.Stat(path + "-wal")
				must(t, err)
				if pages := fi.Size() / (8192 + 24); pages > 100 { // a frame is a page and its header
					t.Errorf("edit %d after a %s wrote %d pages; an edit writes about 14", i+1, load, pages)
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
