package index

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// writer makes the changes of one transaction. Outside a bulk load the
// triggers keep the full-text index; in one, the writer does.
type writer struct {
	conn      *sqlite.Conn
	bulk      bool
	fresh     bool     // the tables were empty: no secondary indexes until the end, and no missing rows
	ftsSplit  bool     // a fresh load's first full-text row has a segment of its own (see optimizeFTSSQL)
	keys      []string // ids and aliases whose duplicate flags need a look
	cacheSize int64    // the page cache size before a bulk load
	// ftsRow, when set, takes each new row's text for the full-text index
	// instead of the full-text table on conn (a cold build fills that in
	// a database of its own, beside: see [Build]).
	ftsRow func(r ftsRow) error
}

// ftsRow is the text of one row for the full-text index.
type ftsRow struct {
	n                           int64
	title, body, console, files string
}

type rowChange struct{ added, updated bool }

func countChange(st *ScanStats, r *fileResult, ch rowChange) {
	switch {
	case r.touched:
	case r.err != nil:
		st.Failed++
	default:
		st.Parsed++
	}
	if ch.added {
		st.Added++
	} else if ch.updated {
		st.Updated++
	}
}

// beginBulk prepares the transaction for a bulk load: a bigger page cache
// (see restoreCache), a bigger full-text buffer (FTS5's hashsize, which is
// kept: it only matters to large transactions), no full-text triggers, and,
// for a rebuild, empty index tables; into empty tables, no secondary
// indexes but those that start with the path. The function it returns puts the triggers and indexes
// back (from their own definitions) and marks duplicates; it must run in
// the same transaction.
func (w *writer) beginBulk(rebuild bool) (end func() error, err error) {
	w.bulk = true
	conn := w.conn
	err = sqlitex.ExecuteTransient(conn, `PRAGMA cache_size`, &sqlitex.ExecOptions{
		ResultFunc: func(s *sqlite.Stmt) error { w.cacheSize = s.ColumnInt64(0); return nil },
	})
	if err != nil {
		return nil, err
	}
	w.fresh = rebuild
	if !rebuild {
		err = sqlitex.ExecuteTransient(conn, `SELECT NOT EXISTS (SELECT 1 FROM tasks)`, &sqlitex.ExecOptions{
			ResultFunc: func(s *sqlite.Stmt) error { w.fresh = s.ColumnBool(0); return nil },
		})
		if err != nil {
			return nil, err
		}
	}
	drop, recreate, err := loadDrops(conn, w.fresh)
	if err != nil {
		return nil, err
	}
	// The page cache of a bulk load needs the right edges of the table and
	// of the indexes kept (the rows come in path order) and FTS5's pages:
	// 8 MiB. A bigger one only held more pages that were later freed one by
	// one (a munmap each under modernc's allocator, which also gives each
	// 4.3 KB page an 8 KiB slot): at 64 MiB they were 10% of a rebuild's
	// samples and most of a cold start's peak memory. FTS5's buffer of
	// terms is flushed to a segment at 16 MiB: 64 MiB gained no time at
	// 100,000 tasks and cost about 150 MB of peak memory.
	script := []string{`PRAGMA cache_size = -8192`, // KiB
		ftsHashSizeSQL}
	if rebuild {
		script = append(script, `DELETE FROM deps`, `DELETE FROM tasks`,
			`INSERT INTO tasks_fts (tasks_fts) VALUES ('delete-all')`)
	}
	if w.fresh {
		script = append(script, automergeOffSQL)
	}
	script = append(script, drop...)
	for _, q := range script {
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			return nil, err
		}
	}
	if w.fresh {
		recreate = append(recreate, ftsLoadEnd...)
	}
	return func() error {
		for _, q := range recreate {
			if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
				return err
			}
		}
		return markAllDups(conn, w.fresh)
	}, nil
}

// loadDrops lists what a bulk load drops for its length and makes again at
// its end, from their own definitions: the full-text triggers and, with
// indexes set (a load into empty tables), the secondary indexes of tasks
// and deps but those that start with the path. Into empty tables the rows
// go in without those indexes, which are made at the end from the sorted
// keys: an index of random keys (ids) kept up row by row splits a page
// every few inserts, and the allocator maps and unmaps memory for each
// split. An index that starts with the path stays: the rows come in the
// order of their paths, so its entries go in at its end, and making it
// again would read every row once more.
func loadDrops(conn *sqlite.Conn, indexes bool) (drop, recreate []string, err error) {
	err = sqlitex.ExecuteTransient(conn, `SELECT name, sql FROM sqlite_schema
		WHERE type = 'trigger' AND tbl_name = 'tasks' AND sql LIKE '%tasks_fts%' ORDER BY name`, &sqlitex.ExecOptions{
		ResultFunc: func(s *sqlite.Stmt) error {
			drop = append(drop, `DROP TRIGGER "`+s.ColumnText(0)+`"`)
			recreate = append(recreate, s.ColumnText(1))
			return nil
		},
	})
	if err != nil || !indexes {
		return drop, recreate, err
	}
	err = sqlitex.ExecuteTransient(conn, `SELECT name, sql FROM sqlite_schema AS s
		WHERE type = 'index' AND tbl_name IN ('tasks', 'deps') AND sql IS NOT NULL
			AND (SELECT name FROM pragma_index_info(s.name) WHERE seqno = 0) IS NOT 'path'
		ORDER BY name`, &sqlitex.ExecOptions{
		ResultFunc: func(s *sqlite.Stmt) error {
			drop = append(drop, `DROP INDEX "`+s.ColumnText(0)+`"`)
			recreate = append(recreate, s.ColumnText(1))
			return nil
		},
	})
	return drop, recreate, err
}

// restoreCache puts back the page cache size beginBulk found, whether or
// not the transaction commits (a PRAGMA is not rolled back).
func (w *writer) restoreCache() {
	if w.cacheSize != 0 {
		sqlitex.ExecuteTransient(w.conn, fmt.Sprintf(`PRAGMA cache_size = %d`, w.cacheSize), nil)
	}
}

// apply writes one file's result into its row.
func (w *writer) apply(p string, r *fileResult, old rowInfo, had bool) (rowChange, error) {
	if r.touched {
		err := exec(w.conn, `UPDATE tasks SET size = ?, mtime = ?, ino = ?, ctime = ? WHERE n = ?`,
			append(stampArgs(r.stamp), old.n)...)
		return rowChange{}, err
	}
	if r.err != nil {
		return w.applyFailure(p, r, old, had)
	}
	if had {
		if err := w.noteKeys(old.n); err != nil {
			return rowChange{}, err
		}
		if err := w.ftsDelete(old.n); err != nil {
			return rowChange{}, err
		}
	}
	// A plain INSERT or UPDATE rather than an upsert: an upsert needs a
	// statement journal, which costs more than the row itself.
	args := append(append([]any{p, r.sum}, stampArgs(r.stamp)...), r.row.args...)
	var ch rowChange
	var err error
	n := old.n
	if had {
		err = exec(w.conn, updateTaskSQL, append(args, n)...)
		if err == nil && w.conn.Changes() != 1 {
			err = errors.New("its row is gone: the index changed during the scan; try again")
		}
		ch.updated = true
	} else {
		// The file of a missing task is back under another name: the
		// task's row is this one now.
		if !w.fresh { // a rebuild emptied the table: nothing is missing
			if err := w.dropMissing(r.task.ID); err != nil {
				return ch, err
			}
		}
		err = exec(w.conn, insertTaskSQL, args...)
		n = w.conn.LastInsertRowID()
		ch.added = true
	}
	if err != nil {
		return ch, fmt.Errorf("index %s: %w", p, err)
	}
	if err := w.ftsInsert(n, r.row.task.Title, r.row.body, r.row.console, r.row.files); err != nil {
		return ch, err
	}
	if had { // the row may have had dependencies
		if err := sqlitex.Execute(w.conn, `DELETE FROM deps WHERE task_n = :n`, &sqlitex.ExecOptions{Named: map[string]any{":n": n}}); err != nil {
			return ch, err
		}
	}
	for _, ref := range r.row.deps {
		if err := exec(w.conn, `INSERT OR IGNORE INTO deps (task_n, ref) VALUES (?, ?)`, n, ref); err != nil {
			return ch, err
		}
	}
	if !w.bulk {
		w.keys = append(w.keys, r.task.ID, r.task.Key)
	}
	return ch, nil
}

// applyFailure records a file that does not parse. A row with good data
// keeps it, marked stale; a new file gets a row with its error alone, its
// name for a title, and the alias number its name holds.
func (w *writer) applyFailure(p string, r *fileResult, old rowInfo, had bool) (rowChange, error) {
	ch := rowChange{added: !had, updated: had}
	state, msg, line := snag.StateInvalid, r.err.Error(), 0
	var pe *codec.ParseError
	if errors.As(r.err, &pe) {
		line = pe.Line
		if pe.Conflict {
			state = snag.StateConflict
		}
		msg = codec.WithPath(pe, p).Error()
	}
	if had { // the text the full-text index holds does not change
		err := sqlitex.Execute(w.conn, `UPDATE tasks SET sha256 = :sha256, size = :size, mtime = :mtime,
				ino = :ino, ctime = :ctime, state = :state, error = :error, error_line = :line, stale = (id != '')
			WHERE n = :n`, &sqlitex.ExecOptions{Named: map[string]any{
			":sha256": r.sum, ":size": r.stamp.Size, ":mtime": r.stamp.ModTime, ":ino": int64(r.stamp.Inode),
			":ctime": r.stamp.Change, ":state": state, ":error": msg,
			":line": int64(line), ":n": old.n,
		}})
		return ch, err
	}
	title := path.Base(p)
	err := sqlitex.Execute(w.conn, `
		INSERT INTO tasks (path, sha256, size, mtime, ino, ctime, key_num, title, state, error, error_line)
		VALUES (:path, :sha256, :size, :mtime, :ino, :ctime, :key_num, :title, :state, :error, :line)`,
		&sqlitex.ExecOptions{Named: map[string]any{
			":path": p, ":sha256": r.sum, ":size": r.stamp.Size, ":mtime": r.stamp.ModTime, ":ino": int64(r.stamp.Inode),
			":ctime": r.stamp.Change, ":key_num": keyNumFromName(title),
			":title": title, ":state": state, ":error": msg, ":line": int64(line),
		}})
	if err != nil {
		return ch, err
	}
	return ch, w.ftsInsert(w.conn.LastInsertRowID(), title, "", "", "")
}

// keyNumFromName reads n out of a file named SNAG-n - ..., so a file that
// never parsed still holds its alias number against reuse.
func keyNumFromName(name string) any {
	head, _, ok := strings.Cut(name, " ")
	if !ok {
		head = strings.TrimSuffix(name, ".md")
	}
	if n, err := queue.AliasNumber(head); err == nil {
		return int64(n)
	}
	return nil
}

// ftsInsert adds a new row's text to the full-text index in a bulk load
// (outside one, the insert and update triggers do).
func (w *writer) ftsInsert(n int64, title, body, console, files string) error {
	if !w.bulk {
		return nil
	}
	r := ftsRow{n, title, body, console, files}
	switch {
	case w.ftsRow != nil:
		return w.ftsRow(r)
	case w.fresh:
		return insertLoadFTS(w.conn, r, &w.ftsSplit)
	}
	return exec(w.conn, insertFTSSQL, n, title, body, console, files)
}

// ftsDelete takes a row's text out of the full-text index before the row
// changes or goes, in a bulk load (outside one, the triggers do). FTS5 needs
// the very text it indexed.
func (w *writer) ftsDelete(n int64) error {
	if !w.bulk {
		return nil
	}
	var args map[string]any
	err := sqlitex.Execute(w.conn, `SELECT title, body, console, files FROM tasks WHERE n = :n`, &sqlitex.ExecOptions{
		Named: map[string]any{":n": n},
		ResultFunc: func(s *sqlite.Stmt) error {
			args = map[string]any{":n": n, ":title": s.ColumnText(0), ":body": s.ColumnText(1),
				":console": s.ColumnText(2), ":files": s.ColumnText(3)}
			return nil
		},
	})
	if err != nil || args == nil {
		return err
	}
	return sqlitex.Execute(w.conn, `INSERT INTO tasks_fts (tasks_fts, rowid, title, body, console, files)
		VALUES ('delete', :n, :title, :body, :console, :files)`, &sqlitex.ExecOptions{Named: args})
}

// noteKeys remembers the id and alias a row has before it changes or goes,
// so that the duplicate flags of rows sharing them are looked at again.
func (w *writer) noteKeys(n int64) error {
	if w.bulk {
		return nil
	}
	return sqlitex.Execute(w.conn, `SELECT id, key FROM tasks WHERE n = :n`, &sqlitex.ExecOptions{
		Named: map[string]any{":n": n},
		ResultFunc: func(s *sqlite.Stmt) error {
			w.keys = append(w.keys, s.ColumnText(0), s.ColumnText(1))
			return nil
		},
	})
}

// fileGone handles a row whose file is gone. The row of a task that an
// agent holds is kept, marked missing, so its key, title and lease stay in
// view (and its key is not handed out again) until the file is back or the
// lease ends; any other row is removed. It reports whether the row changed.
func (w *writer) fileGone(n int64) (changed bool, err error) {
	var state string
	leased := false
	err = sqlitex.Execute(w.conn, `SELECT state, id != '' AND EXISTS (SELECT 1 FROM leases l WHERE l.task_id = tasks.id AND l.ended IS NULL)
		FROM tasks WHERE n = :n`, &sqlitex.ExecOptions{
		Named: map[string]any{":n": n},
		ResultFunc: func(s *sqlite.Stmt) error {
			state, leased = s.ColumnText(0), s.ColumnBool(1)
			return nil
		},
	})
	switch {
	case err != nil:
		return false, err
	case leased && state == snag.StateMissing:
		return false, nil
	case leased:
		return true, sqlitex.Execute(w.conn, `UPDATE tasks SET state = 'missing', error = :err, error_line = 0, stale = 0,
			sha256 = x'', size = 0, mtime = 0, ino = 0, ctime = 0 WHERE n = :n`, &sqlitex.ExecOptions{Named: map[string]any{":n": n, ":err": missingError}})
	}
	return true, w.deleteRow(n)
}

// dropMissing removes the missing rows of a task whose file is back.
func (w *writer) dropMissing(id string) error {
	if id == "" {
		return nil
	}
	var ns []int64
	err := sqlitex.Execute(w.conn, `SELECT n FROM tasks WHERE id = :id AND state = 'missing'`, &sqlitex.ExecOptions{
		Named:      map[string]any{":id": id},
		ResultFunc: func(s *sqlite.Stmt) error { ns = append(ns, s.ColumnInt64(0)); return nil },
	})
	for _, n := range ns {
		if err == nil {
			err = w.deleteRow(n)
		}
	}
	return err
}

// deleteRow removes a row whose file is gone; its dependencies go with it.
func (w *writer) deleteRow(n int64) error {
	if err := w.noteKeys(n); err != nil {
		return err
	}
	if err := w.ftsDelete(n); err != nil {
		return err
	}
	return sqlitex.Execute(w.conn, `DELETE FROM tasks WHERE n = :n`, &sqlitex.ExecOptions{Named: map[string]any{":n": n}})
}

// markDups recomputes the duplicate flag of every row that shares an id or
// alias with the ones noted.
func (w *writer) markDups() error {
	done := map[string]bool{}
	for _, k := range w.keys {
		if k == "" || done[k] {
			continue
		}
		done[k] = true
		q := `UPDATE tasks SET dup = (
				(SELECT count(*) FROM tasks t WHERE t.id = tasks.id) > 1 OR
				(SELECT count(*) FROM tasks t WHERE t.key = tasks.key) > 1)
			WHERE id = :k`
		if strings.HasPrefix(k, queue.AliasPrefix) {
			q = `UPDATE tasks SET dup = (
				(SELECT count(*) FROM tasks t WHERE t.id = tasks.id) > 1 OR
				(SELECT count(*) FROM tasks t WHERE t.key = tasks.key) > 1)
			WHERE key = :k`
		}
		if err := sqlitex.Execute(w.conn, q, &sqlitex.ExecOptions{Named: map[string]any{":k": k}}); err != nil {
			return fmt.Errorf("mark duplicates: %w", err)
		}
	}
	w.keys = w.keys[:0]
	return nil
}

// markAllDups sets the duplicate flag of every row from scratch, writing
// only the rows whose flag changes. A row is a duplicate when another has
// its id or its alias; a file that never parsed has neither. In a load into empty tables (fresh)
// every row was written with the flag clear, so only the duplicates are
// looked at and set, through the indexes of ids and aliases: the look at
// every row read the whole table again (0.43 s of a cold build at
// 100,000 tasks).
func markAllDups(conn *sqlite.Conn, fresh bool) error {
	const dups = `
		WITH d(n) AS (
			SELECT n FROM tasks WHERE id IN (SELECT id FROM tasks WHERE id != '' GROUP BY id HAVING count(*) > 1)
			UNION
			SELECT n FROM tasks WHERE key IN (SELECT key FROM tasks WHERE key != '' GROUP BY key HAVING count(*) > 1))`
	q := dups + ` UPDATE tasks SET dup = (n IN d) WHERE dup != (n IN d)`
	if fresh {
		q = dups + ` UPDATE tasks SET dup = 1 WHERE n IN d`
	}
	if err := sqlitex.Execute(conn, q, nil); err != nil {
		return fmt.Errorf("mark duplicates: %w", err)
	}
	return nil
}
