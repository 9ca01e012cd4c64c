package index_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/taskfs"
	"github.com/snagdev/snag/internal/taskgen"
)

// copySample copies the sample project's task files into the env's folder.
func copySample(t *testing.T, e *env) []string {
	t.Helper()
	src := filepath.Join("..", "..", ".snag-example", "tasks")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range entries {
		in, err := os.Open(filepath.Join(src, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(e.folder, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		out.Close()
		names = append(names, de.Name())
	}
	return names
}

func TestScanIndexesTheSampleProject(t *testing.T) {
	defer index.SetStampMargin(0)() // the files were copied a moment ago
	e := newEnv(t)
	names := copySample(t, e)

	st := e.scan()
	if st.Files != len(names) || st.Parsed != len(names) || st.Added != len(names) || st.Failed != 0 {
		t.Errorf("first scan: %+v, want %d files parsed and added", st, len(names))
	}
	if probs := e.problems(); len(probs) != 0 {
		for _, p := range probs {
			t.Errorf("sample file has a problem: %s: %s", p.Path, p.Error)
		}
	}

	it := e.mustGet("SNAG-1")
	want := index.Row{Task: snag.Task{
		ID: "tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y", Key: "SNAG-1", Title: "Checkout button does nothing on Safari",
		Status: queue.StatusClaimed, Trust: queue.TrustVetted, Severity: queue.SeverityHigh, Kind: queue.KindBug,
		Wave: 1, Plan: "checkout-revamp", Assignee: "VESPER", File: "web/checkout.ts:120-148",
		Path: "tasks/SNAG-1 - Checkout button does nothing on Safari.md", State: snag.StateOK,
	}}
	if diff := cmp.Diff(want, it.Row, cmpopts.IgnoreUnexported(index.Row{})); diff != "" {
		t.Errorf("Get(SNAG-1) (-want +got):\n%s", diff)
	}
	if it.Task == nil || len(it.Task.Capture.ConsoleErrors) != 1 || !strings.HasPrefix(string(it.Task.Body), "Captured from the board") {
		t.Errorf("Get(SNAG-1) task = %+v, want the capture and the body", it.Task)
	}
	raw, err := os.ReadFile(filepath.Join(e.folder, "SNAG-1 - Checkout button does nothing on Safari.md"))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256Of(raw); !cmp.Equal(it.SHA256, sum) {
		t.Errorf("SHA256 = %x, want %x", it.SHA256, sum)
	}

	// The default list leaves out resolved and cancelled tasks.
	if got, want := keys(e.list(index.Filter{Limit: 100})), []string{
		"SNAG-1", "SNAG-6", "SNAG-16", "SNAG-10", "SNAG-5", "SNAG-7", "SNAG-8", "SNAG-11", "SNAG-17", "SNAG-18", "SNAG-20",
		"SNAG-4", "SNAG-9", "SNAG-12", "SNAG-13", "SNAG-15", "SNAG-19",
	}; !cmp.Equal(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}
	row, rd, err := e.db.Next(e.ctx)
	if err != nil || row == nil || row.Key != "SNAG-5" {
		t.Errorf("Next = %v, %v, %v; want SNAG-5 (wave 2, medium, oldest; its dependency SNAG-2 is resolved)", row, rd, err)
	}

	st = e.scan()
	if st.Changed() || st.Unchanged != len(names) || st.Read != 0 {
		t.Errorf("second scan of unchanged files: %+v, want nothing read or changed", st)
	}
	st, err = e.db.Scan(e.ctx, e.dir, index.ScanOptions{Hash: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Changed() || st.Read != len(names) {
		t.Errorf("hashing scan of unchanged files: %+v, want every file read and nothing changed", st)
	}
	c, err := e.db.Count(e.ctx)
	if err != nil || c != (snag.Counts{Tasks: len(names)}) {
		t.Errorf("Count = %+v, %v; want %d tasks, no problems", c, err, len(names))
	}
}

// step is one change to the task files, and how the index hears of it.
type step struct {
	name  string
	do    func(e *env)
	files []string // SyncFile these names; none: Scan
}

// TestRebuildEqualsIncremental applies adds, edits, deletes, renames and
// broken files one at a time, keeping one index in step incrementally
// (SyncFile or Scan), and after each step compares it with a fresh Rebuild
// of the same files, with a Rebuild over an index that already holds
// rows, and with a cold Build.
func TestRebuildEqualsIncremental(t *testing.T) {
	e := newEnv(t)
	rebuilt := openDB(t, filepath.Join(t.TempDir(), "rebuilt.db"))

	t1 := task(1, "Checkout button does nothing", withSeverity(queue.SeverityHigh), withFiles("web/checkout.ts"))
	t2 := task(2, "Cart total rounds wrongly", withStatus(queue.StatusClaimed), withConsole("TypeError: cart is undefined"))
	t3 := task(3, "Badge count lags", withDeps("SNAG-2"))
	t4 := task(4, "Gallery overflows", withWave(2), withKind(queue.KindLayout))
	t5 := task(5, "Coupon message vanishes", withDeps("SNAG-3", "SNAG-4"))
	t6 := task(6, "Slow search", withKind(queue.KindPerf), withPlan("search"))
	n3, n6 := queue.FileName(t3.Key, t3.Title), queue.FileName(t6.Key, t6.Title)
	steps := []step{
		{name: "add six tasks", do: func(e *env) {
			for _, tk := range []*queue.Task{t1, t2, t3, t4, t5, t6} {
				e.put(tk)
			}
		}},
		{name: "add a file that never parses", files: []string{"SNAG-7 - broken.md"}, do: func(e *env) {
			e.write("SNAG-7 - broken.md", "---\nid: [unclosed\n---\nbody\n")
		}},
		{name: "add a file without frontmatter or alias", do: func(e *env) {
			e.write("notes.md", "just some notes\n")
		}},
		{name: "edit a status", files: []string{queue.FileName(t2.Key, t2.Title)}, do: func(e *env) {
			t2.Status, t2.Assignee = queue.StatusResolved, ""
			e.put(t2)
		}},
		{name: "retitle and rename", files: []string{"SNAG-3 - Badge count lags one behind.md", "SNAG-3 - Badge count lags.md"}, do: func(e *env) {
			t3.Title = "Badge count lags one behind"
			e.put(t3)
			e.remove(n3)
			n3 = queue.FileName(t3.Key, t3.Title)
		}},
		{name: "rename only", do: func(e *env) {
			e.rename(queue.FileName(t4.Key, t4.Title), "SNAG-4 - moved by hand.md")
		}},
		{name: "delete", do: func(e *env) { e.remove(queue.FileName(t1.Key, t1.Title)) }},
		{name: "add a duplicate id", files: []string{"SNAG-8 - copy of five.md"}, do: func(e *env) {
			cp := *t5
			cp.Key, cp.Title = "SNAG-8", "copy of five"
			e.put(&cp)
		}},
		{name: "fix the duplicate", files: []string{"SNAG-8 - copy of five.md"}, do: func(e *env) {
			e.put(task(8, "copy of five"))
		}},
		{name: "add a conflicted file", do: func(e *env) {
			e.write("SNAG-9 - merged.md", "---\nid: tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y\n<<<<<<< HEAD\ntitle: a\n=======\ntitle: b\n>>>>>>> main\n---\n")
		}},
		{name: "break a never-valid file differently", files: []string{"SNAG-7 - broken.md"}, do: func(e *env) {
			e.write("SNAG-7 - broken.md", "---\ntitle: no id here\nstatus: open\n---\n")
		}},
		{name: "rewrite with the same bytes", do: func(e *env) { e.put(t5) }},
		{name: "edit dependencies", files: []string{n6}, do: func(e *env) {
			t6.DependsOn = []string{"SNAG-5", "snag-2"}
			e.put(t6)
		}},
		{name: "fix the never-valid file", do: func(e *env) {
			e.write("SNAG-7 - broken.md", string(codec.Format(task(7, "broken"))))
		}},
		{name: "add a symlink", do: func(e *env) {
			if err := os.Symlink(filepath.Join(e.folder, n6), filepath.Join(e.folder, "SNAG-10 - link.md")); err != nil {
				e.t.Fatal(err)
			}
		}},
		{name: "remove a never-valid file", files: []string{"notes.md"}, do: func(e *env) { e.remove("notes.md") }},
		{name: "files snag does not read", files: []string{"x.txt", ".SNAG-11.md.swp"}, do: func(e *env) {
			e.write("x.txt", "not a task")
			e.write(".SNAG-11.md.swp", "swap")
		}},
		{name: "empty file", files: []string{"SNAG-12 - empty.md"}, do: func(e *env) { e.write("SNAG-12 - empty.md", "") }},
		{name: "delete everything", do: func(e *env) {
			entries, _ := os.ReadDir(e.folder)
			for _, de := range entries {
				e.remove(de.Name())
			}
		}},
	}
	for _, s := range steps {
		s.do(e)
		if len(s.files) == 0 {
			e.scan()
		}
		for _, name := range s.files {
			e.sync(name)
		}
		incremental := dumpIndex(t, e.dbPath)

		fresh := filepath.Join(t.TempDir(), "fresh.db")
		if _, err := openDB(t, fresh).Rebuild(e.ctx, e.dir); err != nil {
			t.Fatalf("%s: Rebuild: %v", s.name, err)
		}
		if _, err := rebuilt.Rebuild(e.ctx, e.dir); err != nil {
			t.Fatalf("%s: Rebuild: %v", s.name, err)
		}
		if diff := cmp.Diff(dumpIndex(t, fresh), incremental); diff != "" {
			t.Fatalf("after %q the incremental index differs from a fresh rebuild (-rebuilt +incremental):\n%s", s.name, diff)
		}
		if diff := cmp.Diff(dumpIndex(t, rebuilt.Path()), incremental); diff != "" {
			t.Fatalf("after %q the incremental index differs from a rebuild over the old index (-rebuilt +incremental):\n%s", s.name, diff)
		}
		built := filepath.Join(t.TempDir(), "built.db")
		if _, err := index.Build(e.ctx, built, e.dir, index.BuildOptions{}); err != nil {
			t.Fatalf("%s: Build: %v", s.name, err)
		}
		if diff := cmp.Diff(dumpIndex(t, built), incremental); diff != "" {
			t.Fatalf("after %q the incremental index differs from a cold build (-built +incremental):\n%s", s.name, diff)
		}
		if incremental.FTS != "ok" {
			t.Fatalf("after %q the full-text index is inconsistent: %s", s.name, incremental.FTS)
		}
	}
}

func TestDeletedFileLosesItsRow(t *testing.T) {
	for _, via := range []string{"SyncFile", "Scan"} {
		t.Run(via, func(t *testing.T) {
			e := newEnv(t)
			keep := e.put(task(1, "Keep me"))
			gone := e.put(task(2, "Delete me", withDeps("SNAG-1")))
			e.scan()
			e.remove(gone)
			switch via {
			case "SyncFile":
				if fc := e.sync(gone); !fc.Removed {
					t.Errorf("SyncFile of a deleted file = %+v, want Removed", fc)
				}
				if fc := e.sync(gone); fc.Removed || fc.Added || fc.Updated {
					t.Errorf("second SyncFile of a deleted file = %+v, want no change", fc)
				}
			case "Scan":
				if st := e.scan(); st.Removed != 1 {
					t.Errorf("Scan after a delete = %+v, want one removed", st)
				}
			}
			if _, err := e.get("SNAG-2"); !errors.Is(err, index.ErrNotFound) {
				t.Errorf("Get(SNAG-2) after delete: err = %v, want ErrNotFound", err)
			}
			d := dumpIndex(t, e.dbPath)
			if len(d.Tasks) != 1 || d.Tasks[0]["path"] != "tasks/"+keep || len(d.Deps) != 0 || d.FTS != "ok" {
				t.Errorf("index after delete = %+v, want only %s", d, keep)
			}
		})
	}
}

func TestFileThatStopsParsingKeepsItsLastGoodData(t *testing.T) {
	for _, via := range []string{"SyncFile", "Scan"} {
		t.Run(via, func(t *testing.T) {
			e := newEnv(t)
			good := task(3, "Basket badge lags", withStatus(queue.StatusOpen), withWave(2), withFiles("web/badge.tsx"))
			name := e.put(good)
			e.scan()
			e.write(name, "---\nid: "+good.ID+"\nkey: SNAG-3\ntitle: Basket badge lags\nstatus: opne\n---\nbody\n")
			switch via {
			case "SyncFile":
				fc := e.sync(name)
				if !fc.Updated || fc.Err == nil {
					t.Errorf("SyncFile of a broken file = %+v, want Updated with its error", fc)
				}
			case "Scan":
				if st := e.scan(); st.Failed != 1 || st.Updated != 1 {
					t.Errorf("Scan of a broken file = %+v, want one failed and updated", st)
				}
			}
			it := e.mustGet("SNAG-3")
			wantErr := `parse tasks/` + name + `: line 5: status: unknown value "opne"`
			if it.State != snag.StateInvalid || !it.Stale || !strings.HasPrefix(it.Error, wantErr) {
				t.Errorf("row = state %q stale %v error %q, want invalid, stale, %q...", it.State, it.Stale, it.Error, wantErr)
			}
			if it.Task == nil || it.Task.ID != good.ID || it.Title != good.Title || it.Wave != 2 || it.File != "web/badge.tsx" {
				t.Errorf("row lost its last good data: %+v task %+v", it.Row, it.Task)
			}
			probs := e.problems()
			if len(probs) != 1 || probs[0].Path != "tasks/"+name || !probs[0].Stale {
				t.Errorf("Problems = %v, want the broken file", keys(probs))
			}
			if row, _, _ := e.db.Next(e.ctx); row != nil {
				t.Errorf("Next handed out a broken task: %s", row.Key)
			}
			// Searching still finds it by its last good title.
			if hits, err := e.db.Search(e.ctx, "badge", 5); err != nil || len(hits) != 1 {
				t.Errorf("Search(badge) = %v, %v; want the stale row", hits, err)
			}

			// Fixed again: clean, not stale, off the problem list.
			e.put(good)
			if via == "Scan" {
				e.scan()
			} else {
				e.sync(name)
			}
			it = e.mustGet("SNAG-3")
			if it.State != snag.StateOK || it.Stale || it.Error != "" {
				t.Errorf("fixed row = state %q stale %v error %q, want ok", it.State, it.Stale, it.Error)
			}
			if probs := e.problems(); len(probs) != 0 {
				t.Errorf("Problems after the fix = %v", keys(probs))
			}
		})
	}
}

func TestFileThatNeverParsedHasARowWithItsError(t *testing.T) {
	tests := []struct {
		name, data string
		keyNum     any
		wantErr    string
	}{
		{"SNAG-41 - broken.md", "---\nid: [\n---\n", int64(41), "invalid YAML"},
		{"SNAG-42.md", "no frontmatter\n", int64(42), "line 1: no frontmatter"},
		{"snag-43 - lower case.md", "---\ntitle: x\n---\n", int64(43), "id: missing"},
		{"notes.md", "", nil, "empty file"},
		{"SNAG-0 - zero.md", "", nil, "empty file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.write(tt.name, tt.data)
			fc := e.sync(tt.name)
			if !fc.Added || fc.Err == nil {
				t.Errorf("SyncFile = %+v, want Added with an error", fc)
			}
			rows := query(t, e.conn(), `SELECT id, key, key_num, title, state, error, stale FROM tasks`)
			if len(rows) != 1 {
				t.Fatalf("rows = %v, want one", rows)
			}
			r := rows[0]
			if r["id"] != "" || r["key"] != "" || r["state"] != snag.StateInvalid || r["stale"] != int64(0) ||
				r["title"] != tt.name || !cmp.Equal(r["key_num"], tt.keyNum) {
				t.Errorf("row = %v, want no id or key, key_num %v, state invalid, the file name as title", r, tt.keyNum)
			}
			if msg, _ := r["error"].(string); !strings.HasPrefix(msg, "parse tasks/"+tt.name+": ") || !strings.Contains(msg, tt.wantErr) {
				t.Errorf("error = %q, want parse tasks/%s: ...%s...", msg, tt.name, tt.wantErr)
			}
			probs := e.problems()
			if len(probs) != 1 || probs[0].Stale {
				t.Errorf("Problems = %+v, want the file, not stale", probs)
			}
			if n, ok := tt.keyNum.(int64); ok {
				it := e.mustGet(queue.Alias(int(n)))
				if it.Task != nil || it.State != snag.StateInvalid {
					t.Errorf("Get(%s) = %+v, want the broken file without task data", queue.Alias(int(n)), it)
				}
			}
		})
	}
}

func TestDuplicateIDs(t *testing.T) {
	// A rebuild is a load into empty tables, which marks only the
	// duplicates it finds (Build marks them the same way: see
	// TestBuildMatchesRebuild).
	for _, via := range []string{"SyncFile", "Scan", "Rebuild"} {
		t.Run(via, func(t *testing.T) {
			e := newEnv(t)
			a := task(5, "Coupon message vanishes")
			b := task(6, "Coupon message vanishes again", withID(a.ID))
			c := task(7, "Unrelated")
			na, nb := e.put(a), e.put(b)
			e.put(c)
			syncAll := func(names ...string) {
				switch via {
				case "Scan":
					e.scan()
					return
				case "Rebuild":
					e.rebuild()
					return
				}
				for _, n := range names {
					e.sync(n)
				}
			}
			syncAll(na, nb, queue.FileName(c.Key, c.Title))

			probs := e.problems()
			if got := keys(probs); !cmp.Equal(got, []string{"SNAG-5", "SNAG-6"}) || !probs[0].Duplicate || !probs[1].Duplicate {
				t.Errorf("Problems = %v, want SNAG-5 and SNAG-6 flagged duplicate", got)
			}
			_, err := e.get(a.ID)
			if !errors.Is(err, index.ErrAmbiguous) || !strings.Contains(err.Error(), "tasks/"+na) || !strings.Contains(err.Error(), "tasks/"+nb) {
				t.Errorf("Get(id) = %v, want ErrAmbiguous naming both files", err)
			}
			if it := e.mustGet("SNAG-6"); !it.Duplicate || it.Claimable() {
				t.Errorf("Get(SNAG-6) dup = %v claimable = %v, want duplicate and not claimable", it.Duplicate, it.Claimable())
			}
			if it := e.mustGet("SNAG-7"); it.Duplicate {
				t.Error("an unrelated task is flagged duplicate")
			}
			if row, _, _ := e.db.Next(e.ctx); row == nil || row.Key != "SNAG-7" {
				t.Errorf("Next = %v, want SNAG-7 (the duplicates are not handed out)", row)
			}

			b.ID = queue.NewID(b.Created)
			e.put(b)
			syncAll(nb)
			if probs := e.problems(); len(probs) != 0 {
				t.Errorf("Problems after the fix = %v, want none", keys(probs))
			}
			if it := e.mustGet(a.ID); it.Key != "SNAG-5" || it.Duplicate {
				t.Errorf("Get(id) after the fix = %s dup %v, want SNAG-5, not duplicate", it.Key, it.Duplicate)
			}
		})
	}
}

func TestDuplicateKeys(t *testing.T) {
	e := newEnv(t)
	a := e.put(task(5, "One"))
	b := e.put(task(5, "Two"))
	e.scan()
	_, err := e.get("SNAG-5")
	if !errors.Is(err, index.ErrAmbiguous) || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), b) {
		t.Errorf("Get(SNAG-5) = %v, want ErrAmbiguous naming both files", err)
	}
	e.remove(b)
	e.sync(b)
	if it := e.mustGet("SNAG-5"); it.Duplicate || it.Title != "One" {
		t.Errorf("after removing one: %s dup %v, want One, not duplicate", it.Title, it.Duplicate)
	}
}

func TestConflictMarkers(t *testing.T) {
	const conflicted = "---\nid: %s\nkey: SNAG-2\n<<<<<<< HEAD\ntitle: Ours\n=======\ntitle: Theirs\n>>>>>>> feature\nstatus: open\n---\nbody\n"
	t.Run("never parsed", func(t *testing.T) {
		e := newEnv(t)
		e.write("SNAG-2 - merged.md", strings.Replace(conflicted, "%s", queue.NewID(taskClock), 1))
		e.scan()
		it := e.mustGet("SNAG-2")
		if it.State != snag.StateConflict || it.Stale || it.Task != nil || !strings.Contains(it.Error, "line 4: git conflict markers") {
			t.Errorf("row = %+v, want state conflict at line 4, no data", it.Row)
		}
	})
	t.Run("after a good version", func(t *testing.T) {
		e := newEnv(t)
		good := task(2, "Ours")
		name := e.put(good)
		e.sync(name)
		e.write(name, strings.Replace(conflicted, "%s", good.ID, 1))
		e.sync(name)
		it := e.mustGet("SNAG-2")
		if it.State != snag.StateConflict || !it.Stale || it.Task == nil || it.Title != "Ours" {
			t.Errorf("row = %+v, want state conflict, stale, with the last good data", it.Row)
		}
		if it.Claimable() {
			t.Error("a conflicted task is claimable")
		}
		if probs := e.problems(); len(probs) != 1 || probs[0].State != snag.StateConflict {
			t.Errorf("Problems = %+v, want the conflicted file", probs)
		}
	})
}

func TestSymlinkedTaskFileIsNeverFollowed(t *testing.T) {
	outside := t.TempDir()
	target := filepath.Join(outside, "secret.md")
	valid := task(9, "Outside the folder")
	if err := os.WriteFile(target, codec.Format(valid), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, via := range []string{"SyncFile", "Scan"} {
		t.Run(via, func(t *testing.T) {
			e := newEnv(t)
			name := "SNAG-9 - link.md"
			if err := os.Symlink(target, filepath.Join(e.folder, name)); err != nil {
				t.Fatal(err)
			}
			if via == "Scan" {
				e.scan()
			} else {
				e.sync(name)
			}
			rows := query(t, e.conn(), `SELECT path, id, sha256, size, state, error FROM tasks`)
			want := []record{{
				"path": "tasks/" + name, "id": "", "sha256": "x''", "size": int64(0), "state": snag.StateInvalid,
				"error": "parse tasks/" + name + ": " + taskfs.ErrSymlink.Error(),
			}}
			if diff := cmp.Diff(want, rows); diff != "" {
				t.Errorf("symlink row (-want +got):\n%s", diff)
			}
			if _, err := e.get(valid.ID); !errors.Is(err, index.ErrNotFound) {
				t.Errorf("the link's target was read: Get(its id) = %v", err)
			}
		})
	}
}

// TestBulkScanMatchesRowByRow loads a hundred files with one Scan (a bulk
// load, which keeps the full-text index itself; the threshold is lowered
// for the test) and the same files one SyncFile at a time (where the
// triggers keep it), then changes, breaks, deletes and adds files in bulk
// again, and compares the two indexes after each round.
func TestBulkScanMatchesRowByRow(t *testing.T) {
	defer index.SetBulkMin(40)()
	bulk := newEnv(t)
	rowwise := openDB(t, filepath.Join(t.TempDir(), "rowwise.db"))
	if err := taskgen.Write(bulk.folder, 120, 9); err != nil {
		t.Fatal(err)
	}
	var gen []*queue.Task
	for tk := range taskgen.Tasks(120, 9) {
		gen = append(gen, tk)
	}
	dupe := *gen[10]
	dupe.Key, dupe.Title = "SNAG-121", "Copy of ten"
	bulk.put(&dupe)
	bulk.write("SNAG-122 - broken.md", "---\nid: [\n---\n")
	bulk.write("SNAG-123 - merged.md", "<<<<<<< ours\na\n=======\nb\n>>>>>>> theirs\n")

	syncAll := func(names []string) {
		t.Helper()
		for _, name := range names {
			if _, err := rowwise.SyncFile(bulk.ctx, bulk.dir, name); err != nil {
				t.Fatal(err)
			}
		}
	}
	compare := func(round string) {
		t.Helper()
		a, b := dumpIndex(t, bulk.dbPath), dumpIndex(t, rowwise.Path())
		if diff := cmp.Diff(b, a); diff != "" {
			t.Fatalf("%s: bulk scan and row-by-row sync differ (-row by row +bulk):\n%s", round, diff)
		}
		if a.FTS != "ok" {
			t.Fatalf("%s: full-text index: %s", round, a.FTS)
		}
	}
	names := func() []string {
		entries, err := os.ReadDir(bulk.folder)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}

	if st := bulk.scan(); st.Added != 123 || st.Failed != 2 {
		t.Errorf("first scan: %+v, want 123 added, 2 failed", st)
	}
	// Only a bulk load sets FTS5's buffer size: this proves the path taken.
	if got := query(t, bulk.conn(), `SELECT v FROM tasks_fts_config WHERE k = 'hashsize'`); len(got) != 1 {
		t.Fatalf("the first scan was not a bulk load (hashsize = %v)", got)
	}
	syncAll(names())
	compare("first load")
	if probs := bulk.problems(); len(probs) != 4 {
		t.Errorf("Problems = %v, want the two duplicates and two broken files", keys(probs))
	}

	// Round two: edits, breaks, deletes and 60 new files, all in one scan.
	var touched []string
	for i, tk := range gen[:30] {
		name := queue.FileName(tk.Key, tk.Title)
		touched = append(touched, name)
		switch i % 3 {
		case 0:
			bulk.remove(name)
		case 1:
			tk.Status, tk.Title = queue.StatusResolved, tk.Title+" (done)"
			bulk.remove(name)
			touched = append(touched, bulk.put(tk))
		case 2:
			bulk.write(name, "---\nid: "+tk.ID+"\nkey: "+tk.Key+"\ntitle: broken now\nstatus: nope\n---\n")
		}
	}
	bulk.remove(queue.FileName(dupe.Key, dupe.Title))
	touched = append(touched, queue.FileName(dupe.Key, dupe.Title))
	more := filepath.Join(t.TempDir(), "more")
	if err := taskgen.Write(more, 180, 10); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for tk := range taskgen.Tasks(180, 10) {
		if n := tk.Num(); n <= 120 {
			continue
		}
		name := queue.FileName(tk.Key, tk.Title)
		if err := os.Rename(filepath.Join(more, name), filepath.Join(bulk.folder, name)); err != nil {
			t.Fatal(err)
		}
		touched = append(touched, name)
		moved++
	}
	st := bulk.scan()
	// 10 deleted, 10 renamed (a row goes, a row comes), 10 broken, the
	// duplicate deleted, and the new files.
	if st.Added != moved+10 || st.Removed != 21 || st.Updated != 10 || st.Failed != 10 {
		t.Errorf("second scan: %+v, want %d added, 21 removed, 10 updated, 10 failed", st, moved+10)
	}
	syncAll(touched)
	compare("second round")
	if it := bulk.mustGet(gen[10].ID); it.Duplicate {
		t.Error("the duplicate flag stayed after its twin went")
	}
	// The bulk loads put back every index and trigger they took away.
	schema := `SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name`
	if diff := cmp.Diff(query(t, rawConn(t, rowwise.Path()), schema), query(t, bulk.conn(), schema)); diff != "" {
		t.Errorf("schema after bulk loads (-row by row +bulk):\n%s", diff)
	}
}
