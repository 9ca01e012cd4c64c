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

// Register records a session of this member, or its new name.
func (s *Embedded) Register(ctx context.Context, ses Session) error {
	return s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		host := ""
		err := exec(conn, `SELECT c.host FROM sessions x JOIN clones c ON c.id = x.clone
			WHERE x.name = ? AND x.ended IS NULL AND NOT (x.clone = ? AND x.id = ?)`,
			func(st *sqlite.Stmt) error { host = st.ColumnText(0); return nil }, ses.Name, s.Clone(), ses.ID)
		if err != nil {
			return err
		}
		if host != "" {
			return fmt.Errorf("%w: %s is live on %s", ErrNameTaken, ses.Name, host)
		}
		return exec(conn, `INSERT INTO sessions (clone, id, name, client, branch, started) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (clone, id) DO UPDATE SET name = excluded.name, client = excluded.client, branch = excluded.branch,
				ended = NULL, end_reason = ''`, nil, s.Clone(), ses.ID, ses.Name, ses.Client, ses.Branch, now())
	})
}

// EndSession ends a session of this member and frees every task it held,
// returning those leases as they were.
func (s *Embedded) EndSession(ctx context.Context, id int64, why string) ([]Lease, error) {
	var freed []Lease
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		t := now()
		if err := exec(conn, `UPDATE sessions SET ended = ?, end_reason = ? WHERE clone = ? AND id = ? AND ended IS NULL`, nil, t, why, s.Clone(), id); err != nil {
			return err
		}
		var err error
		if freed, err = s.free(conn, `clone = ? AND session = ?`, "holder gone: "+why, s.Clone(), id); err != nil {
			return err
		}
		if err := exec(conn, `UPDATE file_claims SET released = ?, why = ? WHERE clone = ? AND session = ? AND released IS NULL`, nil,
			t, "holder gone: "+why, s.Clone(), id); err != nil {
			return err
		}
		return exec(conn, `DELETE FROM branch_leases WHERE clone = ? AND session = ?`, nil, s.Clone(), id)
	})
	return freed, err
}

// LiveSessions lists the ids of this member's live sessions.
func (s *Embedded) LiveSessions(ctx context.Context) ([]int64, error) {
	var ids []int64
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `SELECT id FROM sessions WHERE clone = ? AND ended IS NULL ORDER BY id`,
			func(st *sqlite.Stmt) error { ids = append(ids, st.ColumnInt64(0)); return nil }, s.Clone())
	})
	return ids, err
}

// LiveNames lists the names of the other live members' live sessions.
func (s *Embedded) LiveNames(ctx context.Context) ([]string, error) {
	var names []string
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `SELECT x.name FROM sessions x JOIN clones c ON c.id = x.clone
			WHERE x.clone <> ? AND x.ended IS NULL AND c.ended IS NULL ORDER BY x.name`,
			func(st *sqlite.Stmt) error { names = append(names, st.ColumnText(0)); return nil }, s.Clone())
	})
	return names, err
}

const leaseColumns = `l.task_id, l.key, l.epoch, l.state, coalesce(l.clone, 0), coalesce(l.session, 0), l.holder, l.updated, l.why,
	coalesce(c.host, ''), coalesce(c.branch, '')`

func scanLease(st *sqlite.Stmt) Lease {
	return Lease{TaskID: st.ColumnText(0), Key: st.ColumnText(1), Epoch: st.ColumnInt64(2), State: st.ColumnText(3),
		Clone: st.ColumnInt64(4), Session: st.ColumnInt64(5), Holder: st.ColumnText(6), Updated: unix(st.ColumnInt64(7)),
		Why: st.ColumnText(8), Host: st.ColumnText(9), Branch: st.ColumnText(10)}
}

// leasesWhere reads the leases that match where, by task id.
func (s *Embedded) leasesWhere(conn *sqlite.Conn, where string, args ...any) ([]Lease, error) {
	var out []Lease
	err := exec(conn, `SELECT `+leaseColumns+` FROM leases l LEFT JOIN clones c ON c.id = l.clone WHERE `+where+` ORDER BY l.task_id`,
		func(st *sqlite.Stmt) error { out = append(out, scanLease(st)); return nil }, args...)
	return out, err
}

// leaseOf reads task id's lease; ok is false when it was never claimed.
func (s *Embedded) leaseOf(conn *sqlite.Conn, id string) (Lease, bool, error) {
	ls, err := s.leasesWhere(conn, `l.task_id = ?`, id)
	if err != nil || len(ls) == 0 {
		return Lease{TaskID: id, State: Free}, false, err
	}
	return ls[0], true, nil
}

// Grant gives session ses the lease of task id under a new epoch: ErrHeld
// when another session holds it, ErrDone when it was resolved; the
// session that holds it already gets its lease as it is.
func (s *Embedded) Grant(ctx context.Context, id, key string, ses Session) (Lease, error) {
	var l Lease
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		cur, found, err := s.leaseOf(conn, id)
		if err != nil {
			return err
		}
		switch {
		case !found || cur.State == Free:
			epoch := cur.Epoch + 1
			if err := s.hold(conn, id, key, epoch, ses); err != nil {
				return err
			}
			l, _, err = s.leaseOf(conn, id)
			return err
		case cur.State == Done:
			l = cur
			return fmt.Errorf("%w: %s was resolved through %s (branch %s): pull to see it, or ask a person to reopen it", ErrDone, key, orNone(cur.Host), orNone(cur.Branch))
		case cur.Clone == s.Clone() && cur.Session == ses.ID:
			l = cur
			return nil
		default:
			l = cur
			return fmt.Errorf("%w: %s holds it (on %s)", ErrHeld, cur.Holder, orNone(cur.Host))
		}
	})
	return l, err
}

// hold writes task id's lease as held by ses of this member at epoch.
func (s *Embedded) hold(conn *sqlite.Conn, id, key string, epoch int64, ses Session) error {
	return exec(conn, `INSERT INTO leases (task_id, key, epoch, state, clone, session, holder, updated) VALUES (?1, ?2, ?3, 'held', ?4, ?5, ?6, ?7)
		ON CONFLICT (task_id) DO UPDATE SET key = ?2, epoch = ?3, state = 'held', clone = ?4, session = ?5, holder = ?6, updated = ?7, why = ''`,
		nil, id, key, epoch, s.Clone(), ses.ID, ses.Name, now())
}

// GrantAt gives session ses the lease of task id at epoch exactly (see
// Store.GrantAt).
func (s *Embedded) GrantAt(ctx context.Context, id, key string, ses Session, epoch int64) (Lease, error) {
	var l Lease
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		cur, found, err := s.leaseOf(conn, id)
		if err != nil {
			return err
		}
		if !found || cur.State == Free && cur.Epoch <= epoch || cur.State == Held && cur.Clone == s.Clone() && cur.Epoch == epoch ||
			cur.State == Done && cur.Epoch == epoch {
			if err := s.hold(conn, id, key, epoch, ses); err != nil {
				return err
			}
			l, _, err = s.leaseOf(conn, id)
			return err
		}
		l = cur
		switch cur.State {
		case Done:
			return fmt.Errorf("%w: %s was resolved through %s", ErrDone, key, orNone(cur.Host))
		case Held:
			return fmt.Errorf("%w: %s holds it (on %s)", ErrHeld, cur.Holder, orNone(cur.Host))
		}
		return fmt.Errorf("%w: %s was granted at epoch %d since", ErrStale, key, cur.Epoch)
	})
	return l, err
}

// Transfer moves task id's lease, held by this member at epoch, to ses
// under a new epoch (a handoff).
func (s *Embedded) Transfer(ctx context.Context, id string, epoch int64, ses Session) (Lease, error) {
	var l Lease
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		if err := exec(conn, `UPDATE leases SET epoch = epoch + 1, session = ?, holder = ?, updated = ?
			WHERE task_id = ? AND clone = ? AND epoch = ? AND state = 'held'`, nil, ses.ID, ses.Name, now(), id, s.Clone(), epoch); err != nil {
			return err
		}
		if conn.Changes() == 0 {
			return fmt.Errorf("%w: %s is not held by this clone at epoch %d", ErrStale, id, epoch)
		}
		var err error
		l, _, err = s.leaseOf(conn, id)
		return err
	})
	return l, err
}

// Adopt moves task id's lease, held by this member at epoch, to ses.
func (s *Embedded) Adopt(ctx context.Context, id string, epoch int64, ses Session) error {
	return s.write(ctx, func(conn *sqlite.Conn) error {
		if err := exec(conn, `UPDATE leases SET session = ?, holder = ?, updated = ?
			WHERE task_id = ? AND clone = ? AND epoch = ? AND state = 'held'`, nil, ses.ID, ses.Name, now(), id, s.Clone(), epoch); err != nil {
			return err
		}
		if conn.Changes() == 0 {
			return fmt.Errorf("%w: %s is not held by this clone at epoch %d", ErrStale, id, epoch)
		}
		return nil
	})
}

// Check verifies that this member's session holds task id under epoch (0:
// whichever is live): ErrStale otherwise.
func (s *Embedded) Check(ctx context.Context, id string, epoch int64, session int64) (Lease, error) {
	var l Lease
	var found bool
	err := s.read(ctx, func(conn *sqlite.Conn) (err error) {
		l, found, err = s.leaseOf(conn, id)
		return err
	})
	if err != nil {
		return l, err
	}
	return l, held(l, found, id, s.Clone(), session, epoch)
}

// Release frees task id, held by this member's session under epoch.
func (s *Embedded) Release(ctx context.Context, id string, epoch, session int64, why string) error {
	return s.end(ctx, id, epoch, session, Free, why)
}

// Resolve marks task id done, held by this member's session under epoch.
func (s *Embedded) Resolve(ctx context.Context, id string, epoch, session int64, why string) error {
	return s.end(ctx, id, epoch, session, Done, why)
}

// End ends task id's lease held by this member under epoch, whichever of
// its sessions holds it, in state Free or Done.
func (s *Embedded) End(ctx context.Context, id string, epoch int64, state, why string) error {
	return s.end(ctx, id, epoch, 0, state, why)
}

func (s *Embedded) end(ctx context.Context, id string, epoch, session int64, state, why string) error {
	return s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		err := exec(conn, `UPDATE leases SET state = ?, updated = ?, why = ?
			WHERE task_id = ? AND state = 'held' AND clone = ? AND (?6 = 0 OR session = ?6) AND (?7 = 0 OR epoch = ?7)`, nil,
			state, now(), why, id, s.Clone(), session, epoch)
		if err != nil {
			return err
		}
		if conn.Changes() == 0 {
			l, _, _ := s.leaseOf(conn, id)
			return fmt.Errorf("%w: %s is %s at epoch %d", ErrStale, id, orNone(l.State), l.Epoch)
		}
		return nil
	})
}

// Unend takes back an end this member told first (see Store.Unend).
func (s *Embedded) Unend(ctx context.Context, id string, epoch int64, ses Session, hold bool) error {
	return s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		state, session := Free, any(nil)
		if hold {
			state, session = Held, ses.ID
		}
		return exec(conn, `UPDATE leases SET state = ?, clone = ?, session = ?, holder = ?, updated = ?, why = ''
			WHERE task_id = ? AND state = 'done' AND epoch = ?`, nil, state, s.Clone(), session, ses.Name, now(), id, epoch)
	})
}

// MarkDone puts task id's lease in state Done when it is free at an epoch
// no later than epoch, or still held by this member at epoch.
func (s *Embedded) MarkDone(ctx context.Context, id string, epoch int64, why string) (bool, error) {
	var changed bool
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		err := exec(conn, `UPDATE leases SET state = 'done', updated = ?, why = ?
			WHERE task_id = ? AND epoch <= ?4 AND (state = 'free' OR (state = 'held' AND clone = ? AND epoch = ?4))`, nil,
			now(), why, id, epoch, s.Clone())
		changed = conn.Changes() > 0
		return err
	})
	return changed, err
}

// Set puts task id's lease in state Free or Done under a new epoch, whoever
// holds it: a person's decision.
func (s *Embedded) Set(ctx context.Context, id, key, state, why string) error {
	if state != Free && state != Done {
		return fmt.Errorf("coord: set %s to %q: only %q and %q can be set", key, state, Free, Done)
	}
	return s.write(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `INSERT INTO leases (task_id, key, epoch, state, why, clone, updated) VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6)
			ON CONFLICT (task_id) DO UPDATE SET state = ?3, epoch = epoch + 1, updated = ?6, why = ?4, clone = ?5, session = NULL`,
			nil, id, key, state, why, s.Clone(), now())
	})
}

// LeaseOf returns task id's lease; a task never claimed is Free at epoch 0.
func (s *Embedded) LeaseOf(ctx context.Context, id string) (Lease, error) {
	var l Lease
	err := s.read(ctx, func(conn *sqlite.Conn) (err error) {
		l, _, err = s.leaseOf(conn, id)
		return err
	})
	return l, err
}

// Leases lists the held leases.
func (s *Embedded) Leases(ctx context.Context) ([]Lease, error) {
	var out []Lease
	err := s.read(ctx, func(conn *sqlite.Conn) (err error) {
		out, err = s.leasesWhere(conn, `l.state = 'held'`)
		return err
	})
	return out, err
}

// Mine lists the leases this member holds.
func (s *Embedded) Mine(ctx context.Context) ([]Lease, error) {
	var out []Lease
	err := s.read(ctx, func(conn *sqlite.Conn) (err error) {
		out, err = s.leasesWhere(conn, `l.state = 'held' AND l.clone = ?`, s.Clone())
		return err
	})
	return out, err
}

// Finished lists the tasks that are done, by id.
func (s *Embedded) Finished(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `SELECT task_id FROM leases WHERE state = 'done'`, func(st *sqlite.Stmt) error {
			out[st.ColumnText(0)] = true
			return nil
		})
	})
	return out, err
}

// NextAlias takes the next number of kind's sequence, never below floor.
func (s *Embedded) NextAlias(ctx context.Context, kind string, floor int64) (int64, error) {
	return s.db.NextAlias(ctx, kind, floor)
}

// GiveBack returns n to kind's sequence when it was the last number taken.
func (s *Embedded) GiveBack(ctx context.Context, kind string, n int64) error {
	return s.write(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `UPDATE aliases SET next = ?2 WHERE kind = ?1 AND next = ?2 + 1`, nil, kind, n)
	})
}

// fileClaims reads the live, unexpired claims (and where, when given).
func (s *Embedded) fileClaims(conn *sqlite.Conn, where string, args ...any) ([]FileClaim, error) {
	if where != "" {
		where = " AND " + where
	}
	var out []FileClaim
	err := exec(conn, `SELECT f.id, f.clone, coalesce(c.host, ''), f.session, f.holder, f.path, f.task_id, f.exclusive, f.acquired, f.expires
		FROM file_claims f LEFT JOIN clones c ON c.id = f.clone
		WHERE f.released IS NULL AND f.expires > ?`+where+` ORDER BY f.path, f.id`, func(st *sqlite.Stmt) error {
		out = append(out, FileClaim{ID: st.ColumnInt64(0), Clone: st.ColumnInt64(1), Host: st.ColumnText(2), Session: st.ColumnInt64(3),
			Holder: st.ColumnText(4), Path: st.ColumnText(5), TaskID: st.ColumnText(6), Exclusive: st.ColumnBool(7),
			Acquired: unix(st.ColumnInt64(8)), Expires: unix(st.ColumnInt64(9))})
		return nil
	}, append([]any{now()}, args...)...)
	return out, err
}

// ClaimFiles claims r's paths for a session of this member, all or
// nothing, against every other session's live claims.
func (s *Embedded) ClaimFiles(ctx context.Context, r FilesRequest, overlap func(a, b string) bool) (FilesResult, error) {
	var res FilesResult
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		res = FilesResult{}
		if err := s.live(conn); err != nil {
			return err
		}
		live, err := s.fileClaims(conn, "")
		if err != nil {
			return err
		}
		var own map[string]FileClaim
		if own, res.Conflicts = inTheWay(live, s.Clone(), r, overlap); len(res.Conflicts) > 0 {
			return nil
		}
		t := now()
		expires := t + r.TTL.Nanoseconds()
		for _, p := range r.Paths {
			c := FileClaim{Clone: s.Clone(), Host: s.opts.Host, Session: r.Session.ID, Holder: r.Session.Name, Path: p, TaskID: r.TaskID,
				Exclusive: r.Exclusive, Expires: unix(expires)}
			if old, ok := own[p]; ok {
				err = exec(conn, `UPDATE file_claims SET expires = ?, exclusive = ?, task_id = ? WHERE id = ?`, nil, expires, r.Exclusive, r.TaskID, old.ID)
				c.ID, c.Acquired = old.ID, old.Acquired
				res.Renewed++
			} else {
				err = exec(conn, `INSERT INTO file_claims (clone, session, holder, path, task_id, exclusive, acquired, expires) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, nil,
					s.Clone(), r.Session.ID, r.Session.Name, p, r.TaskID, r.Exclusive, t, expires)
				c.ID, c.Acquired = conn.LastInsertRowID(), unix(t)
			}
			if err != nil {
				return err
			}
			res.Claimed = append(res.Claimed, c)
		}
		return nil
	})
	return res, err
}

// FileClaims lists the live file claims of every member.
func (s *Embedded) FileClaims(ctx context.Context) ([]FileClaim, error) {
	var out []FileClaim
	err := s.read(ctx, func(conn *sqlite.Conn) (err error) {
		out, err = s.fileClaims(conn, "")
		return err
	})
	return out, err
}

// ReleaseFiles ends this member's session's claims of paths, or all of
// them when paths is empty.
func (s *Embedded) ReleaseFiles(ctx context.Context, session int64, paths []string, why string) error {
	return s.write(ctx, func(conn *sqlite.Conn) error {
		q := `UPDATE file_claims SET released = ?, why = ? WHERE clone = ? AND session = ? AND released IS NULL`
		args := []any{now(), why, s.Clone(), session}
		if len(paths) > 0 {
			q += ` AND path IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(paths)), ", ") + `)`
			for _, p := range paths {
				args = append(args, p)
			}
		}
		return exec(conn, q, nil, args...)
	})
}

// ForceReleaseFile ends every live claim of path, whoever holds it: a
// person's decision. It returns the claims it ended.
func (s *Embedded) ForceReleaseFile(ctx context.Context, path, why string) ([]FileClaim, error) {
	var out []FileClaim
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		var err error
		if out, err = s.fileClaims(conn, "f.path = ?", path); err != nil || len(out) == 0 {
			return err
		}
		return exec(conn, `UPDATE file_claims SET released = ?, why = ? WHERE path = ? AND released IS NULL`, nil, now(), why, path)
	})
	return out, err
}

// TakeBranch takes, or renews, the write lease of branch for ses for ttl,
// unless another session holds it: then ok is false and held says who.
func (s *Embedded) TakeBranch(ctx context.Context, branch string, ses Session, ttl time.Duration) (held BranchLease, ok bool, err error) {
	err = s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		t := now()
		err := exec(conn, `INSERT INTO branch_leases (branch, clone, session, holder, expires) VALUES (?1, ?2, ?3, ?4, ?5)
			ON CONFLICT (branch) DO UPDATE SET clone = ?2, session = ?3, holder = ?4, expires = ?5
			WHERE expires <= ?6 OR (clone = ?2 AND session = ?3)`, nil, branch, s.Clone(), ses.ID, ses.Name, t+ttl.Nanoseconds(), t)
		if err != nil {
			return err
		}
		if ok = conn.Changes() == 1; ok {
			return nil
		}
		return exec(conn, `SELECT b.branch, b.clone, coalesce(c.host, ''), b.session, b.holder, b.expires
			FROM branch_leases b LEFT JOIN clones c ON c.id = b.clone WHERE b.branch = ?`, func(st *sqlite.Stmt) error {
			held = BranchLease{Branch: st.ColumnText(0), Clone: st.ColumnInt64(1), Host: st.ColumnText(2), Session: st.ColumnInt64(3),
				Holder: st.ColumnText(4), Expires: unix(st.ColumnInt64(5))}
			return nil
		}, branch)
	})
	return held, ok, err
}

// Audit appends e to the audit of live actions as this member's.
func (s *Embedded) Audit(ctx context.Context, e Entry) error {
	return s.write(ctx, func(conn *sqlite.Conn) error { return s.audit(conn, e) })
}

// AuditBatch appends entries in one transaction.
func (s *Embedded) AuditBatch(ctx context.Context, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	return s.write(ctx, func(conn *sqlite.Conn) error {
		for _, e := range entries {
			if err := s.audit(conn, e); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Embedded) audit(conn *sqlite.Conn, e Entry) error {
	at := e.At
	if at.IsZero() {
		at = time.Now()
	}
	return exec(conn, `INSERT INTO audit (clone, at, session, actor, agent, action, task_id, outcome, detail, branch, log, local)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, nil,
		s.Clone(), at.UnixNano(), e.Session, e.Actor, e.Agent, e.Action, e.TaskID, e.Outcome, e.Detail, e.Branch, e.Log, e.Local)
}

// AuditLog returns the entries after id after, oldest first, at most limit.
func (s *Embedded) AuditLog(ctx context.Context, after int64, limit int) ([]Entry, error) {
	return s.auditRead(ctx, `WHERE a.id > ? ORDER BY a.id LIMIT ?`, after, limit)
}

// AuditTail returns the latest n entries, oldest first.
func (s *Embedded) AuditTail(ctx context.Context, n int) ([]Entry, error) {
	es, err := s.auditRead(ctx, `ORDER BY a.id DESC LIMIT ?`, n)
	slices.Reverse(es)
	return es, err
}

func (s *Embedded) auditRead(ctx context.Context, where string, args ...any) ([]Entry, error) {
	var out []Entry
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `SELECT a.id, coalesce(a.clone, 0), coalesce(c.host, ''), coalesce(c.root, ''), a.log, a.local, a.at,
				a.session, a.actor, a.agent, a.action, a.task_id, a.outcome, a.detail, a.branch
			FROM audit a LEFT JOIN clones c ON c.id = a.clone `+where, func(st *sqlite.Stmt) error {
			out = append(out, Entry{ID: st.ColumnInt64(0), Clone: st.ColumnInt64(1), Host: st.ColumnText(2), Root: st.ColumnText(3),
				Log: st.ColumnText(4), Local: st.ColumnInt64(5), At: unix(st.ColumnInt64(6)), Session: st.ColumnInt64(7),
				Actor: st.ColumnText(8), Agent: st.ColumnText(9), Action: st.ColumnText(10), TaskID: st.ColumnText(11),
				Outcome: st.ColumnText(12), Detail: st.ColumnText(13), Branch: st.ColumnText(14)})
			return nil
		}, args...)
	})
	return out, err
}

// AuditLog reads the log as [Embedded.AuditLog] does, without a member:
// snag log reads it so with no snagd running.
func (db *EmbeddedDB) AuditLog(ctx context.Context, after int64, limit int) ([]Entry, error) {
	return db.reader().AuditLog(ctx, after, limit)
}

// AuditTail reads the log as [Embedded.AuditTail] does, without a member.
func (db *EmbeddedDB) AuditTail(ctx context.Context, n int) ([]Entry, error) {
	return db.reader().AuditTail(ctx, n)
}

// reader is a member-less view of the file, for reads that need none.
func (db *EmbeddedDB) reader() *Embedded { return &Embedded{db: db, pool: db.pool, path: db.path} }

// AuditSent is the id of the last entry of the log named log that the
// store took (0: none).
func (s *Embedded) AuditSent(ctx context.Context, log string) (int64, error) {
	var n int64
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `SELECT coalesce(max(local), 0) FROM audit WHERE log = ? AND local > 0`,
			func(st *sqlite.Stmt) error { n = st.ColumnInt64(0); return nil }, log)
	})
	return n, err
}

// Clones lists the live members, with their live sessions and how many
// tasks each holds.
func (s *Embedded) Clones(ctx context.Context) ([]Clone, error) {
	var out []Clone
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		t := now()
		return exec(conn, `SELECT c.id, c.host, c.root, c.branch, c.version, c.started, c.seen, c.grace_ms,
				coalesce((SELECT group_concat(name, char(10)) FROM (SELECT name FROM sessions x WHERE x.clone = c.id AND x.ended IS NULL ORDER BY name)), ''),
				(SELECT count(*) FROM leases l WHERE l.clone = c.id AND l.state = 'held')
			FROM clones c WHERE c.ended IS NULL ORDER BY c.id`, func(st *sqlite.Stmt) error {
			c := Clone{ID: st.ColumnInt64(0), Host: st.ColumnText(1), Root: st.ColumnText(2), Branch: st.ColumnText(3), Version: st.ColumnText(4),
				Started: unix(st.ColumnInt64(5)), Seen: unix(st.ColumnInt64(6)), Grace: float64(st.ColumnInt64(7)) / 1000,
				Held: st.ColumnInt(9)}
			c.Silent = time.Duration(t - st.ColumnInt64(6)).Seconds()
			if names := st.ColumnText(8); names != "" {
				c.Sessions = strings.Split(names, "\n")
			}
			out = append(out, c)
			return nil
		})
	})
	return out, err
}

// Publish makes the ready rows of this member the tasks of ready, in one
// transaction, when they changed since the last publication.
func (s *Embedded) Publish(ctx context.Context, ready []Ready) error {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	now := make(map[string]Ready, len(ready))
	for _, r := range ready {
		now[r.TaskID] = r
	}
	if s.published != nil && len(now) == len(s.published) && !slices.ContainsFunc(ready, func(r Ready) bool { return s.published[r.TaskID] != r }) {
		return nil
	}
	// Only the difference from the last publication is written; the whole
	// set after a failure, or the first time.
	whole := s.published == nil
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		if whole {
			if err := exec(conn, `DELETE FROM ready WHERE clone = ?`, nil, s.Clone()); err != nil {
				return err
			}
		}
		for id := range s.published {
			if _, ok := now[id]; !ok {
				if err := exec(conn, `DELETE FROM ready WHERE clone = ? AND task_id = ?`, nil, s.Clone(), id); err != nil {
					return err
				}
			}
		}
		for _, r := range now {
			if old, ok := s.published[r.TaskID]; ok && old == r {
				continue
			}
			if err := exec(conn, `INSERT INTO ready (clone, task_id, key, wave, sev_rank, created) VALUES (?, ?, ?, ?, ?, ?)
				ON CONFLICT (clone, task_id) DO UPDATE SET key = excluded.key, wave = excluded.wave, sev_rank = excluded.sev_rank,
					created = excluded.created`, nil, s.Clone(), r.TaskID, r.Key, r.Wave, r.SevRank, r.Created); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.published = nil
		return err
	}
	s.published = now
	return nil
}

// GrantNext gives session ses the lease of the first task, in the queue's
// order, of this member's ready rows that no one holds or resolved,
// passing over the ids of skip (claims under way); ErrNoneReady when none.
func (s *Embedded) GrantNext(ctx context.Context, ses Session, skip []string) (Lease, error) {
	var l Lease
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		q := `SELECT r.task_id, r.key, coalesce(l.epoch, 0) FROM ready r LEFT JOIN leases l ON l.task_id = r.task_id
			WHERE r.clone = ? AND (l.state IS NULL OR l.state = 'free')`
		args := []any{s.Clone()}
		if len(skip) > 0 {
			q += ` AND r.task_id NOT IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(skip)), ", ") + `)`
			for _, id := range skip {
				args = append(args, id)
			}
		}
		q += ` ORDER BY r.wave, r.sev_rank, r.created, r.task_id LIMIT 1`
		var id, key string
		var epoch int64
		if err := exec(conn, q, func(st *sqlite.Stmt) error {
			id, key, epoch = st.ColumnText(0), st.ColumnText(1), st.ColumnInt64(2)
			return nil
		}, args...); err != nil {
			return err
		}
		if id == "" {
			return ErrNoneReady
		}
		if err := s.hold(conn, id, key, epoch+1, ses); err != nil {
			return err
		}
		var err error
		l, _, err = s.leaseOf(conn, id)
		return err
	})
	return l, err
}

// Listen calls f for the other members' events until ctx ends. The
// members of the embedded store are the views of one snagd, which hear
// each other in process: it has none to pass, and returns when ctx ends.
func (s *Embedded) Listen(ctx context.Context, f func(Event)) error {
	<-ctx.Done()
	return nil
}

// Post adds m, from this member, for the others to read. A body over
// 4,000 bytes is cut.
func (s *Embedded) Post(ctx context.Context, m Message) error {
	m.Body = cutBody(m.Body)
	if m.Branch == "" {
		m.Branch = s.Branch()
	}
	return s.write(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `INSERT INTO messages (clone, kind, from_name, to_name, key, type, title, body, branch, created)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, nil, s.Clone(), m.Kind, m.From, m.To, m.Key, m.Type, m.Title, m.Body, m.Branch, now())
	})
}

// Messages lists the other members' messages of kind, newest first, at
// most limit: to name alone when to is set, and not yet seen when unseen
// is.
func (s *Embedded) Messages(ctx context.Context, kind, to string, unseen bool, limit int) ([]Message, error) {
	var out []Message
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `SELECT m.id, m.clone, coalesce(c.host, ''), m.kind, m.from_name, m.to_name, m.key, m.type,
				m.title, m.body, m.branch, m.created, m.seen IS NOT NULL
			FROM messages m LEFT JOIN clones c ON c.id = m.clone
			WHERE m.kind = ? AND m.clone <> ? AND (?3 = '' OR m.to_name = ?3) AND (NOT ?4 OR m.seen IS NULL)
			ORDER BY m.id DESC LIMIT ?`, func(st *sqlite.Stmt) error {
			out = append(out, Message{ID: st.ColumnInt64(0), Clone: st.ColumnInt64(1), Host: st.ColumnText(2), Kind: st.ColumnText(3),
				From: st.ColumnText(4), To: st.ColumnText(5), Key: st.ColumnText(6), Type: st.ColumnText(7), Title: st.ColumnText(8),
				Body: st.ColumnText(9), Branch: st.ColumnText(10), Created: unix(st.ColumnInt64(11)), Seen: st.ColumnBool(12)})
			return nil
		}, kind, s.Clone(), to, unseen, limit)
	})
	return out, err
}

// MarkSeen marks messages ids seen.
func (s *Embedded) MarkSeen(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	return s.write(ctx, func(conn *sqlite.Conn) error {
		t := now()
		for _, id := range ids {
			if err := exec(conn, `UPDATE messages SET seen = ? WHERE id = ? AND seen IS NULL`, nil, t, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// Agents lists the live agents of the other members, each with its held
// leases and live file claims.
func (s *Embedded) Agents(ctx context.Context) ([]TeamAgent, error) {
	var agents []TeamAgent
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		err := exec(conn, `SELECT x.clone, c.host, c.branch, x.id, x.name, x.client
			FROM sessions x JOIN clones c ON c.id = x.clone
			WHERE x.clone <> ? AND x.ended IS NULL AND c.ended IS NULL ORDER BY x.name`, func(st *sqlite.Stmt) error {
			agents = append(agents, TeamAgent{Clone: st.ColumnInt64(0), Host: st.ColumnText(1), Branch: st.ColumnText(2),
				ID: st.ColumnInt64(3), Name: st.ColumnText(4), Client: st.ColumnText(5)})
			return nil
		}, s.Clone())
		if err != nil || len(agents) == 0 {
			return err
		}
		type who struct{ clone, id int64 }
		at := map[who]int{}
		for i, a := range agents {
			at[who{a.Clone, a.ID}] = i
		}
		leases, err := s.leasesWhere(conn, `l.state = 'held' AND l.clone <> ?`, s.Clone())
		if err != nil {
			return err
		}
		for _, l := range leases {
			if i, ok := at[who{l.Clone, l.Session}]; ok {
				agents[i].Leases = append(agents[i].Leases, l)
			}
		}
		claims, err := s.fileClaims(conn, "f.clone <> ?", s.Clone())
		if err != nil {
			return err
		}
		for _, c := range claims {
			if i, ok := at[who{c.Clone, c.Session}]; ok {
				agents[i].Files = append(agents[i].Files, c)
			}
		}
		return nil
	})
	return agents, err
}

// Activity reads, by branch, what the other members did since since: the
// notes they published, the tasks claimed and resolved, the latest report.
func (s *Embedded) Activity(ctx context.Context, since time.Time) (map[string]*BranchActivity, error) {
	act := newActivity()
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		err := exec(conn, `SELECT a.branch, a.action, a.at, a.agent, a.detail, coalesce(nullif(l.key, ''), a.task_id), coalesce(c.host, '')
			FROM audit a LEFT JOIN leases l ON l.task_id = a.task_id LEFT JOIN clones c ON c.id = a.clone
			WHERE a.clone <> ? AND a.branch <> '' AND a.at > ?
			AND a.action IN ('claim', 'resolve', 'report') AND a.outcome <> 'refused'
			AND (a.action <> 'resolve' OR l.state = 'done')
			ORDER BY a.at DESC LIMIT 5000`, func(st *sqlite.Stmt) error {
			act.event(st.ColumnText(0), st.ColumnText(1), unix(st.ColumnInt64(2)), st.ColumnText(3), st.ColumnText(4), st.ColumnText(5), st.ColumnText(6))
			return nil
		}, s.Clone(), since.UnixNano())
		if err != nil {
			return err
		}
		return exec(conn, `SELECT branch, key, created FROM messages
			WHERE clone <> ? AND kind = 'note' AND branch <> '' AND created > ? ORDER BY created DESC LIMIT 1000`, func(st *sqlite.Stmt) error {
			act.note(st.ColumnText(0), st.ColumnText(1), unix(st.ColumnInt64(2)))
			return nil
		}, s.Clone(), since.UnixNano())
	})
	return act.by, err
}
