package coord

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// EmbeddedFile is the embedded store's file in a repository's state folder
// (.git/snag/live.db).
const EmbeddedFile = "live.db"

// embeddedSchema is the embedded store's tables: Store's, for one
// repository (no workspace column), with times in Unix nanoseconds by the
// one machine's clock.
const embeddedSchema = `
CREATE TABLE IF NOT EXISTS clones (
  id         INTEGER PRIMARY KEY,
  host       TEXT NOT NULL,
  root       TEXT NOT NULL,
  identity   TEXT NOT NULL DEFAULT '',
  branch     TEXT NOT NULL DEFAULT '',
  version    TEXT NOT NULL DEFAULT '',
  grace_ms   INTEGER NOT NULL DEFAULT 0,
  started    INTEGER NOT NULL,
  seen       INTEGER NOT NULL,
  ended      INTEGER,
  end_reason TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS sessions (
  clone      INTEGER NOT NULL,
  id         INTEGER NOT NULL,
  name       TEXT NOT NULL,
  client     TEXT NOT NULL DEFAULT '',
  branch     TEXT NOT NULL DEFAULT '',
  started    INTEGER NOT NULL,
  ended      INTEGER,
  end_reason TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (clone, id)
);
CREATE UNIQUE INDEX IF NOT EXISTS sessions_live_name ON sessions (name) WHERE ended IS NULL;
CREATE TABLE IF NOT EXISTS leases (
  task_id TEXT PRIMARY KEY,
  key     TEXT NOT NULL DEFAULT '',
  epoch   INTEGER NOT NULL,
  state   TEXT NOT NULL CHECK (state IN ('held', 'free', 'done')),
  clone   INTEGER,
  session INTEGER,
  holder  TEXT NOT NULL DEFAULT '',
  updated INTEGER NOT NULL,
  why     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS leases_clone ON leases (clone) WHERE state = 'held';
CREATE TABLE IF NOT EXISTS aliases (
  kind TEXT PRIMARY KEY,
  next INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS file_claims (
  id        INTEGER PRIMARY KEY,
  clone     INTEGER NOT NULL,
  session   INTEGER NOT NULL,
  holder    TEXT NOT NULL,
  path      TEXT NOT NULL,
  task_id   TEXT NOT NULL DEFAULT '',
  exclusive INTEGER NOT NULL,
  acquired  INTEGER NOT NULL,
  expires   INTEGER NOT NULL,
  released  INTEGER,
  why       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS file_claims_live ON file_claims (path) WHERE released IS NULL;
CREATE TABLE IF NOT EXISTS branch_leases (
  branch  TEXT PRIMARY KEY,
  clone   INTEGER NOT NULL,
  session INTEGER NOT NULL,
  holder  TEXT NOT NULL,
  expires INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS ready (
  clone    INTEGER NOT NULL,
  task_id  TEXT NOT NULL,
  key      TEXT NOT NULL,
  wave     INTEGER NOT NULL,
  sev_rank INTEGER NOT NULL,
  created  INTEGER NOT NULL,
  PRIMARY KEY (clone, task_id)
);
CREATE INDEX IF NOT EXISTS ready_order ON ready (clone, wave, sev_rank, created, task_id);
CREATE TABLE IF NOT EXISTS messages (
  id        INTEGER PRIMARY KEY,
  clone     INTEGER NOT NULL,
  kind      TEXT NOT NULL,
  from_name TEXT NOT NULL DEFAULT '',
  to_name   TEXT NOT NULL DEFAULT '',
  key       TEXT NOT NULL DEFAULT '',
  type      TEXT NOT NULL DEFAULT '',
  title     TEXT NOT NULL DEFAULT '',
  body      TEXT NOT NULL DEFAULT '',
  branch    TEXT NOT NULL DEFAULT '',
  created   INTEGER NOT NULL,
  seen      INTEGER
);
CREATE TABLE IF NOT EXISTS audit (
  id      INTEGER PRIMARY KEY,
  clone   INTEGER,
  at      INTEGER NOT NULL,
  session INTEGER NOT NULL DEFAULT 0,
  actor   TEXT NOT NULL,
  agent   TEXT NOT NULL DEFAULT '',
  action  TEXT NOT NULL,
  task_id TEXT NOT NULL DEFAULT '',
  outcome TEXT NOT NULL DEFAULT '',
  detail  TEXT NOT NULL DEFAULT '',
  branch  TEXT NOT NULL DEFAULT '',
  log     TEXT NOT NULL DEFAULT '',
  local   INTEGER NOT NULL DEFAULT 0
);
`

// embeddedColumns are the columns added to the embedded store's tables
// since its first release, each with its definition: a file made before
// gets them when it is opened.
var embeddedColumns = []struct{ table, column, def string }{
	{"audit", "log", "TEXT NOT NULL DEFAULT ''"},
	{"audit", "local", "INTEGER NOT NULL DEFAULT 0"},
}

// embeddedIndexes are made after the columns they need.
const embeddedIndexes = `
CREATE INDEX IF NOT EXISTS audit_local ON audit (log, local) WHERE local > 0;
`

// embeddedBusy is how long a write waits for another's lock on the file
// (another snagd of the repository, or snag doctor --fix) before it fails
// as ErrUnreachable.
const embeddedBusy = 5 * time.Second

// Embedded is the live state of one repository in a SQLite file that
// every snagd of the repository on this machine shares (Live). Each write
// is one immediate transaction, so writes are serialised, across
// processes too, and a grant is exactly once as Store's is. A member is
// what a clone is to Store: a snagd, or a worktree's view in one.
type Embedded struct {
	db     *EmbeddedDB
	pool   *sqlitex.Pool
	path   string
	opts   Options
	own    bool // Close closes db too (OpenEmbedded)
	clone  atomic.Int64
	branch atomic.Pointer[string]
	graces []time.Duration

	pubMu     sync.Mutex
	published map[string]Ready // the ready rows as last written; nil: write them all
}

// EmbeddedDB is the embedded store's file, open: the members of one
// process (a snagd's worktree views) share its connections (Join).
type EmbeddedDB struct {
	pool *sqlitex.Pool
	path string

	mu      sync.Mutex
	members map[int64]bool // joined through this file, in this process
	// wmu lets one write of this process at a time take the file's lock:
	// the others wait their turn here, in order, rather than in SQLite's
	// busy handler, which sleeps and retries and is not fair.
	wmu sync.Mutex
}

// OpenEmbeddedDB opens (creating when needed) the embedded store's file at
// path, with its tables.
func OpenEmbeddedDB(ctx context.Context, path string) (*EmbeddedDB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("coord: the live state's folder: %w", err)
	}
	pool, err := sqlitex.NewPool(path, sqlitex.PoolOptions{
		Flags:    sqlite.OpenReadWrite | sqlite.OpenCreate | sqlite.OpenWAL | sqlite.OpenURI,
		PoolSize: 3,
		PrepareConn: func(conn *sqlite.Conn) error {
			conn.SetBusyTimeout(embeddedBusy)
			return sqlitex.ExecuteTransient(conn, `PRAGMA synchronous = NORMAL;`, nil)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("coord: open the live state %s: %w", path, err)
	}
	db := &EmbeddedDB{pool: pool, path: path}
	if err := db.write(ctx, migrateEmbedded); err != nil {
		pool.Close()
		return nil, fmt.Errorf("coord: make the live state's tables in %s: %w", path, err)
	}
	if err := db.importKeys(ctx, filepath.Join(filepath.Dir(path), legacyKeysFile)); err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

// migrateEmbedded makes the embedded store's tables, and adds to a file
// made by an earlier snag the columns it lacks.
func migrateEmbedded(conn *sqlite.Conn) error {
	if err := sqlitex.ExecuteScript(conn, embeddedSchema, nil); err != nil {
		return err
	}
	for _, c := range embeddedColumns {
		has := false
		err := exec(conn, `SELECT 1 FROM pragma_table_info(?) WHERE name = ?`, func(*sqlite.Stmt) error { has = true; return nil }, c.table, c.column)
		if err != nil {
			return err
		}
		if !has {
			if err := exec(conn, `ALTER TABLE `+c.table+` ADD COLUMN `+c.column+` `+c.def, nil); err != nil {
				return err
			}
		}
	}
	return sqlitex.ExecuteScript(conn, embeddedIndexes, nil)
}

// legacyKeysFile, beside live.db, held the repository's key sequences
// before they moved into it: one "kind number" line each, the last
// number minted.
const legacyKeysFile = "keys"

// importKeys raises the sequences to the numbers the legacy keys file at
// path says were minted, so that no key minted before the upgrade is
// minted again. It changes nothing once they are (the file is left as it
// is); a missing file is nothing to import, a damaged line counts for
// nothing (the files' keys are a floor anyway).
func (db *EmbeddedDB) importKeys(ctx context.Context, path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("coord: read the key sequences of %s: %w: check that it can be read", path, err)
	}
	seq := map[string]int64{}
	for line := range strings.Lines(string(b)) {
		kind, num, ok := strings.Cut(strings.TrimSpace(line), " ")
		n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
		if ok && err == nil && n > 0 {
			seq[kind] = max(seq[kind], n)
		}
	}
	if len(seq) == 0 {
		return nil
	}
	return db.write(ctx, func(conn *sqlite.Conn) error {
		for kind, n := range seq {
			if err := exec(conn, `INSERT INTO aliases (kind, next) VALUES (?1, ?2 + 1)
				ON CONFLICT (kind) DO UPDATE SET next = max(next, ?2 + 1)`, nil, kind, n); err != nil {
				return fmt.Errorf("coord: import the key sequences of %s: %w", path, err)
			}
		}
		return nil
	})
}

// NextAlias takes the next number of kind ("task" or "note") from the
// repository's sequence, never below floor. It needs no member: snag
// doctor --fix takes its keys here without a snagd.
func (db *EmbeddedDB) NextAlias(ctx context.Context, kind string, floor int64) (int64, error) {
	var n int64
	err := db.write(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `INSERT INTO aliases (kind, next) VALUES (?1, ?2 + 1)
			ON CONFLICT (kind) DO UPDATE SET next = max(next, ?2) + 1
			RETURNING next - 1`, func(st *sqlite.Stmt) error { n = st.ColumnInt64(0); return nil }, kind, floor)
	})
	return n, err
}

// Close closes the file.
func (db *EmbeddedDB) Close() { db.pool.Close() }

// Join joins the store as the member opts describes (Workspace is not
// needed). A live member of the same host, folder and identity is taken
// over, as Open does: snagd started again keeps its leases.
func (db *EmbeddedDB) Join(ctx context.Context, opts Options) (*Embedded, error) {
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	s := &Embedded{db: db, pool: db.pool, path: db.path, opts: opts}
	if err := s.join(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// joined records member id as one of this process's, and mine lists them.
func (db *EmbeddedDB) joined(id int64) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.members == nil {
		db.members = map[int64]bool{}
	}
	db.members[id] = true
}

func (db *EmbeddedDB) mine(id int64) bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.members[id]
}

// OpenEmbedded opens the embedded store at path and joins it as the member
// opts describes; its Close closes the file too.
func OpenEmbedded(ctx context.Context, path string, opts Options) (*Embedded, error) {
	db, err := OpenEmbeddedDB(ctx, path)
	if err != nil {
		return nil, err
	}
	s, err := db.Join(ctx, opts)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.own = true
	return s, nil
}

// Close leaves the member as it is, and closes the file when the store
// was opened with OpenEmbedded. The member's row stays: a snagd that
// starts again takes it, and its leases, back.
func (s *Embedded) Close() {
	if s.own {
		s.db.Close()
	}
}

// Clone is the member's id.
func (s *Embedded) Clone() int64 { return s.clone.Load() }

// Across is false: the members are the worktrees of one machine.
func (s *Embedded) Across() bool { return false }

// Grace is how long the member may stay silent.
func (s *Embedded) Grace() time.Duration { return s.opts.Grace }

// OtherGraces lists the other live members' graces that differ from this
// one's, as they were when it joined.
func (s *Embedded) OtherGraces() []time.Duration { return slices.Clone(s.graces) }

// Rejoin joins again as a new member, after ErrCloneEnded.
func (s *Embedded) Rejoin(ctx context.Context) error { return s.join(ctx) }

func now() int64 { return time.Now().UnixNano() }

func unix(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// write runs f in one immediate transaction: it commits when f returns
// nil. A lock held past embeddedBusy is ErrUnreachable.
func (s *Embedded) write(ctx context.Context, f func(conn *sqlite.Conn) error) error {
	return s.db.write(ctx, f)
}

func (db *EmbeddedDB) write(ctx context.Context, f func(conn *sqlite.Conn) error) (err error) {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	conn, err := db.pool.Take(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer db.pool.Put(conn)
	end, err := sqlitex.ImmediateTransaction(conn)
	if err != nil {
		return fmt.Errorf("%w: the live state %s is locked: %w", ErrUnreachable, db.path, err)
	}
	defer func() {
		end(&err)
		if code := sqlite.ErrCode(err).ToPrimary(); code == sqlite.ResultFull {
			err = fmt.Errorf("the live state %s: %w: %w", db.path, syscall.ENOSPC, err) // the disk is full: nothing was changed
		}
	}()
	return f(conn)
}

// read runs f on a connection of its own.
func (s *Embedded) read(ctx context.Context, f func(conn *sqlite.Conn) error) error {
	conn, err := s.pool.Take(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer s.pool.Put(conn)
	return f(conn)
}

// exec runs query with args, calling row (when given) for each row.
func exec(conn *sqlite.Conn, query string, row func(*sqlite.Stmt) error, args ...any) error {
	return sqlitex.Execute(conn, query, &sqlitex.ExecOptions{Args: args, ResultFunc: row})
}

// live checks that the member was not ended.
func (s *Embedded) live(conn *sqlite.Conn) error {
	found, ok := false, false
	err := exec(conn, `SELECT ended IS NULL FROM clones WHERE id = ?`, func(st *sqlite.Stmt) error {
		found, ok = true, st.ColumnBool(0)
		return nil
	}, s.Clone())
	if err != nil {
		return err
	}
	if !found || !ok {
		return ErrCloneEnded
	}
	return nil
}

// join finds or makes the member's row. The ready rows are written whole
// at the next publication: a new member has none, and a taken-over one
// is rewritten.
func (s *Embedded) join(ctx context.Context) error {
	defer func() {
		s.pubMu.Lock()
		s.published = nil
		s.pubMu.Unlock()
	}()
	return s.write(ctx, func(conn *sqlite.Conn) error {
		grace := s.opts.Grace.Milliseconds()
		var id int64
		err := exec(conn, `SELECT id FROM clones WHERE host = ? AND root = ? AND ended IS NULL AND identity IN (?, '')
			ORDER BY id DESC LIMIT 1`, func(st *sqlite.Stmt) error { id = st.ColumnInt64(0); return nil },
			s.opts.Host, s.opts.Root, s.opts.Identity)
		if err != nil {
			return err
		}
		t := now()
		if id != 0 {
			err = exec(conn, `UPDATE clones SET seen = ?, branch = ?, version = ?, identity = ?, grace_ms = ? WHERE id = ?`, nil,
				t, s.opts.Branch, s.opts.Version, s.opts.Identity, grace, id)
		} else {
			err = exec(conn, `INSERT INTO clones (host, root, identity, branch, version, grace_ms, started, seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, nil,
				s.opts.Host, s.opts.Root, s.opts.Identity, s.opts.Branch, s.opts.Version, grace, t, t)
			id = conn.LastInsertRowID()
		}
		if err != nil {
			return err
		}
		s.clone.Store(id)
		if s.db != nil {
			s.db.joined(id)
		}
		s.graces = s.graces[:0]
		return exec(conn, `SELECT DISTINCT grace_ms FROM clones WHERE ended IS NULL AND id <> ? AND grace_ms > 0 AND grace_ms <> ? ORDER BY grace_ms`,
			func(st *sqlite.Stmt) error {
				s.graces = append(s.graces, time.Duration(st.ColumnInt64(0))*time.Millisecond)
				return nil
			}, id, grace)
	})
}

// Branch is the member's branch, as its last heartbeat said.
func (s *Embedded) Branch() string {
	if b := s.branch.Load(); b != nil {
		return *b
	}
	return s.opts.Branch
}

// Heartbeat marks the member alive; ErrCloneEnded once another swept it.
func (s *Embedded) Heartbeat(ctx context.Context, branch string) error {
	s.branch.Store(&branch)
	return s.write(ctx, func(conn *sqlite.Conn) error {
		if err := exec(conn, `UPDATE clones SET seen = ?, branch = ? WHERE id = ? AND ended IS NULL`, nil, now(), branch, s.Clone()); err != nil {
			return err
		}
		if conn.Changes() == 0 {
			return ErrCloneEnded
		}
		return nil
	})
}

// Sweep ends every other member silent past its own grace (the sweeper's
// for a row without one): its sessions end, its leases are freed, its file
// and branch claims go, with the reason in the audit. The members this
// process joined are never swept by each other: they live and stop
// together (a machine that slept resumes them all at once, each silent
// for as long as the others).
func (s *Embedded) Sweep(ctx context.Context) (Swept, error) {
	var out Swept
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		out = Swept{}
		t := now()
		err := exec(conn, `SELECT id, host, root, branch, started, seen, grace_ms FROM clones
			WHERE ended IS NULL AND id <> ? AND seen < ? - (CASE WHEN grace_ms > 0 THEN grace_ms * 1000000 ELSE ? END)`,
			func(st *sqlite.Stmt) error {
				if s.db != nil && s.db.mine(st.ColumnInt64(0)) {
					return nil
				}
				grace := time.Duration(st.ColumnInt64(6)) * time.Millisecond
				if grace == 0 {
					grace = s.opts.Grace
				}
				out.Clones = append(out.Clones, Clone{ID: st.ColumnInt64(0), Host: st.ColumnText(1), Root: st.ColumnText(2), Branch: st.ColumnText(3),
					Started: unix(st.ColumnInt64(4)), Seen: unix(st.ColumnInt64(5)),
					Reason: "silent for more than " + grace.String() + " (its snagd stopped heartbeating)"})
				return nil
			}, s.Clone(), t, s.opts.Grace.Nanoseconds())
		if err != nil {
			return err
		}
		for _, c := range out.Clones {
			for _, q := range []string{
				`UPDATE clones SET ended = ?1, end_reason = ?2 WHERE id = ?3`,
				`UPDATE sessions SET ended = ?1, end_reason = ?2 WHERE clone = ?3 AND ended IS NULL`,
				`UPDATE file_claims SET released = ?1, why = 'clone gone: ' || ?2 WHERE clone = ?3 AND released IS NULL`,
			} {
				if err := exec(conn, q, nil, t, c.Reason, c.ID); err != nil {
					return err
				}
			}
			for _, q := range []string{`DELETE FROM branch_leases WHERE clone = ?`, `DELETE FROM ready WHERE clone = ?`} {
				if err := exec(conn, q, nil, c.ID); err != nil {
					return err
				}
			}
			freed, err := s.free(conn, `clone = ?`, "clone gone: "+c.Reason, c.ID)
			if err != nil {
				return err
			}
			out.Leases = append(out.Leases, freed...)
			if err := s.audit(conn, Entry{Actor: "system", Action: "clone", Outcome: "ended", Detail: fmt.Sprintf("%s:%s %s", c.Host, c.Root, c.Reason)}); err != nil {
				return err
			}
			for _, l := range freed {
				if err := s.audit(conn, Entry{Actor: "system", Agent: l.Holder, Action: "release", TaskID: l.TaskID, Outcome: "ok",
					Detail: "holder's clone gone: " + c.Reason}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return out, err
}

// free frees the held leases that match where (its arguments args),
// returning them as they were.
func (s *Embedded) free(conn *sqlite.Conn, where, why string, args ...any) ([]Lease, error) {
	freed, err := s.leasesWhere(conn, `l.state = 'held' AND `+where, args...)
	if err != nil || len(freed) == 0 {
		return freed, err
	}
	return freed, exec(conn, `UPDATE leases SET state = 'free', updated = ?, why = ? WHERE state = 'held' AND `+where, nil,
		append([]any{now(), why}, args...)...)
}

const leaseColumns = `l.task_id, l.key, l.epoch, l.state, coalesce(l.clone, 0), coalesce(l.session, 0), l.holder, l.updated, l.why,
	coalesce(c.host, ''), coalesce(c.branch, '')`
