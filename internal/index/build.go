package index

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/taskfs"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitemigration"
	"zombiezen.com/go/sqlite/sqlitex"
)

// BuildSuffix names the temporary file beside a database that [Build]
// writes (snag.db-build), and, with "-fts" after it, the one its full-text
// index is made in. Either one found at the start of a build was left by a
// build that was cut off, and is removed.
const BuildSuffix = "-build"

// The steps of a cold build, as [BuildOptions.OnStep] names them.
const (
	// StepBuildLoaded: every row is written into the temporary file; its
	// indexes, full-text index and fence are made next.
	StepBuildLoaded = "build-loaded"
	// StepBuildSynced: the temporary file is whole and on disk; it is
	// renamed into place next.
	StepBuildSynced = "build-synced"
)

// BuildOptions tune [Build].
type BuildOptions struct {
	// Fence, above 0, raises the fencing tokens of the new database above
	// it, as [DB.Fence] does, in the build itself: a database built where
	// there was none cannot know the tokens an earlier one handed out.
	Fence int64
	// OnStep, when set, is called at each step of the build (the
	// StepBuild constants), for crash tests: it may end the process there.
	// An error it returns fails the build.
	OnStep func(ctx context.Context, step string) error
}

// Build makes the database at path, where there is none (or an empty
// file), with the index of every task file in dir: what [Open] and
// [DB.Rebuild] would make, with the same rows, full-text index and
// schema, in a fraction of the time. It writes a temporary file beside
// path (path + BuildSuffix) without a journal and without syncs, its
// full-text index at the same time on a second connection into a second
// file (FTS5's tokenizer and buffer of terms were 45% of a bulk load's
// writer, which is one thread), copies that index into the first file,
// makes the secondary indexes, turns on WAL, syncs the file and renames it
// into place, then syncs the folder. It is crash-safe because the rename is
// its one step that anything else sees: a build cut off at any other point
// leaves path as it was (missing), and the next build removes what it
// left. The caller must be the database's one user: nothing may open path
// until Build returns.
func Build(ctx context.Context, path string, dir *taskfs.Dir, opts BuildOptions) (ScanStats, error) {
	st, err := build(ctx, path, dir, opts)
	if err != nil {
		removeBuild(path)
		return st, fmt.Errorf("build %s: %w", path, err)
	}
	return st, nil
}

// removeBuild removes the temporary files of a build of the database at
// path.
func removeBuild(path string) {
	for _, p := range []string{path + BuildSuffix, path + BuildSuffix + "-fts"} {
		for _, sfx := range []string{"", "-journal", "-wal", "-shm"} {
			os.Remove(p + sfx)
		}
	}
}

func build(ctx context.Context, dbPath string, dir *taskfs.Dir, opts BuildOptions) (ScanStats, error) {
	start := time.Now()
	var st ScanStats
	switch fi, err := os.Stat(dbPath); {
	case err == nil && fi.Size() > 0:
		return st, errors.New("the database exists: a build makes a new one only (move it aside first, or rebuild it in place with snag reindex)")
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return st, err
	}
	step := func(name string) error {
		if opts.OnStep == nil {
			return nil
		}
		return opts.OnStep(ctx, name)
	}
	entries, err := list(dir, &st)
	if err != nil {
		return st, err
	}
	// In the order of their paths, as a bulk load writes them (see scan).
	slices.SortFunc(entries, func(a, b taskfs.Entry) int { return strings.Compare(a.Name, b.Name) })

	removeBuild(dbPath)
	tmp, side := dbPath+BuildSuffix, dbPath+BuildSuffix+"-fts"
	conn, err := openBuildConn(ctx, tmp)
	if err != nil {
		return st, err
	}
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	if err := sqlitemigration.Migrate(ctx, conn, sqlitemigration.Schema{AppID: AppID, Migrations: migrations()}); err != nil {
		return st, err
	}
	var ftsSQL string
	err = sqlitex.ExecuteTransient(conn, `SELECT sql FROM sqlite_schema WHERE name = 'tasks_fts'`, &sqlitex.ExecOptions{
		ResultFunc: func(s *sqlite.Stmt) error { ftsSQL = s.ColumnText(0); return nil },
	})
	if err != nil {
		return st, err
	}
	fconn, err := openBuildConn(ctx, side)
	if err != nil {
		return st, err
	}
	defer func() {
		if fconn != nil {
			fconn.Close()
		}
	}()
	for _, q := range []string{ftsSQL, ftsHashSizeSQL, automergeOffSQL} {
		if err := sqlitex.ExecuteTransient(fconn, q, nil); err != nil {
			return st, fmt.Errorf("full-text index: %w", err)
		}
	}

	rd := newReader(ctx, dir, entries, nil, true)
	defer rd.stop()
	rows := make(chan ftsRow, scanWindow)
	ftsDone := make(chan error, 1)
	go func() { ftsDone <- writeFTS(fconn, rows) }()
	err = buildRows(ctx, conn, rd, entries, rows, &st, opts, step)
	if ferr := <-ftsDone; err == nil && ferr != nil {
		err = fmt.Errorf("full-text index: %w", ferr)
	}
	if err != nil {
		return st, err
	}
	if err := fconn.Close(); err != nil {
		return st, fmt.Errorf("full-text index: %w", err)
	}
	fconn = nil
	if err := copyFTS(conn, side); err != nil {
		return st, fmt.Errorf("full-text index: %w", err)
	}
	os.Remove(side)
	// The file a daemon opens is in WAL mode, as Open makes it: the mode is
	// kept in the file's header. Closing the last connection checkpoints
	// the (empty) log and removes it.
	if err := sqlitex.ExecuteTransient(conn, `PRAGMA journal_mode = wal`, nil); err != nil {
		return st, err
	}
	err = conn.Close()
	conn = nil
	if err != nil {
		return st, err
	}
	if err := syncFile(tmp); err != nil {
		return st, err
	}
	if err := step(StepBuildSynced); err != nil {
		return st, err
	}
	// A log or shared-memory file of an earlier database at path would be
	// read as this one's: the database they belonged to is gone.
	for _, sfx := range []string{"-wal", "-shm", "-journal"} {
		if err := os.Remove(dbPath + sfx); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return st, err
		}
	}
	if err := os.Rename(tmp, dbPath); err != nil {
		return st, err
	}
	if err := syncFile(filepath.Dir(dbPath)); err != nil {
		return st, err
	}
	st.Unchanged = st.Files - st.Parsed - st.Failed
	st.Duration = time.Since(start)
	return st, nil
}

// openBuildConn opens a new database file for a build: 8 KiB pages, as
// Open makes them; no journal and no syncs, since nothing reads the file
// until it is whole, synced and renamed into place; sorts and temporary
// tables in memory; no foreign key checks (the rows a build writes refer
// only to the rows it wrote before them).
func openBuildConn(ctx context.Context, path string) (*sqlite.Conn, error) {
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenCreate)
	if err != nil {
		return nil, err
	}
	conn.SetInterrupt(ctx.Done())
	for _, q := range []string{fmt.Sprintf(`PRAGMA page_size = %d`, newPageSize), `PRAGMA journal_mode = off`,
		`PRAGMA synchronous = off`, `PRAGMA temp_store = memory`, `PRAGMA foreign_keys = off`,
		`PRAGMA cache_size = -8192`} {
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return conn, nil
}

// buildRows writes every file's row into the database on conn in one
// transaction, as a bulk load into empty tables does (scan), handing each
// row's text to the full-text writer through rows, which it closes after
// the last row, so the full-text index is finished while it makes the
// secondary indexes and triggers, marks duplicates and, when asked, fences.
func buildRows(ctx context.Context, conn *sqlite.Conn, rd *reader, entries []taskfs.Entry, rows chan<- ftsRow,
	st *ScanStats, opts BuildOptions, step func(string) error) (err error) {
	closed := false
	defer func() {
		if !closed {
			close(rows)
		}
	}()
	end, err := sqlitex.ImmediateTransaction(conn)
	if err != nil {
		return err
	}
	defer end(&err)
	drop, recreate, err := loadDrops(conn, true)
	if err != nil {
		return err
	}
	for _, q := range drop {
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			return err
		}
	}
	w := &writer{conn: conn, bulk: true, fresh: true, ftsRow: func(r ftsRow) error {
		select {
		case rows <- r:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	for i := range entries {
		r, err := rd.result(i)
		if err != nil {
			return err
		}
		if errors.Is(r.err, fs.ErrNotExist) {
			continue // removed since the listing
		}
		st.Read++
		ch, err := w.apply(path.Join(TasksFolder, r.name), r, rowInfo{}, false)
		if err != nil {
			return err
		}
		countChange(st, r, ch)
	}
	close(rows)
	closed = true
	if err := step(StepBuildLoaded); err != nil {
		return err
	}
	for _, q := range recreate {
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			return err
		}
	}
	if err := markAllDups(conn, true); err != nil {
		return err
	}
	if opts.Fence > 0 {
		return fence(conn, opts.Fence)
	}
	return nil
}

// writeFTS fills the full-text table on conn with rows, in one
// transaction, until rows is closed, and then merges it into one segment
// (see optimizeFTSSQL and automergeOffSQL). After an error it takes the
// rest of rows without writing them, so the sender never waits for it.
func writeFTS(conn *sqlite.Conn, rows <-chan ftsRow) (err error) {
	defer func() {
		for range rows {
		}
	}()
	end, err := sqlitex.ImmediateTransaction(conn)
	if err != nil {
		return err
	}
	defer end(&err)
	split := false
	for r := range rows {
		if err := insertLoadFTS(conn, r, &split); err != nil {
			return err
		}
	}
	for _, q := range ftsLoadEnd {
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			return err
		}
	}
	return nil
}

// copyFTS replaces the full-text index's tables on conn with those of the
// database at side, which holds the same full-text table filled by
// writeFTS: FTS5 keeps its whole state in them. The full-text table itself
// is not used on conn again: its connection to FTS5 read none of them.
func copyFTS(conn *sqlite.Conn, side string) (err error) {
	if err := sqlitex.Execute(conn, `ATTACH DATABASE :path AS fts`, &sqlitex.ExecOptions{
		Named: map[string]any{":path": side}}); err != nil {
		return err
	}
	defer func() {
		if derr := sqlitex.ExecuteTransient(conn, `DETACH DATABASE fts`, nil); err == nil {
			err = derr
		}
	}()
	var tables []string
	err = sqlitex.ExecuteTransient(conn, `SELECT name FROM fts.sqlite_schema
		WHERE type = 'table' AND name LIKE 'tasks\_fts\_%' ESCAPE '\' ORDER BY name`, &sqlitex.ExecOptions{
		ResultFunc: func(s *sqlite.Stmt) error { tables = append(tables, s.ColumnText(0)); return nil },
	})
	if err != nil {
		return err
	}
	if len(tables) == 0 {
		return errors.New("no full-text tables were made")
	}
	return func() (err error) {
		end, err := sqlitex.ImmediateTransaction(conn)
		if err != nil {
			return err
		}
		defer end(&err)
		for _, t := range tables {
			for _, q := range []string{`DELETE FROM main."` + t + `"`, `INSERT INTO main."` + t + `" SELECT * FROM fts."` + t + `"`} {
				if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
					return err
				}
			}
		}
		return nil
	}()
}

// syncFile flushes the file or folder at path to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
