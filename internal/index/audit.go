package index

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/snagdev/snag/internal/queue"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// AuditLogID is the id of this index's audit log, made at its first call
// (a rebuilt index has a new one), and the entry up to which the log
// counted as sent to the repository's live state when the id was made:
// with sentBefore, every entry it had then (an index that sent its
// entries before logs had ids), else none.
func (db *DB) AuditLogID(ctx context.Context, sentBefore bool) (id string, from int64, err error) {
	err = db.write(ctx, func(conn *sqlite.Conn) error {
		err := sqlitex.Execute(conn, `SELECT (SELECT v FROM meta WHERE k = 'audit_log'),
				coalesce((SELECT CAST(v AS INTEGER) FROM meta WHERE k = 'audit_from'), 0), coalesce((SELECT max(id) FROM audit), 0)`,
			&sqlitex.ExecOptions{ResultFunc: func(st *sqlite.Stmt) error {
				id, from = st.ColumnText(0), st.ColumnInt64(1)
				if id == "" && sentBefore {
					from = st.ColumnInt64(2)
				}
				return nil
			}})
		if err != nil || id != "" {
			return err
		}
		b := make([]byte, 16)
		rand.Read(b)
		id = hex.EncodeToString(b)
		return sqlitex.Execute(conn, `INSERT INTO meta (k, v) VALUES ('audit_log', :id), ('audit_from', :from)`,
			&sqlitex.ExecOptions{Named: map[string]any{":id": id, ":from": strconv.FormatInt(from, 10)}})
	})
	if err != nil {
		return "", 0, fmt.Errorf("the audit log's id: %w", err)
	}
	return id, from, nil
}

// AuditLog returns audit entries after id (0: from the start), oldest
// first, at most limit, with those AuditLater queued written first.
func (db *DB) AuditLog(ctx context.Context, after int64, limit int) ([]AuditEntry, error) {
	if limit <= 0 {
		limit = 100
	}
	if err := db.FlushAudit(ctx); err != nil {
		return nil, err
	}
	var out []AuditEntry
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT id, at, coalesce(session_id, 0), actor, agent, action, task_id, outcome, detail, branch
			FROM audit WHERE id > :after ORDER BY id LIMIT +:limit`, &sqlitex.ExecOptions{
			Named: map[string]any{":after": after, ":limit": int64(limit)},
			ResultFunc: func(st *sqlite.Stmt) error {
				out = append(out, AuditEntry{ID: st.ColumnInt64(0), At: time.Unix(0, st.ColumnInt64(1)),
					SessionID: st.ColumnInt64(2), Actor: queue.Actor(st.ColumnText(3)), Agent: st.ColumnText(4),
					Action: st.ColumnText(5), TaskID: st.ColumnText(6), Outcome: st.ColumnText(7), Detail: st.ColumnText(8),
					Branch: st.ColumnText(9)})
				return nil
			},
		})
	})
	return out, err
}

// AuditTail returns the latest n audit entries, oldest first.
func (db *DB) AuditTail(ctx context.Context, n int) ([]AuditEntry, error) {
	if err := db.FlushAudit(ctx); err != nil {
		return nil, err
	}
	var last int64
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT coalesce(max(id), 0) FROM audit`, &sqlitex.ExecOptions{
			ResultFunc: func(st *sqlite.Stmt) error { last = st.ColumnInt64(0); return nil },
		})
	})
	if err != nil {
		return nil, err
	}
	return db.AuditLog(ctx, max(last-int64(n), 0), n)
}
