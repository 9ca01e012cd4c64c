package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The states of a task's lease row.
const (
	Held = "held" // a session of a live clone holds it
	Free = "free" // released: the next grant moves the epoch on
	Done = "done" // resolved: no clone may claim it until a person reopens it
)

// Lease is the shared lease of one task.
type Lease struct {
	TaskID  string    `json:"task_id"`
	Key     string    `json:"key"`
	Epoch   int64     `json:"epoch"`
	State   string    `json:"state"`
	Clone   int64     `json:"clone,omitempty"`
	Session int64     `json:"session,omitempty"`
	Holder  string    `json:"holder,omitempty"`
	Host    string    `json:"host,omitempty"` // the holding clone's machine
	Branch  string    `json:"branch,omitempty"`
	Updated time.Time `json:"updated"`
	Why     string    `json:"why,omitempty"`
}

// Session is an agent's session as its clone registers it.
type Session struct {
	ID     int64  // the id its clone's snagd gave it
	Name   string // VESPER, ORCA ...
	Client string
	Branch string
}

// Register records a session of this clone, or its new name. A name a
// live session of another clone has is refused with ErrNameTaken,
// naming its machine.
func (s *Store) Register(ctx context.Context, ses Session) error {
	return s.tx(ctx, "register session", func(tx pgx.Tx) error {
		if err := s.live(ctx, tx); err != nil {
			return err
		}
		var host string
		err := tx.QueryRow(ctx, `SELECT c.host FROM sessions x JOIN clones c ON c.id = x.clone
			WHERE x.workspace = $1 AND x.name = $2 AND x.ended IS NULL AND NOT (x.clone = $3 AND x.id = $4)`,
			s.ws, ses.Name, s.Clone(), ses.ID).Scan(&host)
		if err == nil {
			return fmt.Errorf("%w: %s is live on %s", ErrNameTaken, ses.Name, host)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO sessions (clone, id, workspace, name, client, branch) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (clone, id) DO UPDATE SET name = excluded.name, client = excluded.client, branch = excluded.branch,
				ended = NULL, end_reason = ''`, s.Clone(), ses.ID, s.ws, ses.Name, ses.Client, ses.Branch)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" { // registered meanwhile by another clone
			return fmt.Errorf("%w: %s was just taken on another clone", ErrNameTaken, ses.Name)
		}
		if err != nil {
			return err
		}
		return s.notify(ctx, tx, "session", map[string]any{"name": ses.Name, "started": true})
	})
}

// LiveSessions lists the ids of this clone's sessions the store has live.
func (s *Store) LiveSessions(ctx context.Context) ([]int64, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT id FROM sessions WHERE clone = $1 AND ended IS NULL ORDER BY id`, s.Clone())
	if err != nil {
		return nil, s.wrap("list this clone's sessions", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, s.wrap("list this clone's sessions", err)
	}
	s.ok()
	return ids, nil
}

// EndSession ends a session of this clone and frees every task it held,
// returning those leases as they were.
func (s *Store) EndSession(ctx context.Context, id int64, why string) ([]Lease, error) {
	var freed []Lease
	err := s.tx(ctx, "end session", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE sessions SET ended = now(), end_reason = $3 WHERE clone = $1 AND id = $2 AND ended IS NULL`,
			s.Clone(), id, why)
		if err != nil {
			return err
		}
		freed, err = s.free(ctx, tx, `clone = $2 AND session = $3`, "holder gone: "+why, s.Clone(), id)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE file_claims SET released = now(), why = $3
			WHERE clone = $1 AND session = $2 AND released IS NULL`, s.Clone(), id, "holder gone: "+why); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM branch_leases WHERE clone = $1 AND session = $2`, s.Clone(), id); err != nil {
			return err
		}
		return s.notify(ctx, tx, "session", map[string]any{"id": id, "ended": true, "released": len(freed)})
	})
	return freed, err
}

// free frees the held leases of the workspace that match where (whose
// parameters start at $2), returning them as they were.
func (s *Store) free(ctx context.Context, tx pgx.Tx, where, why string, args ...any) ([]Lease, error) {
	rows, err := tx.Query(ctx, `UPDATE leases SET state = 'free', updated = now(), why = $`+fmt.Sprint(len(args)+2)+`
		WHERE workspace = $1 AND state = 'held' AND `+where+`
		RETURNING task_id, key, epoch, 'held', clone, session, holder, updated, why`,
		append(append([]any{s.ws}, args...), why)...)
	if err != nil {
		return nil, err
	}
	freed, err := scanLeases(rows)
	if err != nil {
		return nil, err
	}
	for _, l := range freed {
		if err := s.notify(ctx, tx, "lease", map[string]any{"task": l.Key, "id": l.TaskID, "ended": true, "reason": why}); err != nil {
			return nil, err
		}
	}
	return freed, nil
}

func scanLeases(rows pgx.Rows) ([]Lease, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Lease, error) {
		var l Lease
		var clone, session *int64
		err := r.Scan(&l.TaskID, &l.Key, &l.Epoch, &l.State, &clone, &session, &l.Holder, &l.Updated, &l.Why)
		if clone != nil {
			l.Clone = *clone
		}
		if session != nil {
			l.Session = *session
		}
		return l, err
	})
}

// live checks, inside tx, that this clone has not been ended, and locks
// its row against a sweep that would end it meanwhile. The lock is FOR
// KEY SHARE, which the sweep's FOR UPDATE waits for but the heartbeat's
// plain UPDATE of seen does not: with FOR SHARE, a clone's heartbeat
// queued behind its own grants, and under many claims it missed the grace
// and the others swept a clone that was alive.
func (s *Store) live(ctx context.Context, tx pgx.Tx) error {
	var ok bool
	err := tx.QueryRow(ctx, `SELECT ended IS NULL FROM clones WHERE id = $1 FOR KEY SHARE`, s.Clone()).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && !ok {
		return ErrCloneEnded
	}
	return err
}

// Grant gives session ses of this clone the lease of task id (key is its
// alias, for the others' eyes) in one transaction, and returns it with
// its new epoch. A task held by another session is refused with ErrHeld
// naming the holder; one resolved through another clone with ErrDone. A
// session that holds the task already gets its lease as it is.
func (s *Store) Grant(ctx context.Context, id, key string, ses Session) (Lease, error) {
	var l Lease
	err := s.tx(ctx, "grant "+key, func(tx pgx.Tx) error {
		if err := s.live(ctx, tx); err != nil {
			return err
		}
		var err error
		l, err = s.grant(ctx, tx, id, key, ses)
		return err
	})
	return l, err
}

// grant is Grant inside tx.
func (s *Store) grant(ctx context.Context, tx pgx.Tx, id, key string, ses Session) (Lease, error) {
	var l Lease
	err := tx.QueryRow(ctx, `INSERT INTO leases AS l (workspace, task_id, key, epoch, state, clone, session, holder)
		VALUES ($1, $2, $3, 1, 'held', $4, $5, $6)
		ON CONFLICT (workspace, task_id) DO UPDATE SET epoch = l.epoch + 1, state = 'held', key = excluded.key,
			clone = excluded.clone, session = excluded.session, holder = excluded.holder, updated = now(), why = ''
		WHERE l.state = 'free'
		RETURNING task_id, key, epoch, state, holder, updated`, s.ws, id, key, s.Clone(), ses.ID, ses.Name).
		Scan(&l.TaskID, &l.Key, &l.Epoch, &l.State, &l.Holder, &l.Updated)
	if err == nil {
		l.Clone, l.Session = s.Clone(), ses.ID
		return l, s.notify(ctx, tx, "lease", map[string]any{"task": key, "id": id, "holder": ses.Name, "epoch": l.Epoch})
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return l, err
	}
	// Held or done: say by whom.
	cur, err := s.leaseOf(ctx, tx, id)
	if err != nil {
		return l, err
	}
	switch {
	case cur.State == Done:
		return cur, fmt.Errorf("%w: %s was resolved through %s (branch %s): pull to see it, or ask a person to reopen it", ErrDone, key, cur.Host, orNone(cur.Branch))
	case cur.Clone == s.Clone() && cur.Session == ses.ID:
		return cur, nil
	default:
		return cur, fmt.Errorf("%w: %s holds it (on %s)", ErrHeld, cur.Holder, cur.Host)
	}
}

func orNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// GrantAt gives session ses of this clone the lease of task id at epoch
// exactly, when no clone holds or resolved it and no grant since went past
// that epoch: a clone taking back, after a restart, the leases its files
// and snag.db still show, so that its agents' epochs stay good. A lease
// done at that very epoch is taken back too: only its holder's clone ends
// a lease at its epoch, so it is an end this clone told the store first
// whose commit never happened (snagd stopped in between; see End). It
// fails with ErrHeld, ErrDone or ErrStale (granted to another since)
// otherwise.
func (s *Store) GrantAt(ctx context.Context, id, key string, ses Session, epoch int64) (Lease, error) {
	var l Lease
	err := s.tx(ctx, "take back "+key, func(tx pgx.Tx) error {
		if err := s.live(ctx, tx); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `INSERT INTO leases AS l (workspace, task_id, key, epoch, state, clone, session, holder)
			VALUES ($1, $2, $3, $4, 'held', $5, $6, $7)
			ON CONFLICT (workspace, task_id) DO UPDATE SET epoch = excluded.epoch, state = 'held', key = excluded.key,
				clone = excluded.clone, session = excluded.session, holder = excluded.holder, updated = now(), why = ''
			WHERE l.state = 'free' AND l.epoch <= excluded.epoch
			   OR l.state = 'held' AND l.clone = excluded.clone AND l.epoch = excluded.epoch
			   OR l.state = 'done' AND l.epoch = excluded.epoch
			RETURNING task_id, key, epoch, state, holder, updated`, s.ws, id, key, epoch, s.Clone(), ses.ID, ses.Name).
			Scan(&l.TaskID, &l.Key, &l.Epoch, &l.State, &l.Holder, &l.Updated)
		if err == nil {
			l.Clone, l.Session = s.Clone(), ses.ID
			return s.notify(ctx, tx, "lease", map[string]any{"task": key, "id": id, "holder": ses.Name, "epoch": l.Epoch})
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		cur, err := s.leaseOf(ctx, tx, id)
		if err != nil {
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

// Transfer moves task id's lease, held by this clone at epoch, to session
// ses of this clone under a new epoch (a handoff): the old holder's later
// writes are stale. It fails with ErrStale when the lease moved meanwhile.
func (s *Store) Transfer(ctx context.Context, id string, epoch int64, ses Session) (Lease, error) {
	var l Lease
	err := s.tx(ctx, "hand off "+id, func(tx pgx.Tx) error {
		if err := s.live(ctx, tx); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `UPDATE leases SET epoch = epoch + 1, session = $5, holder = $6, updated = now()
			WHERE workspace = $1 AND task_id = $2 AND clone = $3 AND epoch = $4 AND state = 'held'
			RETURNING task_id, key, epoch, state, holder, updated`, s.ws, id, s.Clone(), epoch, ses.ID, ses.Name).
			Scan(&l.TaskID, &l.Key, &l.Epoch, &l.State, &l.Holder, &l.Updated)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s is not held by this clone at epoch %d", ErrStale, id, epoch)
		}
		if err != nil {
			return err
		}
		l.Clone, l.Session = s.Clone(), ses.ID
		return s.notify(ctx, tx, "lease", map[string]any{"task": l.Key, "id": id, "holder": ses.Name, "epoch": l.Epoch, "handoff": true})
	})
	return l, err
}

// Adopt moves task id's lease, held by this clone at epoch, to session
// ses: an agent that registered again and took its work back.
func (s *Store) Adopt(ctx context.Context, id string, epoch int64, ses Session) error {
	return s.tx(ctx, "adopt "+id, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE leases SET session = $5, holder = $6, updated = now()
			WHERE workspace = $1 AND task_id = $2 AND clone = $3 AND epoch = $4 AND state = 'held'`,
			s.ws, id, s.Clone(), epoch, ses.ID, ses.Name)
		if err == nil && tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: %s is not held by this clone at epoch %d", ErrStale, id, epoch)
		}
		return err
	})
}

// leaseOf reads task id's lease row with its clone's host and branch.
func (s *Store) leaseOf(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, id string) (Lease, error) {
	var l Lease
	var clone, session *int64
	var host, branch *string
	err := q.QueryRow(ctx, `SELECT l.task_id, l.key, l.epoch, l.state, l.clone, l.session, l.holder, l.updated, l.why, c.host, c.branch
		FROM leases l LEFT JOIN clones c ON c.id = l.clone WHERE l.workspace = $1 AND l.task_id = $2`, s.ws, id).
		Scan(&l.TaskID, &l.Key, &l.Epoch, &l.State, &clone, &session, &l.Holder, &l.Updated, &l.Why, &host, &branch)
	if clone != nil {
		l.Clone = *clone
	}
	if session != nil {
		l.Session = *session
	}
	if host != nil {
		l.Host = *host
	}
	if branch != nil {
		l.Branch = *branch
	}
	return l, err
}

// LeaseOf returns task id's shared lease; a task never claimed has the
// state Free and epoch 0.
func (s *Store) LeaseOf(ctx context.Context, id string) (Lease, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	l, err := s.leaseOf(ctx, s.pool, id)
	if errors.Is(err, pgx.ErrNoRows) {
		s.ok()
		return Lease{TaskID: id, State: Free}, nil
	}
	if err != nil {
		return l, s.wrap("read the lease of "+id, err)
	}
	s.ok()
	return l, nil
}

// GrantNext gives session ses the lease of the first task in the queue's
// order that this clone's files say is ready and that no one holds or
// resolved, skipping the ids skip names (claims under way), or
// ErrNoneReady. It is one statement, one round trip: it walks the free
// lease rows (free at epoch 0 from the publication of the ready tasks on)
// in the queue's order, as the last clone to publish each task has it,
// through a partial index, so tasks done or held elsewhere cost nothing.
// It takes the first this clone has ready, locking it FOR UPDATE SKIP
// LOCKED, so a task another
// grant is taking at this moment, on any clone, is passed by, not waited
// for, and a row granted since the statement's snapshot is read again and
// passed. The clone's row is locked as live does, and the grant's event
// is sent in the same transaction.
func (s *Store) GrantNext(ctx context.Context, ses Session, skip []string) (Lease, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	skip = append([]string{}, skip...) // never NULL: NOT (id = ANY(NULL)) passes nothing
	var live bool
	var l Lease
	var id, key, state, holder *string
	var epoch *int64
	var updated *time.Time
	err := s.pool.QueryRow(ctx, `WITH alive AS (
			SELECT id FROM clones WHERE id = $1 AND ended IS NULL FOR KEY SHARE
		), pick AS (
			SELECT l.task_id FROM leases l
			WHERE l.workspace = $2 AND l.state = 'free' AND NOT (l.task_id = ANY($3)) AND EXISTS (SELECT 1 FROM alive)
				AND EXISTS (SELECT 1 FROM ready r WHERE r.clone = $1 AND r.task_id = l.task_id)
			ORDER BY l.wave, l.sev_rank, l.created, l.task_id
			LIMIT 1
			FOR UPDATE OF l SKIP LOCKED
		), granted AS (
			UPDATE leases l SET epoch = l.epoch + 1, state = 'held', clone = $1, session = $4, holder = $5, updated = now(), why = ''
			FROM pick WHERE l.workspace = $2 AND l.task_id = pick.task_id
			RETURNING l.task_id, l.key, l.epoch, l.state, l.holder, l.updated
		)
		SELECT EXISTS (SELECT 1 FROM alive), g.task_id, g.key, g.epoch, g.state, g.holder, g.updated,
			CASE WHEN g.task_id IS NOT NULL THEN pg_notify($6, json_build_object('c', $1::bigint, 'h', $7::text, 'b', $8::text, 'k', 'lease',
				'd', json_build_object('task', g.key, 'id', g.task_id, 'holder', g.holder, 'epoch', g.epoch))::text) END
		FROM (VALUES (1)) AS one LEFT JOIN granted g ON true`,
		s.Clone(), s.ws, skip, ses.ID, ses.Name, channel(s.ws), s.opts.Host, s.Branch()).
		Scan(&live, &id, &key, &epoch, &state, &holder, &updated, nil)
	if err != nil {
		return l, s.wrap("grant the next task", err)
	}
	s.ok()
	switch {
	case !live:
		return l, ErrCloneEnded
	case id == nil:
		return l, ErrNoneReady
	}
	l = Lease{TaskID: *id, Key: *key, Epoch: *epoch, State: *state, Holder: *holder, Updated: *updated, Clone: s.Clone(), Session: ses.ID}
	return l, nil
}

// Check verifies that this clone's session holds task id under epoch (0:
// whichever epoch is live), for a write fenced by it: ErrStale when the
// lease ended, was granted again, or this clone was ended.
func (s *Store) Check(ctx context.Context, id string, epoch int64, session int64) (Lease, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	l, err := s.leaseOf(ctx, s.pool, id)
	if errors.Is(err, pgx.ErrNoRows) {
		s.ok()
		return l, held(l, false, id, s.Clone(), session, epoch)
	}
	if err != nil {
		return l, s.wrap("check the lease of "+id, err)
	}
	s.ok()
	return l, held(l, true, id, s.Clone(), session, epoch)
}

// held is Check's verdict on lease l of task id (found: there is a row):
// nil when session of member clone holds it under epoch (0: whichever),
// else ErrStale saying how it stands.
func held(l Lease, found bool, id string, clone, session, epoch int64) error {
	switch {
	case !found:
		return fmt.Errorf("%w: %s is not held", ErrStale, id)
	case l.State != Held || l.Clone != clone || l.Session != session || epoch != 0 && l.Epoch != epoch:
		return fmt.Errorf("%w: %s is %s at epoch %d (held by %s on %s)", ErrStale, l.Key, l.State, l.Epoch, orNone(l.Holder), orNone(l.Host))
	}
	return nil
}

// Release frees task id, held by this clone's session under epoch (0:
// whichever is live); the next grant moves the epoch on.
func (s *Store) Release(ctx context.Context, id string, epoch, session int64, why string) error {
	return s.end(ctx, id, epoch, session, Free, why)
}

// Resolve marks task id done, held by this clone's session under epoch:
// no clone may claim it until a person reopens it.
func (s *Store) Resolve(ctx context.Context, id string, epoch, session int64, why string) error {
	return s.end(ctx, id, epoch, session, Done, why)
}

// End ends task id's lease held by this clone under epoch, whichever of
// its sessions holds it, putting it in state Free or Done: snagd's own
// ends (a holder gone, a verify's outcome, a person's move in this clone).
func (s *Store) End(ctx context.Context, id string, epoch int64, state, why string) error {
	return s.end(ctx, id, epoch, 0, state, why)
}

func (s *Store) end(ctx context.Context, id string, epoch, session int64, state, why string) error {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	// One statement, one round trip, as GrantNext: the clone's row locked
	// as live does, the lease ended, and its event sent.
	var live bool
	var key *string
	err := s.pool.QueryRow(ctx, `WITH alive AS (
			SELECT id FROM clones WHERE id = $3 AND ended IS NULL FOR KEY SHARE
		), ended AS (
			UPDATE leases SET state = $6, updated = now(), why = $7
			WHERE workspace = $1 AND task_id = $2 AND state = 'held' AND clone = $3 AND ($4 = 0 OR session = $4) AND ($5 = 0 OR epoch = $5)
			AND EXISTS (SELECT 1 FROM alive)
			RETURNING key
		)
		SELECT EXISTS (SELECT 1 FROM alive), e.key,
			CASE WHEN e.key IS NOT NULL THEN pg_notify($8, json_build_object('c', $3::bigint, 'h', $9::text, 'b', $10::text, 'k', 'lease',
				'd', json_build_object('task', e.key, 'id', $2::text, 'state', $6::text, 'reason', left($7::text, 1000)))::text) END
		FROM (VALUES (1)) AS one LEFT JOIN ended e ON true`,
		s.ws, id, s.Clone(), session, epoch, state, why, channel(s.ws), s.opts.Host, s.Branch()).Scan(&live, &key, nil)
	if err != nil {
		return s.wrap(state+" "+id, err)
	}
	s.ok()
	switch {
	case !live:
		return ErrCloneEnded
	case key == nil:
		l, _ := s.leaseOf(ctx, s.pool, id)
		return fmt.Errorf("%w: %s is %s at epoch %d", ErrStale, id, orNone(l.State), l.Epoch)
	}
	return nil
}

// Unend takes back an end this clone told the store before the commit
// that was to make it (End to Done at epoch), when that commit failed or
// did not finish the task: the lease, still done at epoch, is held again
// by session ses of this clone (hold) or free. A lease that moved on since
// (a person's Set) is left as it is, and so is one never ended.
func (s *Store) Unend(ctx context.Context, id string, epoch int64, ses Session, hold bool) error {
	return s.tx(ctx, "take back the end of "+id, func(tx pgx.Tx) error {
		if err := s.live(ctx, tx); err != nil {
			return err
		}
		state, session := Free, any(nil)
		if hold {
			state, session = Held, ses.ID
		}
		var key string
		err := tx.QueryRow(ctx, `UPDATE leases SET state = $4, clone = $5, session = $6, holder = $7, updated = now(), why = ''
			WHERE workspace = $1 AND task_id = $2 AND state = 'done' AND epoch = $3
			RETURNING key`, s.ws, id, epoch, state, s.Clone(), session, ses.Name).Scan(&key)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		return s.notify(ctx, tx, "lease", map[string]any{"task": key, "id": id, "state": state, "epoch": epoch, "reason": "the end was not committed"})
	})
}

// MarkDone puts task id's lease in state Done when it is free at an
// epoch no later than epoch, or still held by this clone at epoch: a
// resolve this clone committed whose end the store never heard (snagd
// stopped in between), so that no clone grants the task again. A lease
// granted since, or done already, is left as it is.
func (s *Store) MarkDone(ctx context.Context, id string, epoch int64, why string) (bool, error) {
	var changed bool
	err := s.tx(ctx, "mark "+id+" done", func(tx pgx.Tx) error {
		var key string
		err := tx.QueryRow(ctx, `UPDATE leases SET state = 'done', updated = now(), why = $5
			WHERE workspace = $1 AND task_id = $2 AND epoch <= $3
			AND (state = 'free' OR (state = 'held' AND clone = $4 AND epoch = $3))
			RETURNING key`, s.ws, id, epoch, s.Clone(), why).Scan(&key)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		changed = true
		return s.notify(ctx, tx, "lease", map[string]any{"task": key, "id": id, "state": Done, "reason": why})
	})
	return changed, err
}

// Set puts task id's lease in state Free or Done under a new epoch,
// whoever holds it, on behalf of a person or of snagd itself (a person's
// release, a reopen, a task moved by hand): a held lease ends and its
// holder's later writes are stale.
func (s *Store) Set(ctx context.Context, id, key, state, why string) error {
	if state != Free && state != Done {
		return fmt.Errorf("coord: set %s to %q: only %q and %q can be set", key, state, Free, Done)
	}
	return s.tx(ctx, state+" "+key, func(tx pgx.Tx) error {
		// The epoch moves on: a holder's later writes, a clone's take-back
		// at its old epoch and a late "done" all come after a person's
		// decision, and are refused.
		_, err := tx.Exec(ctx, `INSERT INTO leases AS l (workspace, task_id, key, epoch, state, why, clone) VALUES ($1, $2, $3, 1, $4, $5, $6)
			ON CONFLICT (workspace, task_id) DO UPDATE SET state = excluded.state, epoch = l.epoch + 1, updated = now(), why = excluded.why,
				clone = $6, session = NULL`, s.ws, id, key, state, why, s.Clone())
		if err != nil {
			return err
		}
		return s.notify(ctx, tx, "lease", map[string]any{"task": key, "id": id, "state": state, "reason": why})
	})
}

// Leases lists the workspace's held leases, with their clones' hosts.
func (s *Store) Leases(ctx context.Context) ([]Lease, error) {
	return s.leases(ctx, `l.state = 'held'`)
}

// Mine lists the leases this clone holds.
func (s *Store) Mine(ctx context.Context) ([]Lease, error) {
	return s.leases(ctx, `l.state = 'held' AND l.clone = `+fmt.Sprint(s.Clone()))
}

func (s *Store) leases(ctx context.Context, where string) ([]Lease, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT l.task_id, l.key, l.epoch, l.state, coalesce(l.clone, 0), coalesce(l.session, 0),
		l.holder, l.updated, l.why, coalesce(c.host, ''), coalesce(c.branch, '')
		FROM leases l LEFT JOIN clones c ON c.id = l.clone WHERE l.workspace = $1 AND `+where+` ORDER BY l.task_id`, s.ws)
	if err != nil {
		return nil, s.wrap("list leases", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Lease, error) {
		var l Lease
		err := r.Scan(&l.TaskID, &l.Key, &l.Epoch, &l.State, &l.Clone, &l.Session, &l.Holder, &l.Updated, &l.Why, &l.Host, &l.Branch)
		return l, err
	})
	if err != nil {
		return nil, s.wrap("list leases", err)
	}
	s.ok()
	return out, nil
}

// Finished lists the tasks that are done in the shared state, by id: a
// clone whose files are behind still shows them open.
func (s *Store) Finished(ctx context.Context) (map[string]bool, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT task_id FROM leases WHERE workspace = $1 AND state = 'done'`, s.ws)
	if err != nil {
		return nil, s.wrap("list resolved tasks", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, s.wrap("list resolved tasks", err)
	}
	s.ok()
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}
