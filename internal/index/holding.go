package index

import (
	"context"
	"fmt"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// Holding says what the task files hold, for a comparison with the live
// leases: held has the id of every task whose row says claimed or
// verifying, and unleased has those rows, whole, whose task has no live
// lease. Both come from the index of statuses and the leases, so the rows
// of the tasks whose files and leases agree (all of them, most of the time)
// are never read: at a start on 100,000 tasks a quarter of them are held.
func (db *DB) Holding(ctx context.Context) (held map[string]bool, unleased []*Row, err error) {
	held = map[string]bool{}
	err = db.withConn(ctx, func(conn *sqlite.Conn) (err error) {
		defer sqlitex.Transaction(conn)(&err) // one snapshot for both
		err = sqlitex.Execute(conn, `SELECT id FROM tasks WHERE status IN ('claimed', 'verifying') AND id != ''`,
			&sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error {
				held[s.ColumnText(0)] = true
				return nil
			}})
		if err != nil {
			return err
		}
		return sqlitex.Execute(conn, `SELECT `+rowColumns+` FROM tasks
			WHERE status IN ('claimed', 'verifying') AND id != ''
				AND id NOT IN (SELECT task_id FROM leases WHERE ended IS NULL)
			ORDER BY `+listOrder, &sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error {
			unleased = append(unleased, scanRow(s))
			return nil
		}})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("holding: %w", err)
	}
	return held, unleased, nil
}
