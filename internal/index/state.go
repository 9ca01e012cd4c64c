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

// RowAt returns the row for a file (relative to .snag/).
func (db *DB) RowAt(ctx context.Context, path string) (*Row, error) {
	var row *Row
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT `+rowColumns+` FROM tasks WHERE path = :path`, &sqlitex.ExecOptions{
			Named:      map[string]any{":path": path},
			ResultFunc: func(s *sqlite.Stmt) error { row = scanRow(s); return nil },
		})
	})
	if err == nil && row == nil {
		err = ErrNotFound
	}
	return row, err
}

// Indexed is what the index knows of one file: its state and the size,
// modification time and inode it had when it was indexed.
type Indexed struct {
	State string
	Size  int64
	MTime int64  // unix nanoseconds
	Inode uint64 // 0 when unknown
}

// IndexedAt returns what the index knows of a file (relative to .snag/),
// and whether it has a row.
func (db *DB) IndexedAt(ctx context.Context, path string) (in Indexed, found bool, err error) {
	err = db.withConn(ctx, func(conn *sqlite.Conn) (err error) {
		in, found, err = indexedAt(conn, path)
		return err
	})
	return in, found, err
}

// IndexedAt is [DB.IndexedAt] inside the transaction.
func (tx *Tx) IndexedAt(path string) (Indexed, bool, error) { return indexedAt(tx.conn, path) }

func indexedAt(conn *sqlite.Conn, path string) (Indexed, bool, error) {
	var in Indexed
	found := false
	err := sqlitex.Execute(conn, `SELECT state, size, mtime, ino FROM tasks WHERE path = :path`, &sqlitex.ExecOptions{
		Named: map[string]any{":path": path},
		ResultFunc: func(s *sqlite.Stmt) error {
			in, found = Indexed{State: s.ColumnText(0), Size: s.ColumnInt64(1), MTime: s.ColumnInt64(2),
				Inode: uint64(s.ColumnInt64(3))}, true
			return nil
		},
	})
	return in, found, err
}
