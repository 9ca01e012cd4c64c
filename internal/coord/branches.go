package coord

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// BranchLease is the advisory write lease of a branch's decision graph.
type BranchLease struct {
	Branch  string
	Clone   int64
	Host    string
	Session int64
	Holder  string
	Expires time.Time
}

// TakeBranch takes, or renews, the write lease of branch for a session of
// this clone for ttl, unless a session (of any clone) holds it: then ok is
// false and held says who, until when.
func (s *Store) TakeBranch(ctx context.Context, branch string, ses Session, ttl time.Duration) (held BranchLease, ok bool, err error) {
	err = s.tx(ctx, "take the write lease of "+branch, func(tx pgx.Tx) error {
		if err := s.live(ctx, tx); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO branch_leases AS b (workspace, branch, clone, session, holder, expires)
			VALUES ($1, $2, $3, $4, $5, now() + $6::interval)
			ON CONFLICT (workspace, branch) DO UPDATE SET clone = excluded.clone, session = excluded.session,
				holder = excluded.holder, expires = excluded.expires
			WHERE b.expires <= now() OR (b.clone = excluded.clone AND b.session = excluded.session)`,
			s.ws, branch, s.Clone(), ses.ID, ses.Name, interval(ttl))
		if err != nil {
			return err
		}
		if ok = tag.RowsAffected() == 1; ok {
			return nil
		}
		err = tx.QueryRow(ctx, `SELECT b.branch, b.clone, coalesce(c.host, ''), b.session, b.holder, b.expires
			FROM branch_leases b LEFT JOIN clones c ON c.id = b.clone WHERE b.workspace = $1 AND b.branch = $2`, s.ws, branch).
			Scan(&held.Branch, &held.Clone, &held.Host, &held.Session, &held.Holder, &held.Expires)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	return held, ok, err
}

// AuditBatch appends entries to the shared audit log as this clone's, in
// one transaction.
func (s *Store) AuditBatch(ctx context.Context, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	return s.tx(ctx, "audit", func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, e := range entries {
			b.Queue(auditInsert, s.auditArgs(e)...)
		}
		return tx.SendBatch(ctx, b).Close()
	})
}

// LiveNames lists the names of the live sessions of the workspace's other
// clones: a new session here takes none of them.
func (s *Store) LiveNames(ctx context.Context) ([]string, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT x.name FROM sessions x JOIN clones c ON c.id = x.clone
		WHERE x.workspace = $1 AND x.clone <> $2 AND x.ended IS NULL AND c.ended IS NULL`, s.ws, s.Clone())
	if err != nil {
		return nil, s.wrap("list the team's names", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, s.wrap("list the team's names", err)
	}
	s.ok()
	return names, nil
}
