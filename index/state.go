package index

import (
	"context"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// StateOf returns the state of the row for a file (relative to .snag/), and
// whether there is one.
func (db *DB) StateOf(ctx context.Context, path string) (state string, found bool, err error) {
	err = db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT state FROM tasks WHERE path = :path`, &sqlitex.ExecOptions{
			Named: map[string]any{":path": path},
			ResultFunc: func(s *sqlite.Stmt) error {
				state, found = s.ColumnText(0), true
				return nil
			},
		})
	})
	return state, found, err
}
