package coord

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"zombiezen.com/go/sqlite"
)

func scanLease(st *sqlite.Stmt) Lease {
	return Lease{TaskID: st.ColumnText(0), Key: st.ColumnText(1), Epoch: st.ColumnInt64(2), State: st.ColumnText(3),
		Clone: st.ColumnInt64(4), Session: st.ColumnInt64(5), Holder: st.ColumnText(6), Updated: unix(st.ColumnInt64(7)),
		Why: st.ColumnText(8), Host: st.ColumnText(9), Branch: st.ColumnText(10)}
}

// leasesWhere reads the leases that match where, by task id.
func (s *Embedded) leasesWhere(conn *sqlite.Conn, where string, args ...any) ([]Lease, error) {
	var out []Lease
	err := exec(conn, `SELECT `+leaseColumns+` FROM leases l LEFT JOIN clones c ON c.id = l.clone WHERE `+where+` ORDER BY l.task_id`,
		func(st *sqlite.Stmt) error { out = append(out, scanLease(st)); return nil }, args...)
	return out, err
}

// leaseOf reads task id's lease; ok is false when it was never claimed.
func (s *Embedded) leaseOf(conn *sqlite.Conn, id string) (Lease, bool, error) {
	ls, err := s.leasesWhere(conn, `l.task_id = ?`, id)
	if err != nil || len(ls) == 0 {
		return Lease{TaskID: id, State: Free}, false, err
	}
	return ls[0], true, nil
}

// Grant gives session ses the lease of task id under a new epoch: ErrHeld
// when another session holds it, ErrDone when it was resolved; the
// session that holds it already gets its lease as it is.
func (s *Embedded) Grant(ctx context.Context, id, key string, ses Session) (Lease, error) {
	var l Lease
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		cur, found, err := s.leaseOf(conn, id)
		if err != nil {
			return err
		}
		switch {
		case !found || cur.State == Free:
			epoch := cur.Epoch + 1
			if err := s.hold(conn, id, key, epoch, ses); err != nil {
				return err
			}
			l, _, err = s.leaseOf(conn, id)
			return err
		case cur.State == Done:
			l = cur
			return fmt.Errorf("%w: %s was resolved through %s (branch %s): pull to see it, or ask a person to reopen it", ErrDone, key, orNone(cur.Host), orNone(cur.Branch))
		case cur.Clone == s.Clone() && cur.Session == ses.ID:
			l = cur
			return nil
		default:
			l = cur
			return fmt.Errorf("%w: %s holds it (on %s)", ErrHeld, cur.Holder, orNone(cur.Host))
		}
	})
	return l, err
}

// hold writes task id's lease as held by ses of this member at epoch.
func (s *Embedded) hold(conn *sqlite.Conn, id, key string, epoch int64, ses Session) error {
	return exec(conn, `INSERT INTO leases (task_id, key, epoch, state, clone, session, holder, updated) VALUES (?1, ?2, ?3, 'held', ?4, ?5, ?6, ?7)
		ON CONFLICT (task_id) DO UPDATE SET key = ?2, epoch = ?3, state = 'held', clone = ?4, session = ?5, holder = ?6, updated = ?7, why = ''`,
		nil, id, key, epoch, s.Clone(), ses.ID, ses.Name, now())
}

// GrantAt gives session ses the lease of task id at epoch exactly (see
// Store.GrantAt).
func (s *Embedded) GrantAt(ctx context.Context, id, key string, ses Session, epoch int64) (Lease, error) {
	var l Lease
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		cur, found, err := s.leaseOf(conn, id)
		if err != nil {
			return err
		}
		if !found || cur.State == Free && cur.Epoch <= epoch || cur.State == Held && cur.Clone == s.Clone() && cur.Epoch == epoch ||
			cur.State == Done && cur.Epoch == epoch {
			if err := s.hold(conn, id, key, epoch, ses); err != nil {
				return err
			}
			l, _, err = s.leaseOf(conn, id)
			return err
		}
		l = cur
		switch cur.State {
		case Done:
			return fmt.Errorf("%w: %s was resolved through %s", ErrDone, key, orNone(cur.Host))
		case Held:
			return fmt.Errorf("%w: %s holds it (on %s)", ErrHeld, cur.Holder, orNone(cur.Host))
		}
		return fmt.Errorf("%w: %s was granted at epoch %d since", ErrStale, key, cur.Epoch)
	})
	return l, err
}

// Transfer moves task id's lease, held by this member at epoch, to ses
// under a new epoch (a handoff).
func (s *Embedded) Transfer(ctx context.Context, id string, epoch int64, ses Session) (Lease, error) {
	var l Lease
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		if err := exec(conn, `UPDATE leases SET epoch = epoch + 1, session = ?, holder = ?, updated = ?
			WHERE task_id = ? AND clone = ? AND epoch = ? AND state = 'held'`, nil, ses.ID, ses.Name, now(), id, s.Clone(), epoch); err != nil {
			return err
		}
		if conn.Changes() == 0 {
			return fmt.Errorf("%w: %s is not held by this clone at epoch %d", ErrStale, id, epoch)
		}
		var err error
		l, _, err = s.leaseOf(conn, id)
		return err
	})
	return l, err
}

// Adopt moves task id's lease, held by this member at epoch, to ses.
func (s *Embedded) Adopt(ctx context.Context, id string, epoch int64, ses Session) error {
	return s.write(ctx, func(conn *sqlite.Conn) error {
		if err := exec(conn, `UPDATE leases SET session = ?, holder = ?, updated = ?
			WHERE task_id = ? AND clone = ? AND epoch = ? AND state = 'held'`, nil, ses.ID, ses.Name, now(), id, s.Clone(), epoch); err != nil {
			return err
		}
		if conn.Changes() == 0 {
			return fmt.Errorf("%w: %s is not held by this clone at epoch %d", ErrStale, id, epoch)
		}
		return nil
	})
}

// Check verifies that this member's session holds task id under epoch (0:
// whichever is live): ErrStale otherwise.
func (s *Embedded) Check(ctx context.Context, id string, epoch int64, session int64) (Lease, error) {
	var l Lease
	var found bool
	err := s.read(ctx, func(conn *sqlite.Conn) (err error) {
		l, found, err = s.leaseOf(conn, id)
		return err
	})
	if err != nil {
		return l, err
	}
	return l, held(l, found, id, s.Clone(), session, epoch)
}

// Release frees task id, held by this member's session under epoch.
func (s *Embedded) Release(ctx context.Context, id string, epoch, session int64, why string) error {
	return s.end(ctx, id, epoch, session, Free, why)
}

// Resolve marks task id done, held by this member's session under epoch.
func (s *Embedded) Resolve(ctx context.Context, id string, epoch, session int64, why string) error {
	return s.end(ctx, id, epoch, session, Done, why)
}

// End ends task id's lease held by this member under epoch, whichever of
// its sessions holds it, in state Free or Done.
func (s *Embedded) End(ctx context.Context, id string, epoch int64, state, why string) error {
	return s.end(ctx, id, epoch, 0, state, why)
}

func (s *Embedded) end(ctx context.Context, id string, epoch, session int64, state, why string) error {
	return s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		err := exec(conn, `UPDATE leases SET state = ?, updated = ?, why = ?
			WHERE task_id = ? AND state = 'held' AND clone = ? AND (?6 = 0 OR session = ?6) AND (?7 = 0 OR epoch = ?7)`, nil,
			state, now(), why, id, s.Clone(), session, epoch)
		if err != nil {
			return err
		}
		if conn.Changes() == 0 {
			l, _, _ := s.leaseOf(conn, id)
			return fmt.Errorf("%w: %s is %s at epoch %d", ErrStale, id, orNone(l.State), l.Epoch)
		}
		return nil
	})
}

// Unend takes back an end this member told first (see Store.Unend).
func (s *Embedded) Unend(ctx context.Context, id string, epoch int64, ses Session, hold bool) error {
	return s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		state, session := Free, any(nil)
		if hold {
			state, session = Held, ses.ID
		}
		return exec(conn, `UPDATE leases SET state = ?, clone = ?, session = ?, holder = ?, updated = ?, why = ''
			WHERE task_id = ? AND state = 'done' AND epoch = ?`, nil, state, s.Clone(), session, ses.Name, now(), id, epoch)
	})
}

// MarkDone puts task id's lease in state Done when it is free at an epoch
// no later than epoch, or still held by this member at epoch.
func (s *Embedded) MarkDone(ctx context.Context, id string, epoch int64, why string) (bool, error) {
	var changed bool
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		err := exec(conn, `UPDATE leases SET state = 'done', updated = ?, why = ?
			WHERE task_id = ? AND epoch <= ?4 AND (state = 'free' OR (state = 'held' AND clone = ? AND epoch = ?4))`, nil,
			now(), why, id, epoch, s.Clone())
		changed = conn.Changes() > 0
		return err
	})
	return changed, err
}

// Set puts task id's lease in state Free or Done under a new epoch, whoever
// holds it: a person's decision.
func (s *Embedded) Set(ctx context.Context, id, key, state, why string) error {
	if state != Free && state != Done {
		return fmt.Errorf("coord: set %s to %q: only %q and %q can be set", key, state, Free, Done)
	}
	return s.write(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `INSERT INTO leases (task_id, key, epoch, state, why, clone, updated) VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6)
			ON CONFLICT (task_id) DO UPDATE SET state = ?3, epoch = epoch + 1, updated = ?6, why = ?4, clone = ?5, session = NULL`,
			nil, id, key, state, why, s.Clone(), now())
	})
}

// LeaseOf returns task id's lease; a task never claimed is Free at epoch 0.
func (s *Embedded) LeaseOf(ctx context.Context, id string) (Lease, error) {
	var l Lease
	err := s.read(ctx, func(conn *sqlite.Conn) (err error) {
		l, _, err = s.leaseOf(conn, id)
		return err
	})
	return l, err
}

// Leases lists the held leases.
func (s *Embedded) Leases(ctx context.Context) ([]Lease, error) {
	var out []Lease
	err := s.read(ctx, func(conn *sqlite.Conn) (err error) {
		out, err = s.leasesWhere(conn, `l.state = 'held'`)
		return err
	})
	return out, err
}

// Mine lists the leases this member holds.
func (s *Embedded) Mine(ctx context.Context) ([]Lease, error) {
	var out []Lease
	err := s.read(ctx, func(conn *sqlite.Conn) (err error) {
		out, err = s.leasesWhere(conn, `l.state = 'held' AND l.clone = ?`, s.Clone())
		return err
	})
	return out, err
}

// Finished lists the tasks that are done, by id.
func (s *Embedded) Finished(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `SELECT task_id FROM leases WHERE state = 'done'`, func(st *sqlite.Stmt) error {
			out[st.ColumnText(0)] = true
			return nil
		})
	})
	return out, err
}

// NextAlias takes the next number of kind's sequence, never below floor.
func (s *Embedded) NextAlias(ctx context.Context, kind string, floor int64) (int64, error) {
	return s.db.NextAlias(ctx, kind, floor)
}

// GiveBack returns n to kind's sequence when it was the last number taken.
func (s *Embedded) GiveBack(ctx context.Context, kind string, n int64) error {
	return s.write(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `UPDATE aliases SET next = ?2 WHERE kind = ?1 AND next = ?2 + 1`, nil, kind, n)
	})
}

// Publish makes the ready rows of this member the tasks of ready, in one
// transaction, when they changed since the last publication.
func (s *Embedded) Publish(ctx context.Context, ready []Ready) error {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	now := make(map[string]Ready, len(ready))
	for _, r := range ready {
		now[r.TaskID] = r
	}
	if s.published != nil && len(now) == len(s.published) && !slices.ContainsFunc(ready, func(r Ready) bool { return s.published[r.TaskID] != r }) {
		return nil
	}
	// Only the difference from the last publication is written; the whole
	// set after a failure, or the first time.
	whole := s.published == nil
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		if whole {
			if err := exec(conn, `DELETE FROM ready WHERE clone = ?`, nil, s.Clone()); err != nil {
				return err
			}
		}
		for id := range s.published {
			if _, ok := now[id]; !ok {
				if err := exec(conn, `DELETE FROM ready WHERE clone = ? AND task_id = ?`, nil, s.Clone(), id); err != nil {
					return err
				}
			}
		}
		for _, r := range now {
			if old, ok := s.published[r.TaskID]; ok && old == r {
				continue
			}
			if err := exec(conn, `INSERT INTO ready (clone, task_id, key, wave, sev_rank, created) VALUES (?, ?, ?, ?, ?, ?)
				ON CONFLICT (clone, task_id) DO UPDATE SET key = excluded.key, wave = excluded.wave, sev_rank = excluded.sev_rank,
					created = excluded.created`, nil, s.Clone(), r.TaskID, r.Key, r.Wave, r.SevRank, r.Created); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.published = nil
		return err
	}
	s.published = now
	return nil
}

// GrantNext gives session ses the lease of the first task, in the queue's
// order, of this member's ready rows that no one holds or resolved,
// passing over the ids of skip (claims under way); ErrNoneReady when none.
func (s *Embedded) GrantNext(ctx context.Context, ses Session, skip []string) (Lease, error) {
	var l Lease
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		q := `SELECT r.task_id, r.key, coalesce(l.epoch, 0) FROM ready r LEFT JOIN leases l ON l.task_id = r.task_id
			WHERE r.clone = ? AND (l.state IS NULL OR l.state = 'free')`
		args := []any{s.Clone()}
		if len(skip) > 0 {
			q += ` AND r.task_id NOT IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(skip)), ", ") + `)`
			for _, id := range skip {
				args = append(args, id)
			}
		}
		q += ` ORDER BY r.wave, r.sev_rank, r.created, r.task_id LIMIT 1`
		var id, key string
		var epoch int64
		if err := exec(conn, q, func(st *sqlite.Stmt) error {
			id, key, epoch = st.ColumnText(0), st.ColumnText(1), st.ColumnInt64(2)
			return nil
		}, args...); err != nil {
			return err
		}
		if id == "" {
			return ErrNoneReady
		}
		if err := s.hold(conn, id, key, epoch+1, ses); err != nil {
			return err
		}
		var err error
		l, _, err = s.leaseOf(conn, id)
		return err
	})
	return l, err
}
