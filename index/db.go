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
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"time"

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
	pool *sqlitemigration.Pool
	path string
}

// Open opens (creating when needed) the database at path and brings its
// schema up to date. It fails when the file is not snag's.
func Open(ctx context.Context, path string) (*DB, error) {
	pool := sqlitemigration.NewPool(path, sqlitemigration.Schema{
		AppID:      AppID,
		Migrations: migrations(),
	}, sqlitemigration.Options{
		Flags:    sqlite.OpenReadWrite | sqlite.OpenCreate | sqlite.OpenWAL | sqlite.OpenURI,
		PoolSize: 8,
		PrepareConn: func(conn *sqlite.Conn) error {
			conn.SetBusyTimeout(BusyTimeout)
			// temp_store = MEMORY keeps statement journals and sorts in
			// memory rather than in temp files; a 16 MiB page cache (2 MiB
			// by default, allocated as used) holds the full-text pages a
			// search of a large queue reads.
			for _, pragma := range []string{`PRAGMA foreign_keys = ON;`, `PRAGMA synchronous = NORMAL;`,
				`PRAGMA temp_store = MEMORY;`, `PRAGMA cache_size = -16384;`} {
				if err := sqlitex.ExecuteTransient(conn, pragma, nil); err != nil {
					return err
				}
			}
			return nil
		},
	})
	db := &DB{pool: pool, path: path}
	conn, err := db.take(ctx)
	if err != nil {
		pool.Close()
		return nil, err
	}
	db.put(conn)
	return db, nil
}

// Close closes every connection.
func (db *DB) Close() error { return db.pool.Close() }

// Path is the database file's path.
func (db *DB) Path() string { return db.path }

// take gets a connection, waiting at most as long as ctx allows; the
// connection is interrupted when ctx ends.
func (db *DB) take(ctx context.Context) (*sqlite.Conn, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	conn, err := db.pool.Take(ctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("index %s: no connection: %w", db.path, err)
		}
		return nil, fmt.Errorf("index %s: %w (if it is damaged, move it aside and run snag reindex)", db.path, err)
	}
	return conn, nil
}

func (db *DB) put(conn *sqlite.Conn) { db.pool.Put(conn) }

// withConn runs f on a connection that ctx interrupts.
func (db *DB) withConn(ctx context.Context, f func(conn *sqlite.Conn) error) error {
	conn, err := db.take(ctx)
	if err != nil {
		return err
	}
	defer db.put(conn)
	old := conn.SetInterrupt(ctx.Done())
	defer conn.SetInterrupt(old)
	return f(conn)
}

// write runs f in an immediate transaction, so a write that follows a read
// never meets a lock upgrade failure.
func (db *DB) write(ctx context.Context, f func(conn *sqlite.Conn) error) error {
	return db.withConn(ctx, func(conn *sqlite.Conn) (err error) {
		end, err := sqlitex.ImmediateTransaction(conn)
		if err != nil {
			return fmt.Errorf("index: begin: %w", err)
		}
		defer end(&err)
		return f(conn)
	})
}
