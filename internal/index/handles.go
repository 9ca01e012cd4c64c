package index

import (
	"context"
	"errors"
	"fmt"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// The kinds of handle.
const (
	// HandleLease names one lease: a task and its epoch.
	HandleLease = "lease"
	// HandleAgent names a session: the agent across its requests.
	HandleAgent = "agent"
)

// ErrNoHandle: no handle has that hash (it was never made, or what it
// named has ended).
var ErrNoHandle = errors.New("no such handle")

// Handle is a handle's row: what it names and the credential that made
// it. The handle itself is never stored, only its hash.
type Handle struct {
	Hash      string // hex SHA-256 of the handle
	Kind      string // HandleLease or HandleAgent
	SessionID int64
	TaskID    string // a lease handle's task
	Epoch     int64  // and its lease's epoch
	Cred      string // the credential that made it
	Created   time.Time
}

// AddHandle records a handle.
func (db *DB) AddHandle(ctx context.Context, h Handle) error {
	if h.Created.IsZero() {
		h.Created = time.Now()
	}
	return db.write(ctx, func(conn *sqlite.Conn) error {
		err := sqlitex.Execute(conn, `INSERT INTO handles (hash, kind, session_id, task_id, epoch, cred, created)
			VALUES (:hash, :kind, :s, :t, :e, :cred, :at)`, &sqlitex.ExecOptions{Named: map[string]any{
			":hash": h.Hash, ":kind": h.Kind, ":s": h.SessionID, ":t": h.TaskID, ":e": h.Epoch, ":cred": h.Cred,
			":at": h.Created.UnixNano()}})
		if err != nil {
			return fmt.Errorf("add handle: %w", err)
		}
		return nil
	})
}

// HandleOf reads the handle with hash (ErrNoHandle when there is none).
func (db *DB) HandleOf(ctx context.Context, hash string) (Handle, error) {
	var h Handle
	found := false
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT hash, kind, session_id, task_id, epoch, cred, created FROM handles WHERE hash = :h`,
			&sqlitex.ExecOptions{Named: map[string]any{":h": hash}, ResultFunc: func(st *sqlite.Stmt) error {
				h = Handle{Hash: st.ColumnText(0), Kind: st.ColumnText(1), SessionID: st.ColumnInt64(2), TaskID: st.ColumnText(3),
					Epoch: st.ColumnInt64(4), Cred: st.ColumnText(5), Created: time.Unix(0, st.ColumnInt64(6))}
				found = true
				return nil
			}})
	})
	if err == nil && !found {
		err = ErrNoHandle
	}
	return h, err
}

// RevokeHandles forgets every handle made with cred and returns the
// sessions they named, once each.
func (db *DB) RevokeHandles(ctx context.Context, cred string) ([]int64, error) {
	return db.revoke(ctx, `cred = :c`, map[string]any{":c": cred})
}

// RevokeHandlesBut forgets every handle made with a credential of kind
// (its prefix, "local:" or "hosted:") but keep, the one in force, and
// returns the sessions they named, once each.
func (db *DB) RevokeHandlesBut(ctx context.Context, kind, keep string) ([]int64, error) {
	return db.revoke(ctx, `substr(cred, 1, length(:k)) = :k AND cred != :keep`, map[string]any{":k": kind, ":keep": keep})
}

// revoke forgets the handles where says and returns the sessions they
// named, once each.
func (db *DB) revoke(ctx context.Context, where string, args map[string]any) ([]int64, error) {
	var ids []int64
	err := db.write(ctx, func(conn *sqlite.Conn) error {
		err := sqlitex.Execute(conn, `SELECT DISTINCT session_id FROM handles WHERE `+where+` ORDER BY session_id`,
			&sqlitex.ExecOptions{Named: args, ResultFunc: func(st *sqlite.Stmt) error {
				ids = append(ids, st.ColumnInt64(0))
				return nil
			}})
		if err != nil {
			return err
		}
		return sqlitex.Execute(conn, `DELETE FROM handles WHERE `+where, &sqlitex.ExecOptions{Named: args})
	})
	return ids, err
}

// SetExpires records when a live session that no stream holds ends
// unless a call names it first.
func (db *DB) SetExpires(ctx context.Context, id int64, at time.Time) error {
	return db.write(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `UPDATE sessions SET expires = :at, last_seen = :now WHERE id = :id AND ended IS NULL`,
			&sqlitex.ExecOptions{Named: map[string]any{":at": nanos(at), ":now": time.Now().UnixNano(), ":id": id}})
	})
}

// nanos is t in unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// MoveHandle points the handle with h's hash at h's session and epoch: its
// lease moved to the agent's new connection.
func (db *DB) MoveHandle(ctx context.Context, h Handle) error {
	return db.write(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `UPDATE handles SET session_id = :s, epoch = :e WHERE hash = :h`,
			&sqlitex.ExecOptions{Named: map[string]any{":s": h.SessionID, ":e": h.Epoch, ":h": h.Hash}})
	})
}
