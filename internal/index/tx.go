package index

import (
	"context"
	"crypto/sha256"
	"errors"
	"io/fs"
	"path"
	"slices"
	"time"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/taskfs"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// DataVersion is SQLite's data version of the connection tx runs on: it
// changes when another connection (another process) commits a write.
func (tx *Tx) DataVersion() (int64, error) {
	var v int64
	err := sqlitex.ExecuteTransient(tx.conn, `PRAGMA data_version`, &sqlitex.ExecOptions{
		ResultFunc: func(s *sqlite.Stmt) error { v = s.ColumnInt64(0); return nil },
	})
	return v, err
}

// errFound ends a walk of rows early: what was looked for is found.
var errFound = errors.New("found")

// Tx is one immediate transaction, for a lease change and the file rewrite
// it goes with: the rows are written, the file is renamed into place, then
// the transaction commits. After a crash the file wins.
type Tx struct {
	conn *sqlite.Conn
	db   *DB // for the lease journal; nil in a read
}

// Update runs f in one immediate transaction, on the connection every
// write of this DB is made on (see [DB.Read]).
func (db *DB) Update(ctx context.Context, f func(tx *Tx) error) error {
	return db.write(ctx, func(conn *sqlite.Conn) error { return f(&Tx{conn: conn, db: db}) })
}

// Ended is a lease that a committed transaction ended: what a store of
// the live state shared with other clones is told after the commit.
type Ended struct {
	Lease
	Reason string
}

// OnAudited sets f to be called after each commit that wrote audit
// entries, with them in order, while the write still holds its turn: f
// must not block or write to the DB (it queues them).
func (db *DB) OnAudited(f func([]snag.AuditEntry)) { db.onAudited = f }

// OnLeasesEnded sets f to be called after each commit that ended leases,
// with them in the order they ended, while the write still holds its turn:
// f must not block or write to the DB (it queues them).
func (db *DB) OnLeasesEnded(f func([]Ended)) { db.onEnded = f }

// Read runs f in one read transaction on the writer's connection, waiting
// for its turn as a write does. It is for the reads of the one writer just
// before its write (a claim choosing its task and checking it): the pages
// they need are in the writer's cache, which no other connection's write
// has dropped. f must not write; readers that are not about to write use
// the DB's own methods, which read on the other connections.
func (db *DB) Read(ctx context.Context, f func(tx *Tx) error) error {
	return db.writeConn(ctx, func(conn *sqlite.Conn) (err error) {
		defer sqlitex.Transaction(conn)(&err)
		return f(&Tx{conn: conn})
	})
}

// Audit appends an audit entry inside the transaction.
func (tx *Tx) Audit(e snag.AuditEntry) error {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	var sid any
	if e.SessionID != 0 {
		sid = e.SessionID
	}
	// An entry without a branch takes its session's, as last seen, and
	// the hook's copy has it too.
	err := sqlitex.Execute(tx.conn, `INSERT INTO audit (at, session_id, actor, agent, action, task_id, outcome, detail, branch)
		VALUES (:at, :sid, :actor, :agent, :action, :task, :outcome, :detail,
			coalesce(nullif(:branch, ''), (SELECT branch FROM sessions WHERE id = :sid), ''))
		RETURNING branch`, &sqlitex.ExecOptions{Named: map[string]any{
		":at": e.At.UnixNano(), ":sid": sid, ":actor": string(e.Actor), ":agent": e.Agent, ":action": e.Action,
		":task": e.TaskID, ":outcome": e.Outcome, ":detail": e.Detail, ":branch": e.Branch,
	}, ResultFunc: func(st *sqlite.Stmt) error {
		e.Branch = st.ColumnText(0)
		return nil
	}})
	if err == nil && tx.db != nil && tx.db.onAudited != nil {
		tx.db.audited = append(tx.db.audited, e)
	}
	return err
}

// SyncFile brings one task file's row in step with the file inside the
// transaction, as [DB.SyncFile] does outside one: after a write that left
// the file in an unknown state, or to index a file that is gone.
func (tx *Tx) SyncFile(dir *taskfs.Dir, name string) error {
	p := path.Join(TasksFolder, name)
	old, had, err := tx.rowInfo(p)
	if err != nil {
		return err
	}
	entry, err := dirEntry(dir, name)
	if err != nil {
		return err
	}
	var r *fileResult
	if entry != nil {
		r = readFile(dir, *entry, old, had)
	}
	return tx.syncResult(p, r, old, had)
}

// Written indexes the bytes snag itself has just written to a task file,
// inside the transaction of the write: t is those bytes parsed and fi the
// written file's info (taskfs.Rewritten). Nothing is read back, and the
// watcher then finds the row already holding the file's size, time and
// hash, and does nothing.
func (tx *Tx) Written(name string, data []byte, fi fs.FileInfo, t *queue.Task) error {
	p := path.Join(TasksFolder, name)
	old, had, err := tx.rowInfo(p)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	// The stamp is not trusted: the file was written a moment ago (and the
	// swap that put it in place changed its change time since).
	stamp := taskfs.StampOf(fi)
	stamp.Change = 0
	r := &fileResult{name: name, stamp: stamp, sum: sum[:], task: t}
	if r.row, err = newTaskRow(t); err != nil {
		r.task, r.err = nil, &codec.ParseError{Msg: err.Error()}
	}
	return tx.syncResult(p, r, old, had)
}

// rowInfo reads the facts of the row at p, if there is one.
func (tx *Tx) rowInfo(p string) (old rowInfo, had bool, err error) {
	err = sqlitex.Execute(tx.conn, `SELECT `+rowInfoColumns+` FROM tasks WHERE path = :path`, &sqlitex.ExecOptions{
		Named:      map[string]any{":path": p},
		ResultFunc: func(s *sqlite.Stmt) error { had, old = true, scanRowInfo(s, 0); return nil },
	})
	return old, had, err
}

// syncResult writes what a look at the file at p found (r nil: no file).
func (tx *Tx) syncResult(p string, r *fileResult, old rowInfo, had bool) error {
	w := &writer{conn: tx.conn}
	if r == nil || (r.err != nil && errors.Is(r.err, fs.ErrNotExist)) {
		if !had {
			return nil
		}
		if _, err := w.fileGone(old.n); err != nil {
			return err
		}
		return w.markDups()
	}
	if had && r.err == nil && !r.touched {
		same, err := tx.sameText(old.n, r)
		if err != nil {
			return err
		}
		if same {
			return exec(tx.conn, updateFactsSQL, append(append(append([]any{p, r.sum}, stampArgs(r.stamp)...), factsOf(r.row.args)...), old.n)...)
		}
	}
	if _, err := w.apply(p, r, old, had); err != nil {
		return err
	}
	return w.markDups()
}

// sameText reports whether row n is clean and holds r's id, alias, text
// columns and dependencies, so that r can be written over it in place.
func (tx *Tx) sameText(n int64, r *fileResult) (bool, error) {
	same := false
	err := sqlitex.Execute(tx.conn, `SELECT id, key, title, body, console, files FROM tasks
		WHERE n = :n AND state = 'ok' AND stale = 0`, &sqlitex.ExecOptions{
		Named: map[string]any{":n": n},
		ResultFunc: func(s *sqlite.Stmt) error {
			t := &r.row.task
			same = t.ID == s.ColumnText(0) && t.Key == s.ColumnText(1) && t.Title == s.ColumnText(2) &&
				r.row.body == s.ColumnText(3) && r.row.console == s.ColumnText(4) && r.row.files == s.ColumnText(5)
			return nil
		},
	})
	if err != nil || !same {
		return false, err
	}
	var deps []string
	err = sqlitex.Execute(tx.conn, `SELECT ref FROM deps WHERE task_n = :n ORDER BY ref`, &sqlitex.ExecOptions{
		Named:      map[string]any{":n": n},
		ResultFunc: func(s *sqlite.Stmt) error { deps = append(deps, s.ColumnText(0)); return nil },
	})
	if err != nil {
		return false, err
	}
	want := slices.Clone(r.row.deps)
	slices.Sort(want)
	return slices.Equal(deps, slices.Compact(want)), nil
}
