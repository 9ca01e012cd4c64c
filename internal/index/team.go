package index

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/snagdev/snag/internal/repopath"
)

// FileClaim is a session's claim of a repository path or glob: exclusive
// claims keep every other session's claims off the paths they cover,
// shared ones only exclusive claims. It is live until it is released or
// its expiry passes.
type FileClaim struct {
	ID        int64     `json:"id"`
	Path      string    `json:"path"` // canonical (repopath.Clean): a path, a folder or a glob
	SessionID int64     `json:"session_id"`
	Holder    string    `json:"holder"`
	TaskID    string    `json:"task_id,omitempty"`
	Exclusive bool      `json:"exclusive"`
	Acquired  time.Time `json:"acquired"`
	Expires   time.Time `json:"expires"`
}

// FileClaimRequest is one claim of several paths, all or nothing.
type FileClaimRequest struct {
	SessionID int64
	Holder    string
	Paths     []string // canonical
	TaskID    string
	TTL       time.Duration
	Exclusive bool
}

// FileClaimResult is what a claim did: the claims it made or renewed; or,
// when it made none, the other sessions' live claims in its way, or the
// session's own claims that expired before this renewal came (ended now,
// so that a claim after this one is a fresh one).
type FileClaimResult struct {
	Claimed   []FileClaim
	Renewed   int // how many of Claimed were renewals
	Conflicts []FileClaim
	Late      []FileClaim
}

const fileClaimColumns = `id, path, session_id, holder, coalesce(task_id, ''), exclusive, acquired, expires`

func scanFileClaim(st *sqlite.Stmt) FileClaim {
	return FileClaim{ID: st.ColumnInt64(0), Path: st.ColumnText(1), SessionID: st.ColumnInt64(2),
		Holder: st.ColumnText(3), TaskID: st.ColumnText(4), Exclusive: st.ColumnInt64(5) != 0,
		Acquired: time.Unix(0, st.ColumnInt64(6)), Expires: time.Unix(0, st.ColumnInt64(7))}
}

func fileClaimsWhere(conn *sqlite.Conn, where string, args map[string]any) ([]FileClaim, error) {
	var out []FileClaim
	err := sqlitex.Execute(conn, `SELECT `+fileClaimColumns+` FROM file_claims WHERE released IS NULL AND `+where+
		` ORDER BY holder, path, id`, &sqlitex.ExecOptions{Named: args,
		ResultFunc: func(st *sqlite.Stmt) error { out = append(out, scanFileClaim(st)); return nil }})
	return out, err
}

// ClaimFiles claims every path of r for its session in one transaction,
// or none: when a path overlaps another session's live claim and either
// of the two is exclusive, nothing is claimed and the claims in the way
// are returned. A path the session already holds is renewed (its expiry,
// task and mode set anew); one whose claim expired before the renewal
// came is late: nothing is claimed, and that claim ends now.
func (db *DB) ClaimFiles(ctx context.Context, r FileClaimRequest, now time.Time) (FileClaimResult, error) {
	var res FileClaimResult
	err := db.write(ctx, func(conn *sqlite.Conn) (err error) {
		res, err = claimFiles(conn, r, now)
		return err
	})
	if err != nil {
		return FileClaimResult{}, fmt.Errorf("claim files: %w", err)
	}
	return res, nil
}

// claimFiles is ClaimFiles in its transaction on conn.
func claimFiles(conn *sqlite.Conn, r FileClaimRequest, now time.Time) (FileClaimResult, error) {
	var res FileClaimResult
	all, err := fileClaimsWhere(conn, `1`, nil)
	if err != nil {
		return res, err
	}
	own, late, conflicts := weighFileClaims(all, r, now)
	if len(late) > 0 {
		for _, c := range late {
			if err := endFileClaim(conn, c.ID, now, "expired"); err != nil {
				return res, err
			}
		}
		return FileClaimResult{Late: late}, nil
	}
	if len(conflicts) > 0 {
		return FileClaimResult{Conflicts: conflicts}, nil
	}
	expires := now.Add(r.TTL)
	for _, p := range r.Paths {
		c, renewed, err := putFileClaim(conn, r, p, own, now, expires)
		if err != nil {
			return res, err
		}
		if renewed {
			res.Renewed++
		}
		res.Claimed = append(res.Claimed, c)
	}
	return res, nil
}

// weighFileClaims weighs the live claims all against r: the session's
// own claims by path; those of its own that r renews but that expired by
// now (late); and the claims of other sessions, live at now, that overlap
// a path of r where either is exclusive (conflicts).
func weighFileClaims(all []FileClaim, r FileClaimRequest, now time.Time) (own map[string]FileClaim, late, conflicts []FileClaim) {
	own = map[string]FileClaim{}
	for _, c := range all {
		if c.SessionID == r.SessionID {
			own[c.Path] = c
			if slices.Contains(r.Paths, c.Path) && !c.Expires.After(now) {
				late = append(late, c)
			}
			continue
		}
		if !c.Expires.After(now) || !(r.Exclusive || c.Exclusive) {
			continue
		}
		if slices.ContainsFunc(r.Paths, func(p string) bool { return repopath.Overlap(c.Path, p) }) {
			conflicts = append(conflicts, c)
		}
	}
	return own, late, conflicts
}

// putFileClaim claims path p for r's session until expires: it renews
// the session's own claim of p (in own), or makes a new one. It returns
// the claim and whether it was renewed.
func putFileClaim(conn *sqlite.Conn, r FileClaimRequest, p string, own map[string]FileClaim, now, expires time.Time) (FileClaim, bool, error) {
	var task any
	if r.TaskID != "" {
		task = r.TaskID
	}
	c, renew := own[p]
	var err error
	if renew {
		err = sqlitex.Execute(conn, `UPDATE file_claims SET expires = :exp, exclusive = :x, task_id = :task
			WHERE id = :id`, &sqlitex.ExecOptions{Named: map[string]any{":exp": expires.UnixNano(),
			":x": boolInt(r.Exclusive), ":task": task, ":id": c.ID}})
	} else {
		c = FileClaim{Path: p, SessionID: r.SessionID, Holder: r.Holder, Acquired: now}
		err = sqlitex.Execute(conn, `INSERT INTO file_claims (path, session_id, holder, task_id, exclusive, acquired, expires)
			VALUES (:p, :s, :h, :task, :x, :now, :exp)`, &sqlitex.ExecOptions{Named: map[string]any{
			":p": p, ":s": r.SessionID, ":h": r.Holder, ":task": task, ":x": boolInt(r.Exclusive),
			":now": now.UnixNano(), ":exp": expires.UnixNano()}})
		c.ID = conn.LastInsertRowID()
	}
	if err != nil {
		return FileClaim{}, false, err
	}
	c.TaskID, c.Exclusive, c.Expires = r.TaskID, r.Exclusive, expires
	return c, renew, nil
}

func endFileClaim(conn *sqlite.Conn, id int64, now time.Time, why string) error {
	return sqlitex.Execute(conn, `UPDATE file_claims SET released = :now, end_reason = :why WHERE id = :id`,
		&sqlitex.ExecOptions{Named: map[string]any{":now": now.UnixNano(), ":why": why, ":id": id}})
}

// ReleaseFiles ends the session's claims of paths (every claim it holds,
// expired ones included, when paths is empty) and returns them.
func (db *DB) ReleaseFiles(ctx context.Context, sessionID int64, paths []string, why string) ([]FileClaim, error) {
	var out []FileClaim
	err := db.write(ctx, func(conn *sqlite.Conn) error {
		out = nil
		held, err := fileClaimsWhere(conn, `session_id = :s`, map[string]any{":s": sessionID})
		if err != nil {
			return err
		}
		now := time.Now()
		for _, c := range held {
			if len(paths) > 0 && !slices.Contains(paths, c.Path) {
				continue
			}
			if err := endFileClaim(conn, c.ID, now, why); err != nil {
				return err
			}
			out = append(out, c)
		}
		return nil
	})
	return out, err
}

// ForceReleaseFile ends every live claim of path, whoever holds it (a
// person freeing it), and returns them.
func (db *DB) ForceReleaseFile(ctx context.Context, path, why string) ([]FileClaim, error) {
	var out []FileClaim
	err := db.write(ctx, func(conn *sqlite.Conn) error {
		held, err := fileClaimsWhere(conn, `path = :p`, map[string]any{":p": path})
		if err != nil {
			return err
		}
		now := time.Now()
		for _, c := range held {
			if err := endFileClaim(conn, c.ID, now, why); err != nil {
				return err
			}
		}
		out = held
		return nil
	})
	return out, err
}

// FileClaims lists the live claims (not released, not expired at now) in
// holder and path order.
func (db *DB) FileClaims(ctx context.Context, now time.Time) ([]FileClaim, error) {
	var out []FileClaim
	err := db.withConn(ctx, func(conn *sqlite.Conn) (err error) {
		out, err = fileClaimsWhere(conn, `expires > :now`, map[string]any{":now": now.UnixNano()})
		return err
	})
	return out, err
}

// FileClaimsOf lists a session's claims that are not released, expired
// ones included (its own view: an expired claim is one to claim afresh).
func (db *DB) FileClaimsOf(ctx context.Context, sessionID int64) ([]FileClaim, error) {
	var out []FileClaim
	err := db.withConn(ctx, func(conn *sqlite.Conn) (err error) {
		out, err = fileClaimsWhere(conn, `session_id = :s`, map[string]any{":s": sessionID})
		return err
	})
	return out, err
}

// Message kinds.
const (
	MessageHandoff = "handoff"
	MessageReport  = "report"
)

// Message is a handoff addressed to an agent by name, or a report of
// progress for everyone.
type Message struct {
	ID          int64     `json:"id"`
	Created     time.Time `json:"created"`
	Kind        string    `json:"kind"`
	From        string    `json:"from"`
	FromSession int64     `json:"from_session,omitempty"`
	To          string    `json:"to,omitempty"`
	TaskID      string    `json:"task_id,omitempty"`
	Title       string    `json:"title,omitempty"`
	Body        string    `json:"body,omitempty"`
	Detail      string    `json:"detail,omitempty"`
	Seen        time.Time `json:"seen,omitzero"`
}

const messageColumns = `id, created, kind, from_name, coalesce(from_session, 0), to_name, coalesce(task_id, ''),
	title, body, detail, coalesce(read, 0)`

func scanMessage(st *sqlite.Stmt) Message {
	m := Message{ID: st.ColumnInt64(0), Created: time.Unix(0, st.ColumnInt64(1)), Kind: st.ColumnText(2),
		From: st.ColumnText(3), FromSession: st.ColumnInt64(4), To: st.ColumnText(5), TaskID: st.ColumnText(6),
		Title: st.ColumnText(7), Body: st.ColumnText(8), Detail: st.ColumnText(9)}
	if r := st.ColumnInt64(10); r != 0 {
		m.Seen = time.Unix(0, r)
	}
	return m
}

// AddMessage records a message and returns it with its id and time.
func (db *DB) AddMessage(ctx context.Context, m Message) (Message, error) {
	err := db.write(ctx, func(conn *sqlite.Conn) (err error) {
		m, err = addMessage(conn, m)
		if err == nil && db.onMessage != nil {
			db.messages = append(db.messages, m)
		}
		return err
	})
	return m, err
}

// AddMessage records a message inside tx (a handoff that moves a lease).
func (tx *Tx) AddMessage(m Message) (Message, error) {
	m, err := addMessage(tx.conn, m)
	if err == nil && tx.db != nil && tx.db.onMessage != nil {
		tx.db.messages = append(tx.db.messages, m)
	}
	return m, err
}

// OnMessage sets f to be called after each commit that added messages
// (reports and handoffs), with each, while the write still holds its
// turn: f must not block or write to the DB (it queues them).
func (db *DB) OnMessage(f func(Message)) { db.onMessage = f }

func addMessage(conn *sqlite.Conn, m Message) (Message, error) {
	m.Created = time.Now()
	var from, task any
	if m.FromSession != 0 {
		from = m.FromSession
	}
	if m.TaskID != "" {
		task = m.TaskID
	}
	err := sqlitex.Execute(conn, `INSERT INTO messages (created, from_session, from_name, to_name, task_id, kind, title, body, detail)
		VALUES (:at, :fs, :from, :to, :task, :kind, :title, :body, :detail)`, &sqlitex.ExecOptions{Named: map[string]any{
		":at": m.Created.UnixNano(), ":fs": from, ":from": m.From, ":to": m.To, ":task": task, ":kind": m.Kind,
		":title": m.Title, ":body": m.Body, ":detail": m.Detail}})
	if err != nil {
		return m, fmt.Errorf("add %s: %w", m.Kind, err)
	}
	m.ID = conn.LastInsertRowID()
	return m, nil
}

// Messages lists messages newest first: of kind (every kind when ""),
// addressed to name (any when ""), unseen ones only when unseen is set.
func (db *DB) Messages(ctx context.Context, kind, to string, unseen bool, limit int) ([]Message, error) {
	var out []Message
	where := []string{"1"}
	args := map[string]any{":limit": int64(limit)}
	if kind != "" {
		where, args[":kind"] = append(where, "kind = :kind"), kind
	}
	if to != "" {
		where, args[":to"] = append(where, "to_name = :to"), to
	}
	if unseen {
		where = append(where, "read IS NULL")
	}
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT `+messageColumns+` FROM messages WHERE `+strings.Join(where, " AND ")+
			` ORDER BY id DESC LIMIT +:limit`, &sqlitex.ExecOptions{Named: args,
			ResultFunc: func(st *sqlite.Stmt) error { out = append(out, scanMessage(st)); return nil }})
	})
	return out, err
}

// MarkSeen records that the messages ids were shown to their addressee.
func (db *DB) MarkSeen(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	return db.write(ctx, func(conn *sqlite.Conn) error {
		now := time.Now().UnixNano()
		for _, id := range ids {
			err := sqlitex.Execute(conn, `UPDATE messages SET read = :now WHERE id = :id AND read IS NULL`,
				&sqlitex.ExecOptions{Named: map[string]any{":now": now, ":id": id}})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// Rename gives live session id another name that no live session has,
// without it counting as asked for (see [DB.Adopt]): the name snagd gave
// it turned out to be another clone's agent's. Its file claims follow.
func (db *DB) Rename(ctx context.Context, id int64, name string) error {
	return db.write(ctx, func(conn *sqlite.Conn) error {
		var other string
		err := sqlitex.Execute(conn, `SELECT name FROM sessions WHERE ended IS NULL AND name = :n AND id != :id`,
			&sqlitex.ExecOptions{Named: map[string]any{":n": name, ":id": id},
				ResultFunc: func(st *sqlite.Stmt) error { other = st.ColumnText(0); return nil }})
		if err != nil {
			return err
		}
		if other != "" {
			return fmt.Errorf("%w: a live session is %s", ErrNameTaken, name)
		}
		args := map[string]any{":id": id, ":n": name}
		for _, q := range []string{
			`UPDATE sessions SET name = :n WHERE id = :id AND ended IS NULL`,
			`UPDATE file_claims SET holder = :n WHERE session_id = :id AND released IS NULL`,
		} {
			if err := sqlitex.Execute(conn, q, &sqlitex.ExecOptions{Named: args}); err != nil {
				return err
			}
		}
		return nil
	})
}

// RecentlyEnded is how long a session's name stays out of the pool after
// it ends: a newcomer is never handed the name of an agent that may come
// back to ask for it.
const RecentlyEnded = 24 * time.Hour

// Adopt gives live session id the name it asks for, once: when no other
// live session has the name, and the session holds no lease under the name
// it was given (its files say that name). It then takes up the name's
// detached leases, and renames its own file claims. A session that already
// asked for a name keeps it: asking again for the same one is a no-op, and
// for another one is refused (ErrNamed).
func (db *DB) Adopt(ctx context.Context, id int64, name string) (Session, error) {
	var s Session
	err := db.write(ctx, func(conn *sqlite.Conn) error {
		found, asked := false, false
		err := sqlitex.Execute(conn, `SELECT `+sessionColumns+` FROM sessions WHERE id = :id AND ended IS NULL`,
			&sqlitex.ExecOptions{Named: map[string]any{":id": id}, ResultFunc: func(st *sqlite.Stmt) error {
				s, found = scanSession(st), true
				asked = s.Asked
				return nil
			}})
		switch {
		case err != nil:
			return err
		case !found:
			return fmt.Errorf("session %d: %w", id, ErrNoSession)
		case s.Name == name:
			return sqlitex.Execute(conn, `UPDATE sessions SET asked = 1 WHERE id = :id`,
				&sqlitex.ExecOptions{Named: map[string]any{":id": id}})
		case asked:
			return fmt.Errorf("%w: this session is %s", ErrNamed, s.Name)
		}
		var other string
		err = sqlitex.Execute(conn, `SELECT name FROM sessions WHERE ended IS NULL AND name = :n AND id != :id`,
			&sqlitex.ExecOptions{Named: map[string]any{":n": name, ":id": id},
				ResultFunc: func(st *sqlite.Stmt) error { other = st.ColumnText(0); return nil }})
		if err != nil {
			return err
		}
		if other != "" {
			return fmt.Errorf("%w: a live session is %s", ErrNameTaken, name)
		}
		held, err := leasesWhere(conn, `session_id = :id`, map[string]any{":id": id})
		if err != nil {
			return err
		}
		if len(held) > 0 {
			return fmt.Errorf("%w: %s holds %d task(s) under its name", ErrNamed, s.Name, len(held))
		}
		args := map[string]any{":id": id, ":n": name}
		for _, q := range []string{
			`UPDATE sessions SET name = :n, asked = 1 WHERE id = :id`,
			`UPDATE leases SET session_id = :id, detached = 0 WHERE ended IS NULL AND detached = 1 AND holder = :n`,
			`UPDATE file_claims SET holder = :n WHERE session_id = :id AND released IS NULL`,
		} {
			if err := sqlitex.Execute(conn, q, &sqlitex.ExecOptions{Named: args}); err != nil {
				return err
			}
		}
		s.Name = name
		return nil
	})
	return s, err
}

// Errors of names.
var (
	// ErrNamed: the session already has a name it keeps.
	ErrNamed = fmt.Errorf("the session keeps its name")
	// ErrNameTaken: another live session has the name.
	ErrNameTaken = fmt.Errorf("the name is taken")
)

// SetWorktree records on task id's live lease the worktree made for it.
func (db *DB) SetWorktree(ctx context.Context, taskID, path string) error {
	return db.write(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `UPDATE leases SET worktree = :w WHERE task_id = :t AND ended IS NULL`,
			&sqlitex.ExecOptions{Named: map[string]any{":w": path, ":t": taskID}})
	})
}
