package coord

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TeamStatus is who is connected to the coordination store in one
// workspace: what snag team status shows. It is read without joining:
// reading it writes nothing.
type TeamStatus struct {
	// Workspace is the workspace's name.
	Workspace string `json:"workspace"`
	// Store is the DSN, its password redacted.
	Store string `json:"store"`
	// Schema is the version of the snag schema in the database.
	Schema int `json:"schema"`
	// Clones are the workspace's live clones, in the order they joined.
	Clones []Clone `json:"clones"`
	// Held counts the workspace's tasks held by a session; Done, those
	// resolved through the store and not reopened since.
	Held int `json:"held"`
	Done int `json:"done"`
	// Note says in a sentence why Clones is empty; "" when it is not.
	Note string `json:"note,omitempty"`
	// Others names the database's other workspaces (at most 20) when no
	// clone of this one ever connected: a clone whose origin remote is
	// spelt another way, or whose config.json names another workspace,
	// shows up there.
	Others []string `json:"other_workspaces,omitempty"`
}

// maxOthers caps TeamStatus.Others.
const maxOthers = 20

// Check connects to the database at dsn as snagd does, without joining
// any workspace, and returns the version of its snag schema. A database
// without the schema snagd needs is refused with ErrNotInitialised.
func Check(ctx context.Context, dsn string) (int, error) {
	s := peeker(dsn)
	pool, v, err := s.peek(ctx)
	if err != nil {
		return 0, err
	}
	pool.Close()
	return v, nil
}

// Status reads who is connected to the database at dsn in workspace: its
// live clones with their sessions and held tasks, and the workspace's
// counts. It does not join (no row is written). A workspace no clone has
// joined yet gives a status with no clones and a Note that says so, not an
// error; a database without the schema snagd needs is refused with
// ErrNotInitialised.
func Status(ctx context.Context, dsn, workspace string) (TeamStatus, error) {
	st := TeamStatus{Workspace: workspace, Store: Redact(dsn), Clones: []Clone{}}
	if workspace == "" {
		return st, errors.New("coord: status: no workspace name: set config.json's workspace, or give the repository an origin remote")
	}
	s := peeker(dsn)
	s.opts.Workspace = workspace
	pool, v, err := s.peek(ctx)
	if err != nil {
		return st, err
	}
	defer pool.Close()
	s.pool, st.Schema = pool, v
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	err = pool.QueryRow(ctx, `SELECT id FROM workspaces WHERE name = $1`, workspace).Scan(&s.ws)
	if errors.Is(err, pgx.ErrNoRows) {
		st.Note = fmt.Sprintf("no clone of %s has connected yet: a snagd started in one with team mode on joins it", workspace)
		rows, err := pool.Query(ctx, `SELECT name FROM workspaces ORDER BY name LIMIT $1`, maxOthers)
		if err != nil {
			return st, s.wrap("list the workspaces", err)
		}
		if st.Others, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return st, s.wrap("list the workspaces", err)
		}
		return st, nil
	}
	if err != nil {
		return st, s.wrap("find workspace "+workspace, err)
	}
	if st.Clones, err = s.Clones(ctx); err != nil {
		return st, err
	}
	err = pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'held'), count(*) FILTER (WHERE state = 'done')
		FROM leases WHERE workspace = $1`, s.ws).Scan(&st.Held, &st.Done)
	if err != nil {
		return st, s.wrap("count the leases", err)
	}
	if len(st.Clones) == 0 {
		st.Note = fmt.Sprintf("no clone of %s is connected: the last one stopped or went silent", workspace)
	}
	return st, nil
}

// NextAlias takes the next alias number of kind ("task" or "note") from
// workspace's sequence in the database at dsn, never below floor, without
// joining as a clone: snag doctor --fix in team mode, with no snagd, gives
// a task file its key from the sequence every clone takes its keys from.
func NextAlias(ctx context.Context, dsn, workspace, kind string, floor int64) (int64, error) {
	if workspace == "" {
		return 0, errors.New("coord: no workspace name: set config.json's workspace, or give the repository an origin remote")
	}
	s := peeker(dsn)
	s.opts.Workspace = workspace
	pool, _, err := s.peek(ctx)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	s.pool = pool
	var n int64
	err = s.tx(ctx, "allocate a "+kind+" alias", func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO workspaces (name) VALUES ($1)
			ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id`, workspace).Scan(&s.ws); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO aliases AS a (workspace, kind, next) VALUES ($1, $2, $3 + 1)
			ON CONFLICT (workspace, kind) DO UPDATE SET next = greatest(a.next, $3) + 1
			RETURNING next - 1`, s.ws, kind, floor).Scan(&n)
	})
	return n, err
}

// peeker is a Store that has not joined: it only reads, with the store's
// DSN handling (the password scrubbed from every error) and timeouts.
func peeker(dsn string) *Store {
	return &Store{dsn: dsn, secret: password(dsn), opts: Options{Timeout: DefaultTimeout, MaxConns: 2}}
}

// peek connects, checks the schema as Open does, and returns the pool and
// the schema's version.
func (s *Store) peek(ctx context.Context) (*pgxpool.Pool, int, error) {
	pool, err := s.connect(ctx)
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	v, err := schemaVersion(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, 0, s.wrap("read the schema version", err)
	}
	return pool, v, nil
}
