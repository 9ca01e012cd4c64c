package coord

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// FileClaim is an agent's live claim of a repository path, folder or glob.
type FileClaim struct {
	ID        int64     `json:"id"`
	Clone     int64     `json:"clone"`
	Host      string    `json:"host"`
	Session   int64     `json:"session"`
	Holder    string    `json:"holder"`
	Path      string    `json:"path"`
	TaskID    string    `json:"task_id,omitempty"`
	Exclusive bool      `json:"exclusive"`
	Acquired  time.Time `json:"acquired"`
	Expires   time.Time `json:"expires"`
}

// FilesRequest is one claim of several canonical paths, all or nothing.
type FilesRequest struct {
	Session   Session
	Paths     []string
	TaskID    string
	TTL       time.Duration
	Exclusive bool
}

// FilesResult is what a claim did: the claims made or renewed, or the
// live claims of others in its way when it made none.
type FilesResult struct {
	Claimed   []FileClaim
	Renewed   int
	Conflicts []FileClaim
}

// ClaimFiles claims r's paths for a session of this clone, all or
// nothing, against every live claim of the workspace's other sessions on
// any clone: overlap says whether two paths (or globs) overlap. Claims
// are made one at a time per workspace (a transaction-scoped advisory
// lock), so two clones never both get overlapping exclusive claims.
func (s *Store) ClaimFiles(ctx context.Context, r FilesRequest, overlap func(a, b string) bool) (FilesResult, error) {
	var res FilesResult
	err := s.tx(ctx, "claim files", func(tx pgx.Tx) error {
		res = FilesResult{}
		if err := s.live(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('snag file claims', $1))`, s.ws); err != nil {
			return err
		}
		live, err := s.fileClaims(ctx, tx, "")
		if err != nil {
			return err
		}
		var own map[string]FileClaim
		if own, res.Conflicts = inTheWay(live, s.Clone(), r, overlap); len(res.Conflicts) > 0 {
			return nil
		}
		ttl := interval(r.TTL)
		for _, p := range r.Paths {
			var c FileClaim
			if old, ok := own[p]; ok {
				err = tx.QueryRow(ctx, `UPDATE file_claims SET expires = now() + $2::interval, exclusive = $3, task_id = $4
					WHERE id = $1 RETURNING id, acquired, expires`, old.ID, ttl, r.Exclusive, r.TaskID).Scan(&c.ID, &c.Acquired, &c.Expires)
				res.Renewed++
			} else {
				err = tx.QueryRow(ctx, `INSERT INTO file_claims (workspace, clone, session, holder, path, task_id, exclusive, expires)
					VALUES ($1, $2, $3, $4, $5, $6, $7, now() + $8::interval) RETURNING id, acquired, expires`,
					s.ws, s.Clone(), r.Session.ID, r.Session.Name, p, r.TaskID, r.Exclusive, ttl).Scan(&c.ID, &c.Acquired, &c.Expires)
			}
			if err != nil {
				return err
			}
			c.Clone, c.Host, c.Session, c.Holder, c.Path, c.TaskID, c.Exclusive = s.Clone(), s.opts.Host, r.Session.ID, r.Session.Name, p, r.TaskID, r.Exclusive
			res.Claimed = append(res.Claimed, c)
		}
		return s.notify(ctx, tx, "files", map[string]any{"holder": r.Session.Name, "claimed": r.Paths})
	})
	return res, err
}

// fileClaims reads the workspace's live claims (and where, a condition on
// f, when given).
func (s *Store) fileClaims(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, where string, args ...any) ([]FileClaim, error) {
	if where != "" {
		where = " AND " + where
	}
	rows, err := q.Query(ctx, `SELECT f.id, f.clone, coalesce(c.host, ''), f.session, f.holder, f.path, f.task_id, f.exclusive, f.acquired, f.expires
		FROM file_claims f LEFT JOIN clones c ON c.id = f.clone
		WHERE f.workspace = $1 AND f.released IS NULL AND f.expires > now()`+where+` ORDER BY f.path, f.id`,
		append([]any{s.ws}, args...)...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (FileClaim, error) {
		var c FileClaim
		err := r.Scan(&c.ID, &c.Clone, &c.Host, &c.Session, &c.Holder, &c.Path, &c.TaskID, &c.Exclusive, &c.Acquired, &c.Expires)
		return c, err
	})
}

// FileClaims lists the workspace's live file claims, on every clone.
func (s *Store) FileClaims(ctx context.Context) ([]FileClaim, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	out, err := s.fileClaims(ctx, s.pool, "")
	if err != nil {
		return nil, s.wrap("list file claims", err)
	}
	s.ok()
	return out, nil
}

// ReleaseFiles ends this clone's session's claims of paths, or all of
// them when paths is empty.
func (s *Store) ReleaseFiles(ctx context.Context, session int64, paths []string, why string) error {
	return s.tx(ctx, "release files", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE file_claims SET released = now(), why = $5
			WHERE workspace = $1 AND clone = $2 AND session = $3 AND released IS NULL AND (cardinality($4::text[]) = 0 OR path = ANY($4))`,
			s.ws, s.Clone(), session, append([]string{}, paths...), why)
		if err != nil {
			return err
		}
		return s.notify(ctx, tx, "files", map[string]any{"released": paths, "reason": why})
	})
}

// ForceReleaseFile ends every live claim of path, whoever holds it on
// whichever clone: a person's decision. It returns the claims it ended.
func (s *Store) ForceReleaseFile(ctx context.Context, path, why string) ([]FileClaim, error) {
	var out []FileClaim
	err := s.tx(ctx, "release "+path, func(tx pgx.Tx) error {
		var err error
		if out, err = s.fileClaims(ctx, tx, "f.path = $2", path); err != nil || len(out) == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE file_claims SET released = now(), why = $3
			WHERE workspace = $1 AND path = $2 AND released IS NULL`, s.ws, path, why); err != nil {
			return err
		}
		return s.notify(ctx, tx, "files", map[string]any{"released": []string{path}, "reason": why, "force": true})
	})
	return out, err
}

// inTheWay sorts the live claims for r, a claim of a session of member
// clone: the session's own, by path (a claim of one again renews it), and
// the others' that r may not overlap (either side exclusive).
func inTheWay(live []FileClaim, clone int64, r FilesRequest, overlap func(a, b string) bool) (own map[string]FileClaim, conflicts []FileClaim) {
	own = map[string]FileClaim{}
	for _, c := range live {
		if c.Clone == clone && c.Session == r.Session.ID {
			own[c.Path] = c
			continue
		}
		if !(r.Exclusive || c.Exclusive) {
			continue
		}
		for _, p := range r.Paths {
			if overlap(c.Path, p) {
				conflicts = append(conflicts, c)
				break
			}
		}
	}
	return own, conflicts
}

// HolderOn names the claim's holder, with its machine when the claim is
// another clone's than clone: "LYNX on build-2".
func (c FileClaim) HolderOn(clone int64) string {
	if c.Clone == clone || c.Host == "" {
		return c.Holder
	}
	return c.Holder + " on " + c.Host
}
