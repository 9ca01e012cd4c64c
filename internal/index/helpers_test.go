package index_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
)

// env is a tasks folder on disk and an index of it, both in t.TempDir().
type env struct {
	t      *testing.T
	ctx    context.Context
	db     *index.DB
	dbPath string
	folder string // the tasks folder
	dir    *taskfs.Dir
}

func newEnv(t *testing.T) *env {
	t.Helper()
	base := t.TempDir()
	e := &env{t: t, ctx: t.Context(), folder: filepath.Join(base, "tasks"), dbPath: filepath.Join(base, "snag.db")}
	if err := os.Mkdir(e.folder, 0o755); err != nil {
		t.Fatal(err)
	}
	e.dir = openDir(t, e.folder)
	e.db = openDB(t, e.dbPath)
	return e
}

func openDB(t testing.TB, path string) *index.DB {
	t.Helper()
	db, err := index.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close %s: %v", path, err)
		}
	})
	return db
}

// write writes a file into the tasks folder, replacing it like an editor
// that saves in place.
func (e *env) write(name string, data string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.folder, name), []byte(data), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// put writes a task's file under its derived name and returns the name.
func (e *env) put(task *queue.Task) string {
	e.t.Helper()
	name := queue.FileName(task.Key, task.Title)
	e.write(name, string(codec.Format(task)))
	return name
}

func (e *env) remove(name string) {
	e.t.Helper()
	if err := os.Remove(filepath.Join(e.folder, name)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) symlink(target, name string) {
	e.t.Helper()
	if err := os.Symlink(target, filepath.Join(e.folder, name)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) rename(from, to string) {
	e.t.Helper()
	if err := os.Rename(filepath.Join(e.folder, from), filepath.Join(e.folder, to)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) scan() index.ScanStats {
	e.t.Helper()
	st, err := e.db.Scan(e.ctx, e.dir, index.ScanOptions{})
	if err != nil {
		e.t.Fatalf("Scan: %v", err)
	}
	return st
}

func (e *env) rebuild() index.ScanStats {
	e.t.Helper()
	st, err := e.db.Rebuild(e.ctx, e.dir)
	if err != nil {
		e.t.Fatalf("Rebuild: %v", err)
	}
	return st
}

func (e *env) sync(name string) index.FileChange {
	e.t.Helper()
	fc, err := e.db.SyncFile(e.ctx, e.dir, name)
	if err != nil {
		e.t.Fatalf("SyncFile(%q): %v", name, err)
	}
	return fc
}

// get looks a task up by the reference a person would type.
func (e *env) get(ref string) (*index.Item, error) {
	e.t.Helper()
	r, err := queue.ParseRef(ref)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.db.Get(e.ctx, r)
}

func (e *env) mustGet(ref string) *index.Item {
	e.t.Helper()
	it, err := e.get(ref)
	if err != nil {
		e.t.Fatalf("Get(%s): %v", ref, err)
	}
	return it
}

func (e *env) list(f index.Filter) []*index.Row {
	e.t.Helper()
	p, err := e.db.List(e.ctx, f)
	if err != nil {
		e.t.Fatalf("List(%+v): %v", f, err)
	}
	return p.Rows
}

func (e *env) problems() []*index.Row {
	e.t.Helper()
	rows, err := e.db.Problems(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return rows
}

// conn opens a connection of the test's own on the database file, for the
// checks and set-ups the package's API does not offer.
func (e *env) conn() *sqlite.Conn { return rawConn(e.t, e.dbPath) }

func rawConn(t testing.TB, path string) *sqlite.Conn {
	t.Helper()
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenWAL)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetBusyTimeout(5 * time.Second)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// record is one result row, by column name.
type record map[string]any

// query runs q and returns every row it yields.
func query(t testing.TB, conn *sqlite.Conn, q string, args ...any) []record {
	t.Helper()
	var out []record
	err := sqlitex.ExecuteTransient(conn, q, &sqlitex.ExecOptions{
		Args: args,
		ResultFunc: func(s *sqlite.Stmt) error {
			r := record{}
			for i := range s.ColumnCount() {
				var v any
				switch s.ColumnType(i) {
				case sqlite.TypeInteger:
					v = s.ColumnInt64(i)
				case sqlite.TypeFloat:
					v = s.ColumnFloat(i)
				case sqlite.TypeText:
					v = s.ColumnText(i)
				case sqlite.TypeBlob:
					b := make([]byte, s.ColumnLen(i))
					s.ColumnBytes(i, b)
					v = fmt.Sprintf("x'%x'", b)
				}
				r[s.ColumnName(i)] = v
			}
			out = append(out, r)
			return nil
		},
	})
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

func exec(t testing.TB, conn *sqlite.Conn, q string, args ...any) {
	t.Helper()
	if err := sqlitex.ExecuteTransient(conn, q, &sqlitex.ExecOptions{Args: args}); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// indexDump is the schema and everything the index tables hold,
// independent of row numbers: every column of every task row but n and ctime, the dependencies by task
// file, every word the full-text index holds with the file, column and
// place it is at, and whether the full-text index agrees with the rows.
type indexDump struct {
	Schema []record
	Tasks  []record
	Deps   []record
	Words  []record
	FTS    string
}

func dumpIndex(t testing.TB, path string) indexDump {
	t.Helper()
	conn := rawConn(t, path)
	defer conn.Close()
	d := indexDump{
		Schema: query(t, conn, `SELECT type, name, sql FROM sqlite_schema ORDER BY name`),
		Tasks:  query(t, conn, `SELECT * FROM tasks ORDER BY path`),
		Deps:   query(t, conn, `SELECT t.path, d.ref FROM deps d JOIN tasks t ON t.n = d.task_n ORDER BY 1, 2`),
		FTS:    "ok",
	}
	exec(t, conn, `CREATE VIRTUAL TABLE temp.dump_words USING fts5vocab(main, tasks_fts, instance)`)
	d.Words = query(t, conn, `SELECT t.path, w.term, w.col, w.offset FROM temp.dump_words w JOIN tasks t ON t.n = w.doc ORDER BY 1, 2, 3, 4`)
	for _, r := range d.Tasks {
		// ctime is 0 for a stamp not to be trusted, which depends on how
		// long before its read the file changed (taskfs.Stamp.Trusted).
		delete(r, "n")
		delete(r, "ctime")
	}
	if err := sqlitex.ExecuteTransient(conn, `INSERT INTO tasks_fts(tasks_fts, rank) VALUES ('integrity-check', 1)`, nil); err != nil {
		d.FTS = err.Error()
	}
	return d
}

var taskClock = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// task makes a valid open task SNAG-num; opts adjust it.
func task(num int, title string, opts ...func(*queue.Task)) *queue.Task {
	created := taskClock.Add(time.Duration(num) * time.Hour)
	t := &queue.Task{
		ID: queue.NewID(created), Key: queue.Alias(num), Title: title,
		Status: queue.StatusOpen, Trust: queue.TrustVetted, Severity: queue.SeverityMedium,
		Kind: queue.KindBug, Wave: 1, Created: created, Updated: created,
		Body: []byte("What happens in " + strings.ToLower(title) + ".\n"),
	}
	for _, o := range opts {
		o(t)
	}
	return t
}

func withStatus(s queue.Status) func(*queue.Task) { return func(t *queue.Task) { t.Status = s } }
func withWave(w int) func(*queue.Task)            { return func(t *queue.Task) { t.Wave = w } }
func withSeverity(s queue.Severity) func(*queue.Task) {
	return func(t *queue.Task) { t.Severity = s }
}
func withKind(k queue.Kind) func(*queue.Task) { return func(t *queue.Task) { t.Kind = k } }
func withPlan(p string) func(*queue.Task)     { return func(t *queue.Task) { t.Plan = p } }
func withDeps(d ...string) func(*queue.Task)  { return func(t *queue.Task) { t.DependsOn = d } }
func withCreated(c time.Time) func(*queue.Task) {
	return func(t *queue.Task) { t.Created, t.Updated = c, c }
}
func withID(id string) func(*queue.Task)  { return func(t *queue.Task) { t.ID = id } }
func withBody(b string) func(*queue.Task) { return func(t *queue.Task) { t.Body = []byte(b) } }
func withFiles(paths ...string) func(*queue.Task) {
	return func(t *queue.Task) {
		for _, p := range paths {
			t.SuspectFiles = append(t.SuspectFiles, queue.FileRef{Path: p})
		}
	}
}
func withConsole(errs ...string) func(*queue.Task) {
	return func(t *queue.Task) {
		t.Capture = &queue.Capture{URL: "http://localhost:3000/checkout", ConsoleErrors: errs}
	}
}

// keys names rows by key, or by path for a file that never parsed.
func keys(rows []*index.Row) []string {
	var out []string
	for _, r := range rows {
		if r.Key == "" {
			out = append(out, r.Path)
		} else {
			out = append(out, r.Key)
		}
	}
	return out
}

func sha256Of(b []byte) []byte {
	sum := sha256.Sum256(b)
	return sum[:]
}
