package index_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/snagdev/snag/internal/index"
)

// healthyDB makes a snag.db holding a few tasks, closed and checkpointed
// (no -wal left), and returns its path.
func healthyDB(t *testing.T) string {
	t.Helper()
	e := newEnv(t)
	for i := 1; i <= 30; i++ {
		e.put(task(i, strings.Repeat("word ", 10), withBody(strings.Repeat("body text ", 200))))
	}
	if st, err := e.db.Scan(e.ctx, e.dir, index.ScanOptions{Hash: true}); err != nil || st.Failed > 0 {
		t.Fatal(st, err)
	}
	path := filepath.Join(t.TempDir(), "snag.db")
	db, err := index.Open(e.ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Scan(e.ctx, e.dir, index.ScanOptions{Hash: true}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	settle(t, path)
	return path
}

// settle checkpoints a database into its main file and leaves WAL mode,
// so no -wal holds pages that would hide a patch to the file.
func settle(t *testing.T, path string) {
	t.Helper()
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := sqlitex.ExecuteTransient(conn, `PRAGMA journal_mode = DELETE`, nil); err != nil {
		t.Fatal(err)
	}
}

func patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func pageSize(t *testing.T, path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 100 {
		t.Fatalf("read %s: %v", path, err)
	}
	return int64(b[16])<<8 | int64(b[17])
}

// TestS3_CheckFindsDamage: every kind of damage is found before the file
// is used, and said in the error; a sound or missing file passes.
func TestS3_CheckFindsDamage(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		damage func(t *testing.T, path string)
		want   string // in the error; "" for no error
	}{
		{"healthy", func(*testing.T, string) {}, ""},
		{"missing", func(t *testing.T, p string) { os.Remove(p) }, ""},
		{"empty", func(t *testing.T, p string) { os.WriteFile(p, nil, 0o644) }, ""},
		{"zeroed header", func(t *testing.T, p string) { patch(t, p, 0, make([]byte, 100)) }, "bad header"},
		{"wrong application id", func(t *testing.T, p string) { patch(t, p, 68, []byte{0x12, 0x34, 0x56, 0x78}) }, "application id 0x12345678"},
		{"newer schema", func(t *testing.T, p string) { patch(t, p, 60, []byte{0, 0, 0, 99}) }, "schema version 99"},
		{"truncated", func(t *testing.T, p string) {
			fi, _ := os.Stat(p)
			os.Truncate(p, fi.Size()/2)
		}, "truncated"},
		{"flipped page", func(t *testing.T, p string) {
			ps := pageSize(t, p)
			b, _ := os.ReadFile(p)
			for i := ps; i < 2*ps; i++ { // page 2: the root of the first table
				b[i] ^= 0xff
			}
			os.WriteFile(p, b, 0o644)
		}, "quick check"},
		{"foreign", func(t *testing.T, p string) {
			os.Remove(p)
			conn, err := sqlite.OpenConn(p, sqlite.OpenReadWrite|sqlite.OpenCreate)
			if err != nil {
				t.Fatal(err)
			}
			sqlitex.ExecuteScript(conn, `CREATE TABLE recipes (name TEXT); INSERT INTO recipes VALUES ('soup');`, nil)
			conn.Close()
		}, "another program"},
		{"text file", func(t *testing.T, p string) { os.WriteFile(p, []byte(strings.Repeat("not a database\n", 20)), 0o644) }, "bad header"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := healthyDB(t)
			c.damage(t, path)
			err := index.Check(ctx, path, true)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Check: %v; want no problem", err)
			case c.want != "" && !errors.Is(err, index.ErrCorrupt):
				t.Fatalf("Check: %v; want ErrCorrupt", err)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("Check: %v; want it to say %q", err, c.want)
			}
			if err != nil {
				t.Logf("%v", err)
			}
		})
	}
}

// TestS3_OpenOfAnOldSchemaThatDoesNotMigrate: a file whose version says 1
// while its tables are version 2 does not migrate; Open says ErrCorrupt.
func TestS3_OpenOfAnOldSchemaThatDoesNotMigrate(t *testing.T) {
	path := healthyDB(t)
	patch(t, path, 60, []byte{0, 0, 0, 1})
	db, err := index.Open(context.Background(), path)
	if err == nil {
		db.Close()
		t.Fatal("Open succeeded")
	}
	if !errors.Is(err, index.ErrCorrupt) {
		t.Fatalf("Open: %v; want ErrCorrupt", err)
	}
}

// TestFenceRaisesEpochsAndSessionIDs: after Fence, a grant's epoch and a new
// session's id are above the floor.
func TestFenceRaisesEpochsAndSessionIDs(t *testing.T) {
	e := newEnv(t)
	one := task(1, "One")
	e.put(one)
	if _, err := e.db.Scan(e.ctx, e.dir, index.ScanOptions{Hash: true}); err != nil {
		t.Fatal(err)
	}
	const floor = 1_000_000
	if err := e.db.Fence(e.ctx, floor); err != nil {
		t.Fatal(err)
	}
	s, err := e.db.Register(e.ctx, index.Session{Name: "VESPER"})
	if err != nil {
		t.Fatal(err)
	}
	var l index.Lease
	err = e.db.Update(e.ctx, func(tx *index.Tx) (err error) {
		l, err = tx.Grant(one.ID, s.ID, s.Name, false)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if l.Epoch <= floor || s.ID <= floor {
		t.Errorf("epoch %d, session %d after a fence at %d", l.Epoch, s.ID, floor)
	}
}

// TestTxSteps: the hook sees a commit's steps and a rollback's, with the
// write's context; an error at committing rolls back.
func TestTxSteps(t *testing.T) {
	e := newEnv(t)
	type key struct{}
	var got []string
	e.db.OnStep(func(ctx context.Context, step string) error {
		if ctx.Value(key{}) != nil {
			got = append(got, step)
		}
		if step == index.StepCommitting && ctx.Value(key{}) == "fail" {
			return errors.New("injected")
		}
		return nil
	})
	ctx := context.WithValue(e.ctx, key{}, "ok")
	if _, err := e.db.Register(ctx, index.Session{Name: "A"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{index.StepBegun, index.StepCommitting, index.StepCommitted}; !slices.Equal(got, want) {
		t.Errorf("steps %v; want %v", got, want)
	}
	got = nil
	if _, err := e.db.Register(context.WithValue(e.ctx, key{}, "fail"), index.Session{Name: "B"}); err == nil {
		t.Fatal("register succeeded past an injected error")
	}
	if want := []string{index.StepBegun, index.StepCommitting, index.StepRolledBack}; !slices.Equal(got, want) {
		t.Errorf("steps %v; want %v", got, want)
	}
	ss, _ := e.db.LiveSessions(e.ctx)
	for _, s := range ss {
		if s.Name == "B" {
			t.Error("the rolled-back session is live")
		}
	}
}

// TestS3_QuickCheckSkippedOnlyForAnUntouchedFile: a snag.db no one has
// written since a clean Close is untouched, and Check without the quick
// check passes it; any write since (a page patched in place with its size
// and modification time put back, a write by another program, a process
// that wrote and never closed) makes it touched, so the start runs the
// whole quick check, which finds the patched page.
func TestS3_QuickCheckSkippedOnlyForAnUntouchedFile(t *testing.T) {
	ctx := context.Background()
	closed := func(t *testing.T) string {
		t.Helper()
		path := healthyDB(t)
		db, err := index.Open(ctx, path) // a read, then a clean close
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Problems(ctx); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if !index.Untouched(path) {
			t.Fatal("a snag.db just closed cleanly is not untouched")
		}
		if err := index.Check(ctx, path, false); err != nil {
			t.Fatalf("Check of a sound file: %v", err)
		}
		return path
	}

	t.Run("patched in place, times put back", func(t *testing.T) {
		path := closed(t)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		ps := pageSize(t, path)
		b := make([]byte, ps)
		for i := range b {
			b[i] = 0xa5
		}
		patch(t, path, ps, b) // page 2: the root of the first table
		if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		if fi2, _ := os.Stat(path); fi2.Size() != fi.Size() || !fi2.ModTime().Equal(fi.ModTime()) {
			t.Fatalf("size or mtime changed: %v %v -> %v %v", fi.Size(), fi.ModTime(), fi2.Size(), fi2.ModTime())
		}
		if index.Untouched(path) {
			t.Fatal("a file patched since its close is untouched")
		}
		if err := index.Check(ctx, path, true); !errors.Is(err, index.ErrCorrupt) || !strings.Contains(err.Error(), "quick check") {
			t.Fatalf("Check: %v; want the quick check to find the patched page", err)
		}
	})
	t.Run("written by another program", func(t *testing.T) {
		path := closed(t)
		conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite)
		if err != nil {
			t.Fatal(err)
		}
		err = sqlitex.ExecuteTransient(conn, `INSERT INTO meta (k, v) VALUES ('other', 'program')`, nil)
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		if index.Untouched(path) {
			t.Fatal("a file another program wrote is untouched")
		}
	})
	t.Run("written and never closed", func(t *testing.T) {
		path := closed(t)
		db, err := index.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Register(ctx, index.Session{Name: "VESPER"}); err != nil {
			t.Fatal(err)
		}
		if index.Untouched(path) {
			t.Fatal("a file written by a DB still open is untouched")
		}
	})
	t.Run("no record", func(t *testing.T) {
		path := closed(t)
		os.Remove(path + index.ClosedSuffix)
		if index.Untouched(path) {
			t.Fatal("a file with no record of its close is untouched")
		}
	})
}

// TestNewIndexPageSize: a snag.db Open creates has 8 KiB pages and is in
// WAL mode; a file made with 4 KiB pages keeps them, and opens and
// rebuilds as before.
func TestNewIndexPageSize(t *testing.T) {
	e := newEnv(t)
	for i := 1; i <= 5; i++ {
		e.put(task(i, "word"))
	}
	fresh := healthyDB(t)
	if ps := pageSize(t, fresh); ps != 8192 {
		t.Errorf("new snag.db has pages of %d bytes, want 8192", ps)
	}
	old := filepath.Join(t.TempDir(), "snag.db")
	conn, err := sqlite.OpenConn(old, sqlite.OpenReadWrite|sqlite.OpenCreate)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`PRAGMA page_size = 4096`, `PRAGMA journal_mode = wal`} {
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	db, err := index.Open(e.ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if st, err := db.Rebuild(e.ctx, e.dir); err != nil || st.Parsed != 5 {
		t.Fatalf("rebuild of a 4 KiB snag.db: %+v, %v", st, err)
	}
	if ps := pageSize(t, old); ps != 4096 {
		t.Errorf("an old snag.db has pages of %d bytes now, want its 4096", ps)
	}
	newer := filepath.Join(t.TempDir(), "snag.db")
	db2, err := index.Open(e.ctx, newer)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	b, err := os.ReadFile(newer)
	if err != nil || len(b) < 100 {
		t.Fatalf("read %s: %v", newer, err)
	}
	if b[18] != 2 || b[19] != 2 {
		t.Errorf("new snag.db's header says versions %d/%d, want 2/2 (WAL)", b[18], b[19])
	}
}
