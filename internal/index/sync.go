package index

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
)

// TasksFolder is where task files live, relative to .snag/.
const TasksFolder = "tasks"

// missingError is the error of a missing row: what happened and the fix.
const missingError = "its file is gone from .snag/tasks/ (moved out, deleted, or on another branch) while the task is claimed: " +
	"move the file back into .snag/tasks/ and the lease goes on; the holder keeps the lease until then"

// ScanStats says what a scan found and did.
type ScanStats struct {
	Files     int           // task files seen
	Read      int           // files read and hashed
	Parsed    int           // files parsed (new content)
	Failed    int           // files that do not parse, now
	Added     int           // rows added
	Updated   int           // rows whose content changed
	Removed   int           // rows whose file is gone
	Duration  time.Duration // wall time of the whole scan
	Unchanged int           // files whose content was already indexed
	// FolderGone is set when tasks/ itself was not there: the scan found
	// no task files.
	FolderGone bool
}

// Changed reports whether the scan changed any row's content.
func (s ScanStats) Changed() bool { return s.Added+s.Updated+s.Removed > 0 }

// ScanOptions tune a scan.
type ScanOptions struct {
	// Hash reads and hashes every file. Without it, a file whose stamp
	// (size, modification time, inode and change time: taskfs.Stamp) is the
	// one its row recorded, and was trusted then, is taken as unchanged
	// without being read.
	Hash bool
}

// fileResult is one file's outcome, computed outside the transaction: on
// the reading goroutines, so that the writer only writes.
type fileResult struct {
	name    string
	stamp   taskfs.Stamp // Change is 0 when the stamp is not to be trusted
	sum     []byte
	task    *queue.Task
	row     *taskRow // the task's column values, when it parsed
	err     error    // parse error: the file is invalid or conflicted
	touched bool     // content unchanged; only the stamp differs
}

type rowInfo struct {
	n     int64
	sum   []byte
	stamp taskfs.Stamp
}

// rowInfoColumns are the columns scanRowInfo reads, in its order.
const rowInfoColumns = `n, sha256, size, mtime, ino, ctime`

// unchanged reports whether a listed file is the one its row was made
// from, by its stamp alone: the row's stamp was trusted when it was taken
// (taskfs.Stamp.Trusted) and the file's is the same.
func (old rowInfo) unchanged(e taskfs.Entry) bool {
	return e.Problem == nil && old.stamp.Change != 0 && old.stamp == e.Stamp
}

// Scan brings the index in step with the task files in dir: it walks the
// folder, hashes what may have changed, parses new content in parallel, and
// applies every difference in one transaction. A row whose file is gone is
// removed; a file that no longer parses keeps its last good data, marked
// stale, beside its error.
func (db *DB) Scan(ctx context.Context, dir *taskfs.Dir, opts ScanOptions) (ScanStats, error) {
	st, err := db.scan(ctx, dir, opts, false)
	if err != nil {
		return st, fmt.Errorf("scan: %w", err)
	}
	return st, nil
}

// Rebuild empties the index tables and fills them afresh from every file,
// in one transaction: readers see the old index until the new one is
// whole. Live state is left alone.
func (db *DB) Rebuild(ctx context.Context, dir *taskfs.Dir) (ScanStats, error) {
	st, err := db.scan(ctx, dir, ScanOptions{Hash: true}, true)
	if err != nil {
		return st, fmt.Errorf("rebuild: %w", err)
	}
	return st, nil
}

// A scan that reads or removes at least bulkMin files (a cold start, a git
// checkout) is a bulk load, as every rebuild is: it reads and parses
// files while it writes, drops the full-text triggers for the length of the
// transaction and keeps the full-text index itself, with a large in-memory
// buffer. Through the triggers, FTS5 writes (and later merges) a segment for
// every statement: a cold index of 10,000 tasks took seconds.
var bulkMin = 256 // a variable so tests can lower it

// stampMargin is taskfs.StampMargin, a variable so tests can shorten it.
var stampMargin = taskfs.StampMargin

// ftsHashSizeSQL sets FTS5's buffer of terms for a bulk load (hashsize, in
// bytes), which it then keeps in tasks_fts_config.
const ftsHashSizeSQL = `INSERT INTO tasks_fts (tasks_fts, rank) VALUES ('hashsize', 16777216)`

// A load into empty tables (a rebuild, a first start, a build) ends with
// the whole full-text index in one segment on a level above 0. A bulk load
// flushes FTS5's buffer of terms into segments on level 0, where every
// later write adds a small one, and once level 0 holds 16 (FTS5's
// crisismerge) the write that adds the 16th merges them all in one go, the
// load's segments included: on a fresh index of 10,000 tasks that was the
// 15th edit after the start, which wrote 1,500 pages and waited 250-450 ms
// for them (BenchmarkEditVisible's p99). FTS5's optimize merges every
// segment into one on a new level above the others, where merges of small
// segments leave it alone; but it leaves a lone segment where it is, so
// the load flushes its first row into a segment of its own (insertLoadFTS)
// and the rest into others, and optimize always has two or more to merge.
const optimizeFTSSQL = `INSERT INTO tasks_fts (tasks_fts) VALUES ('optimize')`

// A load into empty tables turns off FTS5's automatic merges for its
// length (automergeOffSQL) and on again at its end (automergeOnSQL, FTS5's
// default, 4): the optimize at its end merges everything once, so the
// merges of its segments as the buffer of terms is flushed were work done
// twice, about a fifth of a cold build's CPU at 100,000 tasks.
const (
	automergeOffSQL = `INSERT INTO tasks_fts (tasks_fts, rank) VALUES ('automerge', 0)`
	automergeOnSQL  = `INSERT INTO tasks_fts (tasks_fts, rank) VALUES ('automerge', 4)`
)

// ftsLoadEnd ends the full-text index of a load into empty tables: one
// segment above level 0, and automatic merges on again.
var ftsLoadEnd = []string{optimizeFTSSQL, automergeOnSQL}

// insertLoadFTS adds a row's text to the full-text table on conn in a load
// into empty tables. The load's first row (*split unset) is flushed into a
// segment of its own, so the optimize at the end has two or more to merge
// (see optimizeFTSSQL): FTS5 flushes its buffer of terms when a savepoint
// begins.
func insertLoadFTS(conn *sqlite.Conn, r ftsRow, split *bool) error {
	if err := exec(conn, insertFTSSQL, r.n, r.title, r.body, r.console, r.files); err != nil {
		return err
	}
	if *split {
		return nil
	}
	*split = true
	for _, q := range []string{`SAVEPOINT fts_split`, `RELEASE fts_split`} {
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			return fmt.Errorf("full-text index: %w", err)
		}
	}
	return nil
}

// list lists the task files of dir and counts them in st. A tasks/ that is
// not there (a branch without it is checked out) is no error: the files say
// there are no tasks, st says the folder is gone, and it is looked at again
// next time.
func list(dir *taskfs.Dir, st *ScanStats) ([]taskfs.Entry, error) {
	entries, err := dir.List()
	switch {
	case errors.Is(err, taskfs.ErrFolderGone):
		st.FolderGone = true
	case err != nil:
		return nil, err
	}
	st.Files = len(entries)
	return entries, nil
}

// scan is Scan, and with rebuild Rebuild: it lists the files, plans what
// to read against the rows there are (none for a rebuild), reads, and
// writes the plan in one transaction.
func (db *DB) scan(ctx context.Context, dir *taskfs.Dir, opts ScanOptions, rebuild bool) (ScanStats, error) {
	start := time.Now()
	var st ScanStats
	entries, err := list(dir, &st)
	if err != nil {
		return st, err
	}
	known := map[string]rowInfo{}
	if !rebuild {
		if known, err = db.knownRows(ctx); err != nil {
			return st, err
		}
	}
	plan := planScan(entries, known, opts.Hash, rebuild)

	// A bulk load reads while it writes; an incremental scan reads first, so
	// the write lock is held only for the writing.
	rd := newReader(ctx, dir, plan.todo, known, plan.bulk)
	defer rd.stop()
	if !plan.bulk {
		if err := rd.wait(); err != nil {
			return st, err
		}
	}
	err = db.write(ctx, func(conn *sqlite.Conn) error { return plan.write(&writer{conn: conn}, rd, &st) })
	if err != nil {
		return st, err
	}
	st.Unchanged = st.Files - st.Parsed - st.Failed
	st.Duration = time.Since(start)
	return st, nil
}

// knownRows are the rows of the tasks table by path, with what tells
// whether their files changed.
func (db *DB) knownRows(ctx context.Context) (map[string]rowInfo, error) {
	known := map[string]rowInfo{}
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT path, `+rowInfoColumns+` FROM tasks`, &sqlitex.ExecOptions{
			ResultFunc: func(s *sqlite.Stmt) error {
				known[s.ColumnText(0)] = scanRowInfo(s, 1)
				return nil
			},
		})
	})
	return known, err
}

// scanPlan is what a scan is to write, worked out from the listing and
// the rows before it writes.
type scanPlan struct {
	todo    []taskfs.Entry     // the entries to read: new, possibly changed, or unreadable
	known   map[string]rowInfo // the rows, by path
	seen    map[string]bool    // the paths listed, but those gone since
	bulk    bool               // a bulk load (see bulkMin)
	rebuild bool               // into empty tables
}

// planScan works out a scan's plan: the entries to read (with hash, every
// one), and whether the changes are many enough, or the tables empty
// enough, for a bulk load.
func planScan(entries []taskfs.Entry, known map[string]rowInfo, hash, rebuild bool) *scanPlan {
	plan := &scanPlan{known: known, seen: make(map[string]bool, len(entries)), rebuild: rebuild}
	for _, e := range entries {
		p := path.Join(TasksFolder, e.Name)
		plan.seen[p] = true
		if old, had := known[p]; had && !hash && old.unchanged(e) {
			continue
		}
		plan.todo = append(plan.todo, e)
	}
	removed := 0
	for p := range known {
		if !plan.seen[p] {
			removed++
		}
	}
	plan.bulk = rebuild || len(plan.todo)+removed >= bulkMin
	if plan.bulk {
		// In the order of their paths, the rows go into the unique index
		// of paths at its end, where a full page is left as it is, instead
		// of splitting pages all over it (the listing is in the folder's
		// hash order); the page cache then only needs the right edge.
		slices.SortFunc(plan.todo, func(a, b taskfs.Entry) int { return strings.Compare(a.Name, b.Name) })
	}
	return plan
}

// write writes the plan with w in its transaction, the files as rd reads
// them, counting in st: the rows of the files read, then those of the
// files gone, then the duplicates marked.
func (plan *scanPlan) write(w *writer, rd *reader, st *ScanStats) (err error) {
	if plan.bulk {
		defer w.restoreCache()
		var end func() error
		if end, err = w.beginBulk(plan.rebuild); err != nil {
			return err
		}
		defer func() {
			if err == nil {
				err = end()
			}
		}()
	}
	if err := plan.writeRead(w, rd, st); err != nil {
		return err
	}
	if err := plan.writeGone(w, st); err != nil {
		return err
	}
	if plan.bulk {
		return nil // end marks duplicates over the whole table
	}
	return w.markDups()
}

// writeRead writes the row of each file as rd reads it; a file removed
// since the listing is no longer seen.
func (plan *scanPlan) writeRead(w *writer, rd *reader, st *ScanStats) error {
	for i := range plan.todo {
		r, err := rd.result(i)
		if err != nil {
			return err
		}
		p := path.Join(TasksFolder, r.name)
		if errors.Is(r.err, fs.ErrNotExist) {
			delete(plan.seen, p) // removed since the listing
			continue
		}
		st.Read++
		old, had := plan.known[p]
		ch, err := w.apply(p, r, old, had)
		if err != nil {
			return err
		}
		countChange(st, r, ch)
	}
	return nil
}

// writeGone marks the rows whose files are no longer seen.
func (plan *scanPlan) writeGone(w *writer, st *ScanStats) error {
	for p, old := range plan.known {
		if plan.seen[p] {
			continue
		}
		changed, err := w.fileGone(old.n)
		if err != nil {
			return err
		}
		if changed {
			st.Removed++
		}
	}
	return nil
}

func scanRowInfo(s *sqlite.Stmt, col int) rowInfo {
	sum := make([]byte, s.ColumnLen(col+1))
	s.ColumnBytes(col+1, sum)
	return rowInfo{n: s.ColumnInt64(col), sum: sum, stamp: taskfs.Stamp{Size: s.ColumnInt64(col + 2),
		ModTime: s.ColumnInt64(col + 3), Inode: uint64(s.ColumnInt64(col + 4)), Change: s.ColumnInt64(col + 5)}}
}

// FileChange says what [DB.SyncFile] did to one file's row.
type FileChange struct {
	Path    string // relative to .snag/
	Added   bool
	Updated bool // content changed (parsed, or now failing)
	Removed bool
	Err     error // the file's parse error, when it has one
}

// SyncFile brings one task file's row in step with the file: added,
// updated, marked failing, or removed when the file is gone. The watcher
// calls it for each file that settled.
func (db *DB) SyncFile(ctx context.Context, dir *taskfs.Dir, name string) (FileChange, error) {
	p := path.Join(TasksFolder, name)
	fc := FileChange{Path: p}
	var old rowInfo
	var had bool
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT `+rowInfoColumns+` FROM tasks WHERE path = :path`, &sqlitex.ExecOptions{
			Named: map[string]any{":path": p},
			ResultFunc: func(s *sqlite.Stmt) error {
				had = true
				old = scanRowInfo(s, 0)
				return nil
			},
		})
	})
	if err != nil {
		return fc, fmt.Errorf("sync %s: %w", p, err)
	}
	var r *fileResult
	gone := !queue.IsTaskFileName(name)
	if !gone {
		entry, err := dirEntry(dir, name)
		if err != nil {
			return fc, fmt.Errorf("sync %s: %w", p, err)
		}
		if entry == nil {
			gone = true
		} else {
			r = readFile(dir, *entry, old, had)
			if r.err != nil && errors.Is(r.err, fs.ErrNotExist) {
				gone = true
			}
		}
	}
	if gone && !had {
		return fc, nil
	}
	err = db.write(ctx, func(conn *sqlite.Conn) error {
		w := &writer{conn: conn}
		if gone {
			changed, err := w.fileGone(old.n)
			if err != nil {
				return err
			}
			fc.Removed = changed
			return w.markDups()
		}
		ch, err := w.apply(p, r, old, had)
		if err != nil {
			return err
		}
		fc.Added = ch.added
		fc.Updated = ch.updated
		fc.Err = r.err
		return w.markDups()
	})
	if err != nil {
		return fc, fmt.Errorf("sync %s: %w", p, err)
	}
	return fc, nil
}

// dirEntry stats one name the way [taskfs.Dir.List] would, or returns nil
// when it does not exist. A plain file is answered by one lstat (of a name
// [queue.IsTaskFileName] accepted, so without separators; the read itself
// goes through the Dir); anything else (a link, a folder, an error) by
// listing the folder, so that its problem reads exactly as a scan's would.
func dirEntry(dir *taskfs.Dir, name string) (*taskfs.Entry, error) {
	fi, err := os.Lstat(filepath.Join(dir.Path(), name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err == nil && fi.Mode().IsRegular():
		return &taskfs.Entry{Name: name, Size: fi.Size(), ModTime: fi.ModTime(), Stamp: taskfs.StampOf(fi)}, nil
	}
	entries, err := dir.List()
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Name == name {
			return &e, nil
		}
	}
	return nil, nil
}

// readFile reads, hashes and (when the content is new) parses one file,
// and works out the values of its row. The stamp it records is the open
// file's, taken before its bytes are read, and is marked not to be trusted
// (Change 0) when the file changed too shortly before the read to tell.
func readFile(dir *taskfs.Dir, e taskfs.Entry, old rowInfo, had bool) *fileResult {
	r := &fileResult{name: e.Name, stamp: e.Stamp}
	r.stamp.Change = 0
	if e.Problem != nil {
		r.err = &codec.ParseError{Msg: e.Problem.Error()}
		r.sum = []byte{}
		return r
	}
	readAt := time.Now()
	raw, fi, err := dir.Read(e.Name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			r.err = err
			return r
		}
		r.err = &codec.ParseError{Msg: err.Error()}
		r.sum = []byte{}
		return r
	}
	if r.stamp = taskfs.StampOf(fi); !r.stamp.Trusted(readAt.Add(-stampMargin)) {
		r.stamp.Change = 0
	}
	sum := sha256.Sum256(raw)
	r.sum = sum[:]
	if had && bytes.Equal(old.sum, r.sum) {
		r.touched = true
		return r
	}
	t, err := codec.Parse(raw)
	if err != nil {
		r.err = err
		return r
	}
	r.task = t
	if r.row, err = newTaskRow(t); err != nil {
		r.task, r.err = nil, &codec.ParseError{Msg: err.Error()}
	}
	return r
}

const insertFTSSQL = `INSERT INTO tasks_fts (rowid, title, body, console, files) VALUES (?, ?, ?, ?, ?)`

// exec runs a cached statement with positional arguments, bound without
// reflection: the bulk load runs a few statements per file.
func exec(conn *sqlite.Conn, query string, args ...any) error {
	stmt, err := conn.Prepare(query)
	if err != nil {
		return err
	}
	for i, a := range args {
		switch v := a.(type) {
		case string:
			stmt.BindText(i+1, v)
		case int64:
			stmt.BindInt64(i+1, v)
		case []byte:
			stmt.BindBytes(i+1, v)
		case nil:
			stmt.BindNull(i + 1)
		default:
			panic(fmt.Sprintf("index: exec: argument %d is a %T", i+1, a))
		}
	}
	for {
		row, err := stmt.Step()
		if err != nil {
			stmt.Reset()
			return err
		}
		if !row {
			return stmt.Reset()
		}
	}
}

// stampArgs are a stamp's columns size, mtime, ino and ctime, for exec.
func stampArgs(s taskfs.Stamp) []any {
	return []any{s.Size, s.ModTime, int64(s.Inode), s.Change}
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
