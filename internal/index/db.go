// Package index is snag's SQLite database, .snag/snag.db: an index of the
// task files that makes queries fast, beside the live state the files cannot
// hold (sessions, leases, file claims, messages, the audit log).
//
// The index is a cache. [DB.Scan] and [DB.SyncFile] keep it in step with the
// files and [DB.Rebuild] rebuilds it from them at any time; a rebuild never
// touches live state. A file that does not parse is never dropped: its row
// carries the error, and keeps the last good data it had, marked stale.
//
// The database is opened through one pool per process, with migrations run
// on open (embedded, append-only), WAL, foreign keys and an application id
// so a foreign file is recognised. Every method takes a context and waits at
// most until it is done for a connection.
//
// index imports queue and SQLite; it knows nothing of fsnotify, HTTP or MCP.
package index

import (
	"context"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/snagdev/snag/internal/snag"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitemigration"
	"zombiezen.com/go/sqlite/sqlitex"
)

// AppID marks a SQLite file as snag's ("snag" in ASCII).
const AppID = 0x736e6167

// BusyTimeout is how long a connection waits for another writer's lock
// before it gives up (the caller's context may end the wait sooner).
const BusyTimeout = 5 * time.Second

//go:embed schema/*.sql
var schemaFS embed.FS

func migrations() []string {
	names, _ := fs.Glob(schemaFS, "schema/*.sql")
	sort.Strings(names)
	out := make([]string, len(names))
	for i, n := range names {
		b, _ := schemaFS.ReadFile(n)
		out[i] = string(b)
	}
	return out
}

// DB is an open snag.db. It is safe for concurrent use.
type DB struct {
	// pool hands out the read connections; a restore (see [DB.Restore])
	// puts a new one in place, and each connection goes back to the pool
	// it came from.
	pool  atomic.Pointer[sqlitemigration.Pool]
	path  string
	conns int
	// file is the database file the pool opened, to tell when the path
	// names another file, or none (see [DB.Restore]).
	file atomic.Pointer[os.FileInfo]
	// retired are the pools of files a restore replaced. They are never
	// closed: SQLite's last close of a database in WAL mode checkpoints
	// and deletes the -wal file by its name, which is the new file's.
	// Their connections end with the process.
	retired []*sqlitemigration.Pool
	step    func(ctx context.Context, step string) error

	audits auditQueue // entries of AuditLater, not written yet
	// writer is the connection every write transaction of this DB runs on,
	// taken from the pool at Open and held until Close; a write waits for
	// its turn at wturn (a one-slot semaphore) instead of at SQLite's lock.
	// In WAL mode a connection drops its whole page cache when it starts a
	// read after another connection wrote: with every write made on the
	// one connection, that connection's cache stays warm, and the reads a
	// write makes (a claim's choice of task, its checks) find their pages
	// there instead of reading them again. See [DB.Update].
	writer *sqlite.Conn
	wturn  chan struct{}
	// busyUntil is when the write holding the turn stops waiting for
	// another process's lock (set under the turn).
	busyUntil time.Time
	// writes counts the write transactions committed on writer (see
	// [Tx.Writes]).
	writes atomic.Uint64
	// ended are the leases the write under way has ended (under its turn),
	// for onEnded once it commits (see [DB.OnLeasesEnded]).
	ended   []Ended
	onEnded func([]Ended)
	// audited are the audit entries the write under way has written, for
	// onAudited once it commits (see [DB.OnAudited]).
	audited   []snag.AuditEntry
	onAudited func([]snag.AuditEntry)
	// messages are the messages the write under way has added, for
	// onMessage once it commits (see [DB.OnMessage]).
	messages  []Message
	onMessage func(Message)
}

// The steps of a write transaction, as [DB.OnStep] names them.
const (
	StepBegun      = "begun"      // BEGIN IMMEDIATE holds the write lock
	StepCommitting = "committing" // the transaction's work is done, not yet committed
	StepCommitted  = "committed"  // committed
	StepRolledBack = "rolled-back"
)

// OnStep sets a function called at each step of every write transaction
// (the Step constants), with the context the write was made under, for
// crash tests: it may end the process there. An error it returns at begun
// or committing rolls the transaction back and is returned to the caller;
// at committed and rolled-back it is ignored. Set it before the DB is
// shared; nil, the default, costs nothing.
func (db *DB) OnStep(f func(ctx context.Context, step string) error) { db.step = f }

// ErrCorrupt is wrapped by the errors of [Check] and [Open] for a database
// file that is damaged, truncated, of an unknown schema, or not snag's.
// The index can be rebuilt from the files: snagd moves such a file aside
// at start and builds a new one.
var ErrCorrupt = errors.New("snag.db is damaged or not snag's")

// ErrBusy is wrapped by errors of writes that gave up waiting for another
// process's lock on the database. Such a write changed nothing; it may be
// tried again.
var ErrBusy = errors.New("snag.db is locked by another process")

// Open opens (creating when needed) the database at path and brings its
// schema up to date. It fails when the file is not snag's.
func Open(ctx context.Context, path string) (*DB, error) {
	return OpenConns(ctx, path, DefaultConns)
}

// DefaultConns is how many connections [Open] keeps open to snag.db: the
// writer's and seven for reads at once.
const DefaultConns = 8

// OpenConns is [Open] with conns connections (at least 2: the writer's and
// one for reads). Each costs about half a megabyte and is opened at once;
// snagd gives the repository's main worktree DefaultConns, and each other
// worktree it serves fewer, so many worktrees stay within its memory.
func OpenConns(ctx context.Context, path string, conns int) (*DB, error) {
	conns = max(conns, 2)
	if err := create(path); err != nil {
		return nil, fmt.Errorf("index %s: %w", path, err)
	}
	pool := newPool(path, conns)
	db := &DB{path: path, conns: conns, wturn: make(chan struct{}, 1)}
	db.pool.Store(pool)
	conn, err := take(ctx, pool, path)
	if err != nil {
		pool.Close()
		if damaged(err) {
			return nil, fmt.Errorf("index %s: %w: %w (snagd moves it aside and rebuilds it at start; without snagd, move it aside and run snag reindex)", path, ErrCorrupt, err)
		}
		return nil, err
	}
	db.writer = conn
	db.stamp()
	return db, nil
}

// newPool makes the pool of conns connections to the database at path.
func newPool(path string, conns int) *sqlitemigration.Pool {
	// The file is mapped into memory for reads, but by an index with
	// fewer connections than DefaultConns (a worktree's view beside the
	// main one's, in a snagd serving many): its mapped pages count in the
	// process's resident memory, about a megabyte a view, and its few
	// reads go through the page cache as well.
	mmap, cache := `PRAGMA mmap_size = 268435456;`, `PRAGMA cache_size = -4096;`
	if conns < DefaultConns {
		// and each connection's page cache holds a quarter megabyte: the
		// operating system's cache holds the file for all of them.
		mmap, cache = `PRAGMA mmap_size = 0;`, `PRAGMA cache_size = -256;`
	}
	return sqlitemigration.NewPool(path, sqlitemigration.Schema{
		AppID:      AppID,
		Migrations: migrations(),
	}, sqlitemigration.Options{
		Flags:    sqlite.OpenReadWrite | sqlite.OpenCreate | sqlite.OpenWAL | sqlite.OpenURI,
		PoolSize: conns,
		PrepareConn: func(conn *sqlite.Conn) error {
			conn.SetBusyTimeout(BusyTimeout)
			// temp_store = MEMORY keeps statement journals and sorts in
			// memory rather than in temp files. The page cache is 4 MiB a
			// connection (2 MiB by default, allocated as used): eight of
			// them (DefaultConns) stay within snagd's memory budget at
			// 100,000 tasks, and
			// the operating system's cache holds the rest of the file.
			// temp.tasks_fts_terms lists the full-text index's words, for
			// the prefix of a search's last word (see Search): a table of
			// the connection's own, so snag.db's schema does not change.
			for _, pragma := range []string{`PRAGMA foreign_keys = ON;`, `PRAGMA synchronous = NORMAL;`,
				`PRAGMA temp_store = MEMORY;`, cache, mmap,
				`CREATE VIRTUAL TABLE IF NOT EXISTS temp.tasks_fts_terms USING fts5vocab(main, tasks_fts, instance);`} {
				if err := sqlitex.ExecuteTransient(conn, pragma, nil); err != nil {
					return err
				}
			}
			return nil
		},
	})
}

// Restore writes the database, as this DB holds it, to its path again when
// the file there is not the one it opened: deleted, or moved away, while
// the process ran. Everything the DB held is kept (the index and the live
// state's copy: sessions, leases, the audit outbox), and the DB goes on in
// the new file. It reports whether it wrote one; with the file in place it
// does nothing.
func (db *DB) Restore(ctx context.Context) (bool, error) {
	if db.inPlace() {
		return false, nil
	}
	restored := false
	err := db.writeConn(ctx, func(conn *sqlite.Conn) error {
		if db.inPlace() {
			return nil // restored meanwhile
		}
		tmp := db.path + ".restore"
		os.Remove(tmp)
		if err := sqlitex.ExecuteTransient(conn, `VACUUM INTO :path`, &sqlitex.ExecOptions{Named: map[string]any{":path": tmp}}); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("index: write %s again: %w", db.path, err)
		}
		if err := os.Rename(tmp, db.path); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("index: write %s again: %w", db.path, err)
		}
		for _, side := range []string{"-wal", "-shm"} {
			// The old file's, if they were left: the new file must not
			// read the old one's log as its own.
			os.Remove(db.path + side)
		}
		pool := newPool(db.path, db.conns)
		w, err := take(ctx, pool, db.path)
		if err != nil {
			pool.Close()
			return err
		}
		old := db.pool.Swap(pool)
		old.Put(db.writer)
		db.writer = w
		db.retired = append(db.retired, old)
		db.stamp()
		restored = true
		return nil
	})
	return restored, err
}

// stamp records which file the DB's path names now.
func (db *DB) stamp() {
	if fi, err := os.Stat(db.path); err == nil {
		db.file.Store(&fi)
	}
}

// inPlace reports whether the DB's path names the file it has open.
func (db *DB) inPlace() bool {
	fi, err := os.Stat(db.path)
	had := db.file.Load()
	return err == nil && had != nil && os.SameFile(fi, *had)
}

// newPageSize is the page size of a snag.db that Open creates. A file keeps
// the page size it was made with. At 8 KiB a task's row (about 2.3 KB
// with its body and JSON) shares its page with two others instead of
// filling half of one alone, and a rebuild reads and writes a third as
// many pages, each a system call (a rebuild of 10,000 files took 17% less
// CPU than at 4 KiB). At 16 KiB a page and its header no longer fit the
// largest slot of modernc's allocator, which then maps every page of the
// cache by itself: slower than 4 KiB.
const newPageSize = 8192

// create makes the database file at path with its page size and in WAL
// mode when there is none, or it is empty. The page size must be set
// before the first page is written, which turning on WAL does.
func create(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.Size() > 0:
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenURI)
	if err != nil {
		return err
	}
	conn.SetBusyTimeout(BusyTimeout)
	for _, q := range []string{fmt.Sprintf(`PRAGMA page_size = %d;`, newPageSize), `PRAGMA journal_mode = wal;`} {
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			conn.Close()
			return err
		}
	}
	return conn.Close()
}

// damaged reports whether an error from opening or migrating the database
// says the file is not a sound snag database (as opposed to locked, or
// unreadable for want of permission or room).
func damaged(err error) bool {
	switch sqlite.ErrCode(err).ToPrimary() {
	case sqlite.ResultCorrupt, sqlite.ResultNotADB:
		return true
	case sqlite.ResultBusy, sqlite.ResultLocked, sqlite.ResultIOErr, sqlite.ResultCantOpen,
		sqlite.ResultPerm, sqlite.ResultReadOnly, sqlite.ResultFull, sqlite.ResultNoMem, sqlite.ResultInterrupt:
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	// A migration that does not apply (its tables are not what its
	// version says) or an application id that is not snag's.
	msg := err.Error()
	return strings.Contains(msg, "migrate database") || strings.Contains(msg, "application_id")
}

// Check looks at the database file at path before it is opened for use:
// its header, its size against the page count the header gives, its
// application id and schema version and, when deep is set, SQLite's quick
// check of every page. A problem is returned wrapping [ErrCorrupt], saying
// what is wrong; a file that is missing or empty is fine (it is created).
// Other errors (a lock held too long, a permission) are returned as they
// are: they are not the file's fault. The quick check reads the whole file
// (seconds at 100,000 tasks): snagd's start asks for it unless the file is
// [Untouched] since a clean close.
func Check(ctx context.Context, path string, deep bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("index %s: %w: %s", path, ErrCorrupt, fmt.Sprintf(format, args...))
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("index %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return bad("not a regular file")
	}
	if fi.Size() == 0 {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("index %s: %w", path, err)
	}
	var h [100]byte
	_, err = io.ReadFull(f, h[:])
	f.Close()
	if err != nil {
		return bad("%d bytes, too short for a SQLite header", fi.Size())
	}
	if string(h[:16]) != "SQLite format 3\x00" {
		return bad("bad header: not a SQLite database")
	}
	pageSize := int64(binary.BigEndian.Uint16(h[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	if pageSize < 512 || pageSize > 65536 || pageSize&(pageSize-1) != 0 {
		return bad("bad header: page size %d", pageSize)
	}
	// The page count in the header is valid when the change counter
	// matches the version-valid-for number. While a write-ahead log holds
	// frames the file may be shorter than the header says until they are
	// checkpointed, so the sizes are compared only without one.
	pages := int64(binary.BigEndian.Uint32(h[28:32]))
	valid := binary.BigEndian.Uint32(h[24:28]) == binary.BigEndian.Uint32(h[92:96])
	if wal, err := os.Stat(path + "-wal"); valid && pages > 0 && (err != nil || wal.Size() == 0) && fi.Size() < pages*pageSize {
		return bad("truncated: %d bytes, the header says %d pages of %d", fi.Size(), pages, pageSize)
	}

	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenURI)
	if err != nil {
		if damaged(err) {
			return bad("%v", err)
		}
		return fmt.Errorf("index %s: %w", path, err)
	}
	defer conn.Close()
	conn.SetBusyTimeout(BusyTimeout)
	defer conn.SetInterrupt(conn.SetInterrupt(ctx.Done()))
	var appID, version, tables int64
	var quick []string
	err = sqlitex.ExecuteTransient(conn, `SELECT (SELECT application_id FROM pragma_application_id),
		(SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_master)`, &sqlitex.ExecOptions{
		ResultFunc: func(st *sqlite.Stmt) error {
			appID, version, tables = st.ColumnInt64(0), st.ColumnInt64(1), st.ColumnInt64(2)
			return nil
		},
	})
	quick = []string{"ok"}
	if err == nil && deep {
		quick = nil
		err = sqlitex.ExecuteTransient(conn, `PRAGMA quick_check(5)`, &sqlitex.ExecOptions{
			ResultFunc: func(st *sqlite.Stmt) error { quick = append(quick, st.ColumnText(0)); return nil },
		})
	}
	if err != nil {
		if damaged(err) {
			return bad("%v", err)
		}
		return fmt.Errorf("index %s: %w", path, err)
	}
	switch {
	case appID == 0 && tables > 0:
		return bad("a SQLite database of another program (no application id, %d tables)", tables)
	case appID != 0 && appID != AppID:
		return bad("a SQLite database of another program (application id %#x, snag's is %#x)", appID, AppID)
	case version > int64(len(migrations())):
		return bad("schema version %d is newer than this snag knows (%d): a newer snag made it", version, len(migrations()))
	case len(quick) != 1 || quick[0] != "ok":
		return bad("quick check: %s", strings.ReplaceAll(strings.Join(quick, "; "), "\n", "; "))
	}
	return nil
}

// Busy reports whether err is a database lock that another process held
// for longer than a write would wait (or a wait cut short by its
// deadline): nothing was changed, and the write may be tried again.
func Busy(err error) bool {
	if errors.Is(err, ErrBusy) {
		return true
	}
	switch sqlite.ErrCode(err).ToPrimary() {
	case sqlite.ResultBusy, sqlite.ResultLocked:
		return true
	}
	return false
}

// Fence raises the fencing tokens after the database was rebuilt from the
// files, when the epochs and session ids it had handed out are lost: every
// indexed task's epoch, and the next session id, go above floor (snagd
// passes the clock in milliseconds, more than any count of grants before
// it), so no holder from before the rebuild can present a token that is
// live again.
func (db *DB) Fence(ctx context.Context, floor int64) error {
	return db.write(ctx, func(conn *sqlite.Conn) error { return fence(conn, floor) })
}

// fence raises the fencing tokens above floor (see [DB.Fence]) in the
// transaction open on conn.
func fence(conn *sqlite.Conn, floor int64) error {
	err := sqlitex.Execute(conn, `INSERT INTO epochs (task_id, epoch)
		SELECT DISTINCT id, :floor FROM tasks WHERE id != ''
		ON CONFLICT (task_id) DO UPDATE SET epoch = max(epoch, excluded.epoch)`,
		&sqlitex.ExecOptions{Named: map[string]any{":floor": floor}})
	if err != nil {
		return fmt.Errorf("index: fence epochs: %w", err)
	}
	now := time.Now().UnixNano()
	err = sqlitex.Execute(conn, `INSERT INTO sessions (id, name, started, last_seen, ended, end_reason)
		SELECT :floor, '', :now, :now, :now, 'placeholder: session ids after a rebuild start above it'
		WHERE NOT EXISTS (SELECT 1 FROM sessions WHERE id >= :floor)`,
		&sqlitex.ExecOptions{Named: map[string]any{":floor": floor, ":now": now}})
	if err != nil {
		return fmt.Errorf("index: fence sessions: %w", err)
	}
	return nil
}

// Close closes every connection. Once they are closed it records the
// stamps of the file and its WAL beside them (see [Untouched]), so the next
// start can tell that nothing wrote the file since.
func (db *DB) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	db.FlushAudit(ctx)
	db.audits.close()
	// The writer is given back once the write under way (or a flush the
	// audit timer began) has ended; a write that comes later finds none.
	db.wturn <- struct{}{}
	w := db.writer
	db.writer = nil
	<-db.wturn
	pool := db.pool.Load()
	if w != nil {
		pool.Put(w)
	}
	if err := pool.Close(); err != nil {
		return err
	}
	recordClosed(db.path)
	return nil
}

// Path is the database file's path.
func (db *DB) Path() string { return db.path }

// take gets a connection, waiting at most as long as ctx allows; the
// connection is interrupted when ctx ends.
func take(ctx context.Context, pool *sqlitemigration.Pool, path string) (*sqlite.Conn, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	conn, err := pool.Take(ctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("index %s: no connection: %w", path, err)
		}
		return nil, fmt.Errorf("index %s: %w (if it is damaged, move it aside and run snag reindex)", path, err)
	}
	return conn, nil
}

// withConn runs f on a connection that ctx interrupts.
func (db *DB) withConn(ctx context.Context, f func(conn *sqlite.Conn) error) error {
	pool := db.pool.Load()
	conn, err := take(ctx, pool, db.path)
	if err != nil {
		return err
	}
	defer pool.Put(conn)
	old := conn.SetInterrupt(ctx.Done())
	defer conn.SetInterrupt(old)
	return f(conn)
}

// writeConn runs f on the writer connection once it is this write's turn,
// waiting at most BusyTimeout (or as long as ctx allows): a turn not had
// by then fails with ErrBusy, as a lock held too long by another process
// does.
func (db *DB) writeConn(ctx context.Context, f func(conn *sqlite.Conn) error) error {
	deadline := time.Now().Add(BusyTimeout)
	wait := time.NewTimer(BusyTimeout)
	defer wait.Stop()
	select {
	case db.wturn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("index: begin: %w (%w)", ErrBusy, ctx.Err())
	case <-wait.C:
		return fmt.Errorf("index: begin: %w (another write of this process held snag.db for %v)", ErrBusy, BusyTimeout)
	}
	defer func() { <-db.wturn }()
	// The turn and the lock share one wait: a write that waited its turn
	// behind another that waited on an outside lock has only the rest.
	db.busyUntil = deadline
	conn := db.writer
	if conn == nil {
		return fmt.Errorf("index %s: closed (snagd is stopping; run the command again once it has)", db.path)
	}
	old := conn.SetInterrupt(ctx.Done())
	defer conn.SetInterrupt(old)
	return f(conn)
}

// write runs f in an immediate transaction on the writer connection, so a
// write that follows a read never meets a lock upgrade failure. A lock
// another process held for longer than BusyTimeout (or than ctx allows)
// fails it with ErrBusy.
func (db *DB) write(ctx context.Context, f func(conn *sqlite.Conn) error) error {
	return db.writeConn(ctx, func(conn *sqlite.Conn) error { return db.transact(ctx, conn, f) })
}

// transact runs f in an immediate transaction on conn, after the audit
// entries queued meanwhile, which go back on the queue if it fails. Once
// it has committed, what it ended, audited and sent goes to the
// listeners.
func (db *DB) transact(ctx context.Context, conn *sqlite.Conn, f func(conn *sqlite.Conn) error) (err error) {
	end, err := beginImmediate(ctx, conn, time.Until(db.busyUntil))
	if err != nil {
		return err
	}
	// Once begun, a transaction runs to its commit or its rollback: an
	// interrupt in the middle would fail the rollback too. Long writes
	// (a scan) watch ctx themselves and return its error.
	conn.SetInterrupt(nil)
	queued, dropped := db.audits.take()
	defer func() {
		if err != nil {
			db.audits.put(db, queued, dropped)
		}
	}()
	db.ended, db.audited, db.messages = db.ended[:0], db.audited[:0], db.messages[:0]
	defer func() { db.publish(err) }()
	if err = writeQueued(&Tx{conn: conn, db: db}, queued, dropped); err != nil {
		end(&err)
		return err
	}
	defer func() {
		if err == nil {
			db.writes.Add(1)
		}
	}()
	return db.commit(ctx, conn, end, f)
}

// beginImmediate begins an immediate transaction on conn, failing with
// ErrBusy when another process holds the lock past the write's budget
// (what is left of its BusyTimeout, by the clock, after its turn). SQLite's own busy timeout counts the sleeps it asks for, not the
// time they take: on a loaded machine a wait of "5 s" took over 8, so the
// wait for the lock is the connection's blocking handler, interrupted at
// the deadline, and the connection's busy timeout is set back after.
func beginImmediate(ctx context.Context, conn *sqlite.Conn, budget time.Duration) (end func(*error), err error) {
	bctx, cancel := context.WithTimeout(ctx, max(budget, 0))
	defer cancel()
	old := conn.SetInterrupt(bctx.Done())
	conn.SetBlockOnBusy()
	end, err = sqlitex.ImmediateTransaction(conn)
	conn.SetBusyTimeout(BusyTimeout)
	conn.SetInterrupt(old)
	switch {
	case err == nil:
		return end, nil
	case Busy(err) || errors.Is(bctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("index: begin: %w (%w)", ErrBusy, err)
	}
	return nil, fmt.Errorf("index: begin: %w", err)
}

// commit runs f in the transaction end ends: committed when f succeeds,
// rolled back when not. With db.step set, it steps through each stage
// (begun, committing, then committed or rolled back).
func (db *DB) commit(ctx context.Context, conn *sqlite.Conn, end func(*error), f func(conn *sqlite.Conn) error) (err error) {
	if db.step == nil {
		defer end(&err)
		return f(conn)
	}
	func() {
		defer end(&err)
		if err = db.step(ctx, StepBegun); err != nil {
			return
		}
		if err = f(conn); err != nil {
			return
		}
		err = db.step(ctx, StepCommitting)
	}()
	if err != nil {
		db.step(ctx, StepRolledBack)
	} else {
		db.step(ctx, StepCommitted)
	}
	return err
}

// publish gives the listeners the sessions a transaction ended, the
// entries it audited and the messages it sent, once it has committed
// (err is nil), and forgets them either way.
func (db *DB) publish(err error) {
	if err == nil && db.onMessage != nil {
		for _, m := range db.messages {
			db.onMessage(m)
		}
	}
	if err == nil && len(db.ended) > 0 && db.onEnded != nil {
		db.onEnded(append([]Ended(nil), db.ended...))
	}
	if err == nil && len(db.audited) > 0 && db.onAudited != nil {
		db.onAudited(append([]snag.AuditEntry(nil), db.audited...))
	}
	db.ended, db.audited, db.messages = db.ended[:0], db.audited[:0], db.messages[:0]
}
