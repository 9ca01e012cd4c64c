package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Clone is one snagd of the workspace, as snag team status shows it.
type Clone struct {
	ID       int64     `json:"id"`
	Host     string    `json:"host"`
	Root     string    `json:"root"`
	Branch   string    `json:"branch,omitempty"`
	Version  string    `json:"version,omitempty"`
	Started  time.Time `json:"started"`
	Seen     time.Time `json:"seen"`
	Silent   float64   `json:"silent_sec"` // seconds since its last heartbeat, by the database's clock
	Sessions []string  `json:"sessions,omitempty"`
	Held     int       `json:"held"`
	// Grace is how long it may stay silent before it is swept, in seconds
	// (0: a clone of an older snagd, swept by the sweeper's).
	Grace  float64   `json:"grace_sec,omitempty"`
	Ended  time.Time `json:"ended,omitzero"`
	Reason string    `json:"reason,omitempty"`
}

// Heartbeat tells the others this clone is alive, and records its branch.
// ErrCloneEnded means it was silent past the grace and ended by another:
// its leases are gone, and it must Rejoin.
func (s *Store) Heartbeat(ctx context.Context, branch string) error {
	s.branch.Store(&branch)
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	tag, err := s.beats.Exec(ctx, `UPDATE clones SET seen = now(), branch = $2 WHERE id = $1 AND ended IS NULL`, s.Clone(), branch)
	if err != nil {
		return s.wrap("heartbeat", err)
	}
	s.ok()
	if tag.RowsAffected() == 0 {
		return ErrCloneEnded
	}
	return nil
}

// Swept is what a sweep ended: the clones silent past the grace and the
// leases they held.
type Swept struct {
	Clones []Clone
	Leases []Lease
}

// Sweep ends every other clone of the workspace that has been silent for
// longer than the grace, by the database's clock: their sessions end, the
// tasks they held are freed and their ready rows go, with the reason in
// the audit log.
func (s *Store) Sweep(ctx context.Context) (Swept, error) {
	var out Swept
	err := s.txOn(ctx, s.beats, "sweep silent clones", func(tx pgx.Tx) error {
		// Each clone by its own grace (grace_ms), which it gives its leases
		// up a margin before; a row from before it, by this clone's.
		// FOR UPDATE waits for the grants in flight on those clones (their
		// FOR KEY SHARE, in live), so the leases freed below include every
		// grant they committed; a clone whose heartbeat came meanwhile is
		// no longer silent when the row is read again, and is left.
		rows, err := tx.Query(ctx, `WITH silent AS (
				SELECT id FROM clones WHERE workspace = $1 AND ended IS NULL AND id <> $2
					AND seen < now() - CASE WHEN grace_ms > 0 THEN grace_ms * interval '1 millisecond' ELSE $4::interval END
				FOR UPDATE)
			UPDATE clones c SET ended = now(), end_reason = 'silent for more than '
				|| CASE WHEN c.grace_ms > 0 THEN trim_scale(c.grace_ms / 1000.0)::text || 's' ELSE $3::text END
				|| ' (its snagd stopped heartbeating)'
			FROM silent WHERE c.id = silent.id
			RETURNING c.id, c.host, c.root, c.branch, c.started, c.seen, c.end_reason`,
			s.ws, s.Clone(), s.opts.Grace.String(), interval(s.opts.Grace))
		if err != nil {
			return err
		}
		out.Clones, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Clone, error) {
			var c Clone
			err := r.Scan(&c.ID, &c.Host, &c.Root, &c.Branch, &c.Started, &c.Seen, &c.Reason)
			return c, err
		})
		if err != nil || len(out.Clones) == 0 {
			return err
		}
		ids := make([]int64, len(out.Clones))
		for i, c := range out.Clones {
			ids[i] = c.ID
			// Each clone's own: its sessions, ready rows, claims and
			// leases end with the reason that names its grace.
			if _, err := tx.Exec(ctx, `UPDATE sessions SET ended = now(), end_reason = $2 WHERE clone = $1 AND ended IS NULL`, c.ID, c.Reason); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM ready WHERE clone = $1`, c.ID); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE file_claims SET released = now(), why = $2 WHERE clone = $1 AND released IS NULL`,
				c.ID, "clone gone: "+c.Reason); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM branch_leases WHERE clone = $1`, c.ID); err != nil {
				return err
			}
			freed, err := s.free(ctx, tx, `clone = $2`, "clone gone: "+c.Reason, c.ID)
			if err != nil {
				return err
			}
			out.Leases = append(out.Leases, freed...)
			if err := s.audit(ctx, tx, Entry{Actor: "system", Action: "clone", Outcome: "ended",
				Detail: fmt.Sprintf("%s:%s %s", c.Host, c.Root, c.Reason)}); err != nil {
				return err
			}
			for _, l := range freed {
				if err := s.audit(ctx, tx, Entry{Actor: "system", Agent: l.Holder, Action: "release", TaskID: l.TaskID, Outcome: "ok",
					Detail: "holder's clone gone: " + c.Reason}); err != nil {
					return err
				}
			}
		}
		reason := out.Clones[0].Reason
		return s.notify(ctx, tx, "clone", map[string]any{"ended": ids, "released": len(out.Leases), "reason": reason})
	})
	return out, err
}

// Clones lists the workspace's live clones, with their live sessions and
// how many tasks each holds.
func (s *Store) Clones(ctx context.Context) ([]Clone, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT c.id, c.host, c.root, c.branch, c.version, c.started, c.seen,
			extract(epoch FROM now() - c.seen)::float8, c.grace_ms / 1000.0::float8,
			coalesce((SELECT array_agg(name ORDER BY name) FROM sessions x WHERE x.clone = c.id AND x.ended IS NULL), '{}'),
			(SELECT count(*) FROM leases l WHERE l.clone = c.id AND l.state = 'held')
		FROM clones c WHERE c.workspace = $1 AND c.ended IS NULL ORDER BY c.id`, s.ws)
	if err != nil {
		return nil, s.wrap("list clones", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Clone, error) {
		var c Clone
		err := r.Scan(&c.ID, &c.Host, &c.Root, &c.Branch, &c.Version, &c.Started, &c.Seen, &c.Silent, &c.Grace, &c.Sessions, &c.Held)
		return c, err
	})
	if err != nil {
		return nil, s.wrap("list clones", err)
	}
	s.ok()
	return out, nil
}

// Ready is a task this clone's files say is ready, with the keys of the
// queue's order (wave, severity rank, creation time, id).
type Ready struct {
	TaskID  string
	Key     string
	Wave    int64
	SevRank int64
	Created int64
}

// Publish makes the ready rows of this clone the tasks of ready: rows
// no longer ready go, new and changed ones are written, in one
// transaction. Only the difference from the last publication is sent.
func (s *Store) Publish(ctx context.Context, ready []Ready) error {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	now := make(map[string]Ready, len(ready))
	for _, r := range ready {
		now[r.TaskID] = r
	}
	var gone []string
	var ids, keys []string
	var waves, sevs, created []int64
	for id := range s.published {
		if _, ok := now[id]; !ok {
			gone = append(gone, id)
		}
	}
	whole := s.published == nil
	sent := make(map[string]bool)
	for _, r := range ready { // in the queue's order, the same on every clone, so that two publications lock shared rows in one order
		if old, ok := s.published[r.TaskID]; ok && old == r || now[r.TaskID] != r || sent[r.TaskID] {
			continue
		}
		sent[r.TaskID] = true
		ids, keys, waves, sevs, created = append(ids, r.TaskID), append(keys, r.Key), append(waves, r.Wave), append(sevs, r.SevRank), append(created, r.Created)
	}
	if !whole && len(gone) == 0 && len(ids) == 0 {
		return nil
	}
	err := s.tx(ctx, "publish the ready tasks", func(tx pgx.Tx) error {
		if err := s.live(ctx, tx); err != nil {
			return err
		}
		if whole {
			if _, err := tx.Exec(ctx, `DELETE FROM ready WHERE clone = $1 AND NOT (task_id = ANY($2))`, s.Clone(), keysOf(now)); err != nil {
				return err
			}
		} else if len(gone) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM ready WHERE clone = $1 AND task_id = ANY($2)`, s.Clone(), gone); err != nil {
				return err
			}
		}
		if len(ids) == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, `INSERT INTO ready (clone, task_id, key, wave, sev_rank, created)
			SELECT $1, * FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[])
			ON CONFLICT (clone, task_id) DO UPDATE SET key = excluded.key, wave = excluded.wave,
				sev_rank = excluded.sev_rank, created = excluded.created`, s.Clone(), ids, keys, waves, sevs, created)
		if err != nil {
			return err
		}
		// Every ready task has a lease row, free at epoch 0 until its
		// first grant, for claim-next to lock (GrantNext), with the
		// task's place in the queue's order. Rows whose order is already
		// right are neither written nor locked: a grant passes a locked
		// row by, and a whole publication must not hide the queue from
		// claim-next while it commits.
		_, err = tx.Exec(ctx, `INSERT INTO leases (workspace, task_id, key, epoch, state, wave, sev_rank, created)
			SELECT $1, t.id, t.key, 0, 'free', t.wave, t.sev_rank, t.created
			FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[]) AS t (id, key, wave, sev_rank, created)
			ON CONFLICT (workspace, task_id) DO NOTHING`, s.ws, ids, keys, waves, sevs, created)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE leases l SET wave = t.wave, sev_rank = t.sev_rank, created = t.created
			FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) AS t (id, wave, sev_rank, created)
			WHERE l.workspace = $1 AND l.task_id = t.id
				AND (l.wave, l.sev_rank, l.created) IS DISTINCT FROM (t.wave, t.sev_rank, t.created)`, s.ws, ids, waves, sevs, created)
		return err
	})
	if err != nil {
		s.published = nil // the next publication writes the whole set
		return err
	}
	s.published = now
	return nil
}

func keysOf(m map[string]Ready) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// NextAlias returns the next alias number of kind ("task" for SNAG-n,
// "note" for N-n) from the workspace's sequence, never below floor (the
// next number this clone's own files would give): two clones adding at
// the same time on different branches never get the same number.
func (s *Store) NextAlias(ctx context.Context, kind string, floor int64) (int64, error) {
	var n int64
	err := s.tx(ctx, "allocate a "+kind+" alias", func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `INSERT INTO aliases AS a (workspace, kind, next) VALUES ($1, $2, $3 + 1)
			ON CONFLICT (workspace, kind) DO UPDATE SET next = greatest(a.next, $3) + 1
			RETURNING next - 1`, s.ws, kind, floor).Scan(&n)
	})
	return n, err
}

// GiveBack returns n to kind's sequence when it was the last number taken.
func (s *Store) GiveBack(ctx context.Context, kind string, n int64) error {
	return s.tx(ctx, "give back a "+kind+" alias", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE aliases SET next = $3 WHERE workspace = $1 AND kind = $2 AND next = $3 + 1`, s.ws, kind, n)
		return err
	})
}

// Entry is one line of the shared audit log.
type Entry struct {
	ID    int64  `json:"id"`
	Clone int64  `json:"clone,omitempty"`
	Host  string `json:"host,omitempty"`
	// Root is the folder of the member that wrote it (read back only).
	Root string `json:"root,omitempty"`
	// Log and Local are the id of the member's own log (its snag.db's
	// audit) and the entry's id there; empty and 0 for an entry the store
	// made itself (a sweep's).
	Log     string    `json:"log,omitempty"`
	Local   int64     `json:"local,omitempty"`
	At      time.Time `json:"at"`
	Session int64     `json:"session,omitempty"`
	Actor   string    `json:"actor"`
	Agent   string    `json:"agent,omitempty"`
	Action  string    `json:"action"`
	TaskID  string    `json:"task_id,omitempty"`
	Outcome string    `json:"outcome,omitempty"`
	Detail  string    `json:"detail,omitempty"`
	Branch  string    `json:"branch,omitempty"`
}

// Audit appends e to the shared audit log as this clone's.
func (s *Store) Audit(ctx context.Context, e Entry) error {
	return s.tx(ctx, "audit", func(tx pgx.Tx) error { return s.audit(ctx, tx, e) })
}

func (s *Store) audit(ctx context.Context, tx pgx.Tx, e Entry) error {
	_, err := tx.Exec(ctx, auditInsert, s.auditArgs(e)...)
	return err
}

// auditInsert and auditArgs write one entry as this clone's, at its own
// time.
const auditInsert = `INSERT INTO audit (workspace, clone, at, session, actor, agent, action, task_id, outcome, detail, branch, log, local)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`

func (s *Store) auditArgs(e Entry) []any {
	at := e.At
	if at.IsZero() {
		at = time.Now()
	}
	return []any{s.ws, s.Clone(), at, e.Session, e.Actor, e.Agent, e.Action, e.TaskID, e.Outcome, e.Detail, e.Branch, e.Log, e.Local}
}

// AuditLog returns the workspace's audit entries after id after, oldest
// first, at most limit.
func (s *Store) AuditLog(ctx context.Context, after int64, limit int) ([]Entry, error) {
	return s.auditRead(ctx, `WHERE a.workspace = $1 AND a.id > $2 ORDER BY a.id LIMIT $3`, s.ws, after, limit)
}

// AuditTail returns the workspace's latest n audit entries, oldest first.
func (s *Store) AuditTail(ctx context.Context, n int) ([]Entry, error) {
	es, err := s.auditRead(ctx, `WHERE a.workspace = $1 ORDER BY a.id DESC LIMIT $2`, s.ws, n)
	slices.Reverse(es)
	return es, err
}

func (s *Store) auditRead(ctx context.Context, where string, args ...any) ([]Entry, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT a.id, coalesce(a.clone, 0), coalesce(c.host, ''), coalesce(c.root, ''), a.log, a.local, a.at,
			a.session, a.actor, a.agent, a.action, a.task_id, a.outcome, a.detail, a.branch
		FROM audit a LEFT JOIN clones c ON c.id = a.clone `+where, args...)
	if err != nil {
		return nil, s.wrap("read the audit log", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) {
		var e Entry
		err := r.Scan(&e.ID, &e.Clone, &e.Host, &e.Root, &e.Log, &e.Local, &e.At, &e.Session, &e.Actor, &e.Agent, &e.Action,
			&e.TaskID, &e.Outcome, &e.Detail, &e.Branch)
		return e, err
	})
	if err != nil {
		return nil, s.wrap("read the audit log", err)
	}
	s.ok()
	return out, nil
}

// AuditSent is the id of the last entry of the log named log that the
// store took (0: none).
func (s *Store) AuditSent(ctx context.Context, log string) (int64, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(local), 0) FROM audit WHERE log = $1 AND local > 0`, log).Scan(&n)
	if err != nil {
		return 0, s.wrap("read the audit log", err)
	}
	s.ok()
	return n, nil
}

// Event is a change of the shared state, as LISTEN/NOTIFY carries it.
type Event struct {
	Clone  int64           `json:"c"`
	Host   string          `json:"h,omitempty"` // the clone's machine
	Branch string          `json:"b,omitempty"` // the clone's branch
	Kind   string          `json:"k"`
	Data   json.RawMessage `json:"d"`
	// At is when this clone received it.
	At time.Time `json:"-"`
}

// channel is the NOTIFY channel of workspace ws.
func channel(ws int64) string { return "snag_ws_" + strconv.FormatInt(ws, 10) }

// maxPayload keeps a notification under PostgreSQL's limit of 8,000 bytes.
const maxPayload = 7900

// notify sends an event of this clone's to every clone of the
// workspace when tx commits.
func (s *Store) notify(ctx context.Context, tx pgx.Tx, kind string, data any) error {
	d, err := json.Marshal(data)
	if err != nil {
		return err
	}
	b, err := json.Marshal(Event{Clone: s.Clone(), Host: s.opts.Host, Branch: s.Branch(), Kind: kind, Data: d})
	if err != nil {
		return err
	}
	if len(b) > maxPayload {
		b, _ = json.Marshal(Event{Clone: s.Clone(), Host: s.opts.Host, Branch: s.Branch(), Kind: kind, Data: json.RawMessage(`{"truncated":true}`)})
	}
	_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel(s.ws), string(b))
	return err
}

// Notify sends an event of kind with data to every clone.
func (s *Store) Notify(ctx context.Context, kind string, data any) error {
	return s.tx(ctx, "notify", func(tx pgx.Tx) error { return s.notify(ctx, tx, kind, data) })
}

// Listen calls f with every event of the workspace, its own clone's too,
// until ctx ends. It holds a connection of its own; when that is lost it
// connects again (every second, until it can), and then calls f with an
// event of kind "resync": what happened meanwhile was not heard, and the
// caller reads the state again.
func (s *Store) Listen(ctx context.Context, f func(Event)) error {
	cfg, err := s.config()
	if err != nil {
		return err
	}
	first := true
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, cfg.ConnConfig, f, first)
		if ctx.Err() != nil {
			return nil
		}
		first = false
		_ = err // the state is read again once it is back
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

func (s *Store) listenOnce(ctx context.Context, cfg *pgx.ConnConfig, f func(Event), first bool) error {
	cctx, cancel := s.deadline(ctx)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err == nil {
		_, err = conn.Exec(cctx, `LISTEN `+channel(s.ws))
	}
	cancel()
	if err != nil {
		if conn != nil {
			conn.Close(context.Background())
		}
		return s.wrap("listen", err)
	}
	defer conn.Close(context.Background())
	if !first {
		f(Event{Kind: "resync", At: time.Now()})
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return s.wrap("listen", err)
		}
		var e Event
		if json.Unmarshal([]byte(n.Payload), &e) != nil {
			continue
		}
		e.At = time.Now()
		f(e)
	}
}
