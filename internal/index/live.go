package index

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// Errors of live state that callers branch on.
var (
	// ErrHeld: the task already has a live lease.
	ErrHeld = errors.New("task is held by another session")
	// ErrStale: a write presented an epoch that is no longer the task's
	// live lease (it was released, forced away, or re-granted).
	ErrStale = errors.New("stale lease: it was ended or re-granted since")
	// ErrNoLease: the task has no live lease.
	ErrNoLease = errors.New("task is not held")
	// ErrNoSession: the session is unknown or ended.
	ErrNoSession = errors.New("no such live session")
)

// Names are the short, memorable names handed to agents' sessions.
var Names = []string{"VESPER", "ORCA", "LYNX", "KESTREL", "OTTER", "HERON", "MOTH", "RAVEN",
	"FINCH", "IBIS", "MARTEN", "PIKE", "WREN", "SABLE", "EMBER", "QUILL", "TANSY", "CORVID",
	"MERLIN", "GANNET", "PLOVER", "STOAT", "TERN", "ZEPHYR"}

// Session is one connected agent (or other client) as the daemon knows it.
type Session struct {
	ID            int64  `json:"id"`
	Name          string `json:"name"`
	Client        string `json:"client,omitempty"`
	ClientVersion string `json:"client_version,omitempty"`
	PID           int    `json:"pid,omitempty"`
	PIDStart      int64  `json:"pid_start,omitempty"` // process start time, in clock ticks since boot
	BootID        string `json:"boot_id,omitempty"`
	Host          string `json:"host,omitempty"`
	Transport     string `json:"transport,omitempty"`
	// Root is the project root the agent works in: another worktree of the
	// daemon's repository, or "" for the daemon's own. Verify commands run
	// there.
	Root string `json:"root,omitempty"`
	// Branch is the git branch the session was last seen on, "" when
	// unknown (snagd reads it from the session's worktree).
	Branch    string    `json:"branch,omitempty"`
	Started   time.Time `json:"started"`
	LastSeen  time.Time `json:"last_seen"`
	Ended     time.Time `json:"ended,omitzero"`
	EndReason string    `json:"end_reason,omitempty"`
	// Asked is set when the session's agent asked for its name (at
	// registration or by Adopt), rather than being given one from Names:
	// only then is work left under that name its own.
	Asked bool `json:"-"`
	// Avoid, at Register, are names a new session must not be given
	// besides this DB's own: the live sessions of other clones sharing a
	// coordination store. It is not stored.
	Avoid []string `json:"-"`
	// Expires is when a session that no stream or process holds (an agent
	// known by its handle) ends unless a call names one of its handles
	// first; zero for a session a stream or a process holds.
	Expires time.Time `json:"expires,omitzero"`
}

// Lease is a task held by a session.
type Lease struct {
	TaskID    string    `json:"task_id"`
	SessionID int64     `json:"session_id"`
	Holder    string    `json:"holder"`
	Epoch     int64     `json:"epoch"`
	Acquired  time.Time `json:"acquired"`
	Detached  bool      `json:"detached,omitempty"` // re-derived from the files; no live session holds it
	// Worktree is the git worktree made for the lease (snag_claim with
	// worktree), where its agent works and its verify runs; "" for none.
	Worktree string `json:"worktree,omitempty"`
	// Base is the task file's bytes before the claim, and Wrote the
	// SHA-256 (hex) of the bytes the claim wrote; empty for a lease that
	// no claim of this snag made (re-derived from the files, handed over).
	Base  []byte `json:"-"`
	Wrote string `json:"-"`
}

// Register opens a session. A session that asks for a name (s.Name) gets
// it when no live session has it, and adopts that name's detached leases:
// an agent reconnecting after a rebuilt index gets its work back. Any other
// session gets the first name of Names that no live session has, no
// detached lease is held in, no task file names as its assignee, and no
// session ended within RecentlyEnded, so a newcomer never takes up another
// agent's name and work.
func (db *DB) Register(ctx context.Context, s Session) (Session, error) {
	now := time.Now()
	s.Started, s.LastSeen = now, now
	err := db.write(ctx, func(conn *sqlite.Conn) error {
		taken := map[string]bool{}
		err := sqlitex.Execute(conn, `SELECT name FROM sessions WHERE ended IS NULL`, &sqlitex.ExecOptions{
			ResultFunc: func(st *sqlite.Stmt) error { taken[st.ColumnText(0)] = true; return nil },
		})
		if err != nil {
			return err
		}
		for _, n := range s.Avoid {
			taken[n] = true
		}
		asked := s.Name != "" && !taken[s.Name]
		if !asked {
			// Names in use by work: detached leases and the files' assignees
			// (of any status: a resolved task's assignee is its author).
			// and the names of sessions that ended lately, whose agents may
			// come back to ask for them.
			err := sqlitex.Execute(conn, `SELECT holder FROM leases WHERE ended IS NULL
				UNION SELECT upper(assignee) FROM tasks WHERE assignee != ''
				UNION SELECT name FROM sessions WHERE ended > :since`, &sqlitex.ExecOptions{
				Named:      map[string]any{":since": now.Add(-RecentlyEnded).UnixNano()},
				ResultFunc: func(st *sqlite.Stmt) error { taken[st.ColumnText(0)] = true; return nil },
			})
			if err != nil {
				return err
			}
			s.Name = ""
			for _, n := range Names {
				if !taken[n] {
					s.Name = n
					break
				}
			}
			for i := 2; s.Name == ""; i++ {
				for _, n := range Names {
					if c := n + "-" + strconv.Itoa(i); !taken[c] {
						s.Name = c
						break
					}
				}
			}
		}
		err = sqlitex.Execute(conn, `INSERT INTO sessions (name, client, client_version, pid, pid_start, boot_id,
			host, transport, root, started, last_seen, asked, branch, expires) VALUES (:name, :client, :cv, :pid, :ps, :boot, :host, :tr, :root,
			:now, :now, :asked, :branch, :expires)`,
			&sqlitex.ExecOptions{Named: map[string]any{":name": s.Name, ":client": s.Client, ":cv": s.ClientVersion,
				":pid": int64(s.PID), ":ps": s.PIDStart, ":boot": s.BootID, ":host": s.Host, ":tr": s.Transport,
				":root": s.Root, ":now": now.UnixNano(), ":asked": boolInt(asked), ":branch": s.Branch, ":expires": nanos(s.Expires)}})
		if err != nil {
			return err
		}
		s.ID, s.Asked = conn.LastInsertRowID(), asked
		if !asked {
			return nil
		}
		return sqlitex.Execute(conn, `UPDATE leases SET session_id = :id, detached = 0
			WHERE ended IS NULL AND detached = 1 AND holder = :name`,
			&sqlitex.ExecOptions{Named: map[string]any{":id": s.ID, ":name": s.Name}})
	})
	if err != nil {
		return Session{}, fmt.Errorf("register session: %w", err)
	}
	return s, nil
}

const sessionColumns = `id, name, client, client_version, pid, pid_start, boot_id, host, transport,
	started, last_seen, coalesce(ended, 0), end_reason, root, branch, asked, expires`

func scanSession(st *sqlite.Stmt) Session {
	s := Session{ID: st.ColumnInt64(0), Name: st.ColumnText(1), Client: st.ColumnText(2),
		ClientVersion: st.ColumnText(3), PID: st.ColumnInt(4), PIDStart: st.ColumnInt64(5),
		BootID: st.ColumnText(6), Host: st.ColumnText(7), Transport: st.ColumnText(8),
		Started: time.Unix(0, st.ColumnInt64(9)), LastSeen: time.Unix(0, st.ColumnInt64(10)),
		EndReason: st.ColumnText(12), Root: st.ColumnText(13), Branch: st.ColumnText(14), Asked: st.ColumnInt64(15) != 0}
	if e := st.ColumnInt64(11); e != 0 {
		s.Ended = time.Unix(0, e)
	}
	if e := st.ColumnInt64(16); e != 0 {
		s.Expires = time.Unix(0, e)
	}
	return s
}

// SessionByID returns a session, live or ended.
func (db *DB) SessionByID(ctx context.Context, id int64) (Session, error) {
	var s Session
	found := false
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT `+sessionColumns+` FROM sessions WHERE id = :id`, &sqlitex.ExecOptions{
			Named:      map[string]any{":id": id},
			ResultFunc: func(st *sqlite.Stmt) error { s, found = scanSession(st), true; return nil },
		})
	})
	if err == nil && !found {
		err = fmt.Errorf("session %d: %w", id, ErrNoSession)
	}
	return s, err
}

// LiveSessions lists the sessions that have not ended.
func (db *DB) LiveSessions(ctx context.Context) ([]Session, error) {
	var out []Session
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT `+sessionColumns+` FROM sessions WHERE ended IS NULL ORDER BY id`,
			&sqlitex.ExecOptions{ResultFunc: func(st *sqlite.Stmt) error { out = append(out, scanSession(st)); return nil }})
	})
	return out, err
}

// Touch records that a session was seen now.
func (db *DB) Touch(ctx context.Context, id int64) error {
	return db.write(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `UPDATE sessions SET last_seen = :now WHERE id = :id AND ended IS NULL`,
			&sqlitex.ExecOptions{Named: map[string]any{":now": time.Now().UnixNano(), ":id": id}})
	})
}

// EndSession ends a session and returns the leases it held, still live:
// the caller releases each (a file rewrite) and then ends them with
// [DB.EndLease].
func (db *DB) EndSession(ctx context.Context, id int64, reason string) ([]Lease, error) {
	var held []Lease
	err := db.write(ctx, func(conn *sqlite.Conn) error {
		err := sqlitex.Execute(conn, `UPDATE sessions SET ended = :now, end_reason = :why WHERE id = :id AND ended IS NULL`,
			&sqlitex.ExecOptions{Named: map[string]any{":now": time.Now().UnixNano(), ":why": reason, ":id": id}})
		if err != nil {
			return err
		}
		held, err = leasesWhere(conn, `session_id = :id`, map[string]any{":id": id})
		if err != nil {
			return err
		}
		err = sqlitex.Execute(conn, `UPDATE file_claims SET released = :now WHERE session_id = :id AND released IS NULL`,
			&sqlitex.ExecOptions{Named: map[string]any{":now": time.Now().UnixNano(), ":id": id}})
		if err != nil {
			return err
		}
		err = sqlitex.Execute(conn, `DELETE FROM branch_leases WHERE session_id = :id`,
			&sqlitex.ExecOptions{Named: map[string]any{":id": id}})
		if err != nil {
			return err
		}
		// A handle of an ended session says so when it is named (rather
		// than being unknown) for as long as its name is kept.
		return sqlitex.Execute(conn, `DELETE FROM handles WHERE session_id IN (SELECT id FROM sessions WHERE ended < :old)`,
			&sqlitex.ExecOptions{Named: map[string]any{":old": time.Now().Add(-RecentlyEnded).UnixNano()}})
	})
	return held, err
}

const leaseColumns = `task_id, coalesce(session_id, 0), holder, epoch, acquired, detached, worktree, base, wrote`

func scanLease(st *sqlite.Stmt) Lease {
	l := Lease{TaskID: st.ColumnText(0), SessionID: st.ColumnInt64(1), Holder: st.ColumnText(2),
		Epoch: st.ColumnInt64(3), Acquired: time.Unix(0, st.ColumnInt64(4)), Detached: st.ColumnBool(5),
		Worktree: st.ColumnText(6), Wrote: st.ColumnText(8)}
	if n := st.ColumnLen(7); n > 0 {
		l.Base = make([]byte, n)
		st.ColumnBytes(7, l.Base)
	}
	return l
}

// HeldTasks lists the live leases with their task, holder, epoch and
// Wrote (set when a claim recorded the file's bytes before it, see
// [Tx.SetBase]), without those bytes: what other readers of the leases
// need, cheaply.
func (db *DB) HeldTasks(ctx context.Context) ([]Lease, error) {
	var out []Lease
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT task_id, holder, epoch, wrote FROM leases WHERE ended IS NULL`,
			&sqlitex.ExecOptions{ResultFunc: func(st *sqlite.Stmt) error {
				out = append(out, Lease{TaskID: st.ColumnText(0), Holder: st.ColumnText(1), Epoch: st.ColumnInt64(2), Wrote: st.ColumnText(3)})
				return nil
			}})
	})
	return out, err
}

// SetBase records, on task id's live lease of epoch, the file's bytes
// before its claim (base) and the SHA-256 of the bytes the claim wrote
// (schema 011): git putting base back does not end the lease, and a
// release of the claim's bytes writes base back.
func (tx *Tx) SetBase(taskID string, epoch int64, base []byte, wrote string) error {
	return sqlitex.Execute(tx.conn, `UPDATE leases SET base = :b, wrote = :w
		WHERE task_id = :t AND epoch = :e AND ended IS NULL`, &sqlitex.ExecOptions{
		Named: map[string]any{":t": taskID, ":e": epoch, ":b": base, ":w": wrote}})
}

func leasesWhere(conn *sqlite.Conn, where string, args map[string]any) ([]Lease, error) {
	var out []Lease
	err := sqlitex.Execute(conn, `SELECT `+leaseColumns+` FROM leases WHERE ended IS NULL AND `+where+` ORDER BY id`,
		&sqlitex.ExecOptions{Named: args, ResultFunc: func(st *sqlite.Stmt) error { out = append(out, scanLease(st)); return nil }})
	return out, err
}

// EndedLeases lists the leases that ended since since, oldest first: what
// a clone sharing its live state checks at its start, in case the store
// never heard of an end (snagd stopped between its commit and telling
// the store).
func (db *DB) EndedLeases(ctx context.Context, since time.Time) ([]Lease, error) {
	var out []Lease
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT `+leaseColumns+` FROM leases WHERE ended IS NOT NULL AND ended > :since ORDER BY ended`,
			&sqlitex.ExecOptions{Named: map[string]any{":since": since.UnixNano()},
				ResultFunc: func(st *sqlite.Stmt) error { out = append(out, scanLease(st)); return nil }})
	})
	return out, err
}

// LeaseOf returns a task's live lease, or ErrNoLease.
func (db *DB) LeaseOf(ctx context.Context, taskID string) (l Lease, err error) {
	err = db.withConn(ctx, func(conn *sqlite.Conn) (err error) {
		l, err = leaseOf(conn, taskID)
		return err
	})
	return l, err
}

// LeaseOf is [DB.LeaseOf] inside the transaction.
func (tx *Tx) LeaseOf(taskID string) (Lease, error) { return leaseOf(tx.conn, taskID) }

func leaseOf(conn *sqlite.Conn, taskID string) (Lease, error) {
	ls, err := leasesWhere(conn, `task_id = :t`, map[string]any{":t": taskID})
	if err != nil {
		return Lease{}, err
	}
	if len(ls) == 0 {
		return Lease{}, ErrNoLease
	}
	return ls[0], nil
}

// LeasesOf lists the live leases a session holds, oldest first.
func (db *DB) LeasesOf(ctx context.Context, sessionID int64) ([]Lease, error) {
	var ls []Lease
	err := db.withConn(ctx, func(conn *sqlite.Conn) (err error) {
		ls, err = leasesWhere(conn, `session_id = :s`, map[string]any{":s": sessionID})
		return err
	})
	return ls, err
}

// LeasesOf is [DB.LeasesOf] inside the transaction.
func (tx *Tx) LeasesOf(sessionID int64) ([]Lease, error) {
	return leasesWhere(tx.conn, `session_id = :s`, map[string]any{":s": sessionID})
}

// Leases lists every live lease.
func (db *DB) Leases(ctx context.Context) ([]Lease, error) {
	var ls []Lease
	err := db.withConn(ctx, func(conn *sqlite.Conn) (err error) {
		ls, err = leasesWhere(conn, `1`, nil)
		return err
	})
	return ls, err
}

// NextReady returns the id of the task claim-next hands out: the first
// ready one in queue order, as [DB.Next] finds it, or "" when none is ready
// (ask Next why). It walks the status index alone, testing dependencies by
// row number, and reads a task row only to check that a candidate is clean:
// the state and duplicate columns sit after the body in the row, so a test
// of them on every open task would read each one's overflow pages.
func (db *DB) NextReady(ctx context.Context) (string, error) {
	var id string
	err := db.withConn(ctx, func(conn *sqlite.Conn) (err error) {
		defer sqlitex.Transaction(conn)(&err) // candidates and checks from one snapshot
		id, _, err = nextReady(conn, Mark{}, nil)
		return err
	})
	return id, err
}

// NextReady is [DB.NextReady] inside the transaction, passing over the
// tasks skip says are taken (claims of them are under way).
func (tx *Tx) NextReady(skip func(id string) bool) (string, error) {
	id, _, err := nextReady(tx.conn, Mark{}, skip)
	return id, err
}

// Mark is a place in claim-next's order (wave, severity, creation, id):
// every open task before it was found not ready (blocked, or not clean).
// The zero Mark is the start of the queue.
type Mark struct {
	set     bool
	wave    int64
	sevRank int64
	created int64
	id      string
}

// NextReadyFrom is [Tx.NextReady] starting its walk at from, a Mark an
// earlier walk returned, instead of at the start of the queue: the open
// tasks before it, blocked ones most of all, are not looked at again. It
// returns the Mark of this walk: the first task it handed out or passed
// over for skip (the zero Mark when it found none). from is only right
// while nothing that could make a task before it ready has been written
// since (see [DB.Writes]): a resolve, a release, an edit, a rescan.
func (tx *Tx) NextReadyFrom(from Mark, skip func(id string) bool) (string, Mark, error) {
	return nextReady(tx.conn, from, skip)
}

// Writes is how many write transactions this DB has committed. Read
// inside a [DB.Read] or [DB.Update] (which hold the writer's turn) it is
// exact: no write of this DB commits meanwhile. With [Tx.DataVersion] it
// tells whether anything was written between two reads of it.
func (db *DB) Writes() uint64 { return db.writes.Load() }

func nextReady(conn *sqlite.Conn, from Mark, skip func(id string) bool) (string, Mark, error) {
	var id string
	var mark Mark
	where, args := ``, map[string]any{}
	if from.set {
		where = ` AND (wave, sev_rank, created, id) >= (:w, :s, :c, :i)`
		args = map[string]any{":w": from.wave, ":s": from.sevRank, ":c": from.created, ":i": from.id}
	}
	err := func() error {
		err := sqlitex.Execute(conn, `SELECT n, id, wave, sev_rank, created FROM tasks WHERE status = 'open'`+where+` AND NOT EXISTS (
				SELECT 1 FROM deps d WHERE d.task_n = tasks.n AND NOT `+depResolved+`)
			ORDER BY wave, sev_rank, created, id`, &sqlitex.ExecOptions{
			Named: args,
			ResultFunc: func(s *sqlite.Stmt) error {
				n, cand := s.ColumnInt64(0), s.ColumnText(1)
				here := Mark{set: true, wave: s.ColumnInt64(2), sevRank: s.ColumnInt64(3), created: s.ColumnInt64(4), id: cand}
				if skip != nil && skip(cand) {
					if !mark.set {
						mark = here
					}
					return nil
				}
				clean := false
				err := sqlitex.Execute(conn, `SELECT 1 FROM tasks WHERE n = :n AND state = 'ok' AND dup = 0`, &sqlitex.ExecOptions{
					Named:      map[string]any{":n": n},
					ResultFunc: func(*sqlite.Stmt) error { clean = true; return nil },
				})
				if err != nil || !clean {
					return err
				}
				id = cand
				if !mark.set {
					mark = here
				}
				return errFound
			},
		})
		if errors.Is(err, errFound) {
			err = nil
		}
		return err
	}()
	if err != nil {
		return "", Mark{}, fmt.Errorf("next: %w", err)
	}
	if id == "" {
		mark = Mark{} // nothing ready: the next walk starts at the start
	}
	return id, mark, nil
}

// Grant gives a task a new live lease for a session and returns it, with
// its epoch one more than any the task had. It fails with ErrHeld when the
// task is held.
func (tx *Tx) Grant(taskID string, sessionID int64, holder string, detached bool) (Lease, error) {
	held, err := leasesWhere(tx.conn, `task_id = :t`, map[string]any{":t": taskID})
	if err != nil {
		return Lease{}, err
	}
	if len(held) > 0 {
		return held[0], fmt.Errorf("%w: %s holds it", ErrHeld, held[0].Holder)
	}
	// The epoch is read after the upsert, not with RETURNING: SQLite keeps
	// what a RETURNING returns in a temporary b-tree, whose page cache
	// modernc's allocator unmaps when the statement ends.
	var epoch int64
	err = sqlitex.Execute(tx.conn, `INSERT INTO epochs (task_id, epoch) VALUES (:t, 1)
		ON CONFLICT (task_id) DO UPDATE SET epoch = epoch + 1`, &sqlitex.ExecOptions{Named: map[string]any{":t": taskID}})
	if err == nil {
		err = sqlitex.Execute(tx.conn, `SELECT epoch FROM epochs WHERE task_id = :t`, &sqlitex.ExecOptions{
			Named:      map[string]any{":t": taskID},
			ResultFunc: func(st *sqlite.Stmt) error { epoch = st.ColumnInt64(0); return nil },
		})
	}
	if err != nil {
		return Lease{}, err
	}
	l := Lease{TaskID: taskID, SessionID: sessionID, Holder: holder, Epoch: epoch, Acquired: time.Now(), Detached: detached}
	var sid any
	if sessionID != 0 {
		sid = sessionID
	}
	err = sqlitex.Execute(tx.conn, `INSERT INTO leases (task_id, session_id, holder, epoch, acquired, detached)
		VALUES (:t, :s, :h, :e, :a, :d)`, &sqlitex.ExecOptions{Named: map[string]any{
		":t": taskID, ":s": sid, ":h": holder, ":e": epoch, ":a": l.Acquired.UnixNano(), ":d": boolInt(detached)}})
	return l, err
}

// HeldBefore reports whether session sessionID has held task taskID, its
// lease live or ended: a session the task's file names as assignee may
// take its lease back only then (a person saved bytes older than its
// release), not for having the same name as an agent of another branch.
func (db *DB) HeldBefore(ctx context.Context, taskID string, sessionID int64) (bool, error) {
	held := false
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT 1 FROM leases WHERE task_id = :t AND session_id = :s LIMIT 1`, &sqlitex.ExecOptions{
			Named:      map[string]any{":t": taskID, ":s": sessionID},
			ResultFunc: func(*sqlite.Stmt) error { held = true; return nil },
		})
	})
	if err != nil {
		return false, fmt.Errorf("leases of task %s: %w", taskID, err)
	}
	return held, nil
}

// Attach gives the detached live lease of taskID to session sessionID at
// epoch, the epoch the live state granted it: a claim whose file snagd had
// rewritten when it stopped, before its own row was written. It reports
// whether there was such a lease.
func (tx *Tx) Attach(taskID string, sessionID, epoch int64) (bool, error) {
	err := sqlitex.Execute(tx.conn, `UPDATE leases SET session_id = :s, detached = 0, epoch = :e
		WHERE task_id = :t AND ended IS NULL AND detached = 1`, &sqlitex.ExecOptions{
		Named: map[string]any{":t": taskID, ":s": sessionID, ":e": epoch}})
	if err != nil || tx.conn.Changes() == 0 {
		return false, err
	}
	err = sqlitex.Execute(tx.conn, `INSERT INTO epochs (task_id, epoch) VALUES (:t, :e)
		ON CONFLICT (task_id) DO UPDATE SET epoch = max(epoch, :e)`, &sqlitex.ExecOptions{Named: map[string]any{":t": taskID, ":e": epoch}})
	return err == nil, err
}

// GrantEpoch gives a task a new live lease for a session under the epoch
// that a store shared with other clones granted it: the task's own epoch
// count is brought up to it, so a later local grant goes on from there.
// It fails with ErrHeld when the task is held.
func (tx *Tx) GrantEpoch(taskID string, sessionID int64, holder string, epoch int64) (Lease, error) {
	held, err := leasesWhere(tx.conn, `task_id = :t`, map[string]any{":t": taskID})
	if err != nil {
		return Lease{}, err
	}
	if len(held) > 0 {
		return held[0], fmt.Errorf("%w: %s holds it", ErrHeld, held[0].Holder)
	}
	err = sqlitex.Execute(tx.conn, `INSERT INTO epochs (task_id, epoch) VALUES (:t, :e)
		ON CONFLICT (task_id) DO UPDATE SET epoch = max(epoch, :e)`, &sqlitex.ExecOptions{Named: map[string]any{":t": taskID, ":e": epoch}})
	if err != nil {
		return Lease{}, err
	}
	l := Lease{TaskID: taskID, SessionID: sessionID, Holder: holder, Epoch: epoch, Acquired: time.Now()}
	err = sqlitex.Execute(tx.conn, `INSERT INTO leases (task_id, session_id, holder, epoch, acquired, detached)
		VALUES (:t, :s, :h, :e, :a, 0)`, &sqlitex.ExecOptions{Named: map[string]any{
		":t": taskID, ":s": sessionID, ":h": holder, ":e": epoch, ":a": l.Acquired.UnixNano()}})
	return l, err
}

// Check returns the task's live lease when epoch is its epoch (0 accepts
// any live lease), ErrStale when another epoch is live or none.
func (tx *Tx) Check(taskID string, epoch int64) (Lease, error) {
	held, err := leasesWhere(tx.conn, `task_id = :t`, map[string]any{":t": taskID})
	if err != nil {
		return Lease{}, err
	}
	if len(held) == 0 {
		if epoch != 0 {
			return Lease{}, fmt.Errorf("%w (epoch %d)", ErrStale, epoch)
		}
		return Lease{}, ErrNoLease
	}
	if epoch != 0 && held[0].Epoch != epoch {
		return held[0], fmt.Errorf("%w: epoch %d is live, not %d", ErrStale, held[0].Epoch, epoch)
	}
	return held[0], nil
}

// End ends a task's live lease, if it has one, with a reason; it bumps the
// task's epoch so a late write with the old one is refused.
func (tx *Tx) End(taskID, reason string) (Lease, bool, error) {
	held, err := leasesWhere(tx.conn, `task_id = :t`, map[string]any{":t": taskID})
	if err != nil || len(held) == 0 {
		return Lease{}, false, err
	}
	err = sqlitex.Execute(tx.conn, `UPDATE leases SET ended = :now, end_reason = :why WHERE task_id = :t AND ended IS NULL`,
		&sqlitex.ExecOptions{Named: map[string]any{":now": time.Now().UnixNano(), ":why": reason, ":t": taskID}})
	if err == nil {
		err = sqlitex.Execute(tx.conn, `UPDATE epochs SET epoch = epoch + 1 WHERE task_id = :t`,
			&sqlitex.ExecOptions{Named: map[string]any{":t": taskID}})
	}
	if err == nil && tx.db != nil && tx.db.onEnded != nil {
		tx.db.ended = append(tx.db.ended, Ended{Lease: held[0], Reason: reason})
	}
	return held[0], err == nil, err
}

// ReadyRow is a task that is ready to claim, with the keys of the queue's
// order: what a clone publishes to a store shared with other clones.
type ReadyRow struct {
	ID      string
	Key     string
	Wave    int64
	SevRank int64
	Created int64
}

// readyRowsQuery is ReadyRows' query.
const readyRowsQuery = `SELECT id, key, wave, sev_rank, created FROM tasks INDEXED BY tasks_ready
	WHERE status = 'open' AND state = 'ok' AND dup = 0 AND NOT EXISTS (
		SELECT 1 FROM deps d WHERE d.task_n = tasks.n AND NOT ` + depResolved + `)
	ORDER BY wave, sev_rank, created, id`

// ReadyRows lists every task claim-next could hand out, in its order: open,
// clean, not a duplicate, and with every dependency resolved. It walks
// tasks_ready, which holds every column it reads, in order (the planner,
// without statistics, would walk tasks_status and seek each row: twice
// the CPU on 5,000 ready tasks of 10,000: 9-12 ms against 5 ms).
func (db *DB) ReadyRows(ctx context.Context) ([]ReadyRow, error) {
	var out []ReadyRow
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, readyRowsQuery, &sqlitex.ExecOptions{
			ResultFunc: func(s *sqlite.Stmt) error {
				out = append(out, ReadyRow{ID: s.ColumnText(0), Key: s.ColumnText(1), Wave: s.ColumnInt64(2),
					SevRank: s.ColumnInt64(3), Created: s.ColumnInt64(4)})
				return nil
			},
		})
	})
	if err != nil {
		return nil, fmt.Errorf("ready tasks: %w", err)
	}
	return out, nil
}
