package coord

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"zombiezen.com/go/sqlite"
)

// Register records a session of this member, or its new name.
func (s *Embedded) Register(ctx context.Context, ses Session) error {
	return s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		host := ""
		err := exec(conn, `SELECT c.host FROM sessions x JOIN clones c ON c.id = x.clone
			WHERE x.name = ? AND x.ended IS NULL AND NOT (x.clone = ? AND x.id = ?)`,
			func(st *sqlite.Stmt) error { host = st.ColumnText(0); return nil }, ses.Name, s.Clone(), ses.ID)
		if err != nil {
			return err
		}
		if host != "" {
			return fmt.Errorf("%w: %s is live on %s", ErrNameTaken, ses.Name, host)
		}
		return exec(conn, `INSERT INTO sessions (clone, id, name, client, branch, started) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (clone, id) DO UPDATE SET name = excluded.name, client = excluded.client, branch = excluded.branch,
				ended = NULL, end_reason = ''`, nil, s.Clone(), ses.ID, ses.Name, ses.Client, ses.Branch, now())
	})
}

// EndSession ends a session of this member and frees every task it held,
// returning those leases as they were.
func (s *Embedded) EndSession(ctx context.Context, id int64, why string) ([]Lease, error) {
	var freed []Lease
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		t := now()
		if err := exec(conn, `UPDATE sessions SET ended = ?, end_reason = ? WHERE clone = ? AND id = ? AND ended IS NULL`, nil, t, why, s.Clone(), id); err != nil {
			return err
		}
		var err error
		if freed, err = s.free(conn, `clone = ? AND session = ?`, "holder gone: "+why, s.Clone(), id); err != nil {
			return err
		}
		if err := exec(conn, `UPDATE file_claims SET released = ?, why = ? WHERE clone = ? AND session = ? AND released IS NULL`, nil,
			t, "holder gone: "+why, s.Clone(), id); err != nil {
			return err
		}
		return exec(conn, `DELETE FROM branch_leases WHERE clone = ? AND session = ?`, nil, s.Clone(), id)
	})
	return freed, err
}

// LiveSessions lists the ids of this member's live sessions.
func (s *Embedded) LiveSessions(ctx context.Context) ([]int64, error) {
	var ids []int64
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `SELECT id FROM sessions WHERE clone = ? AND ended IS NULL ORDER BY id`,
			func(st *sqlite.Stmt) error { ids = append(ids, st.ColumnInt64(0)); return nil }, s.Clone())
	})
	return ids, err
}

// LiveNames lists the names of the other live members' live sessions.
func (s *Embedded) LiveNames(ctx context.Context) ([]string, error) {
	var names []string
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `SELECT x.name FROM sessions x JOIN clones c ON c.id = x.clone
			WHERE x.clone <> ? AND x.ended IS NULL AND c.ended IS NULL ORDER BY x.name`,
			func(st *sqlite.Stmt) error { names = append(names, st.ColumnText(0)); return nil }, s.Clone())
	})
	return names, err
}

// fileClaims reads the live, unexpired claims (and where, when given).
func (s *Embedded) fileClaims(conn *sqlite.Conn, where string, args ...any) ([]FileClaim, error) {
	if where != "" {
		where = " AND " + where
	}
	var out []FileClaim
	err := exec(conn, `SELECT f.id, f.clone, coalesce(c.host, ''), f.session, f.holder, f.path, f.task_id, f.exclusive, f.acquired, f.expires
		FROM file_claims f LEFT JOIN clones c ON c.id = f.clone
		WHERE f.released IS NULL AND f.expires > ?`+where+` ORDER BY f.path, f.id`, func(st *sqlite.Stmt) error {
		out = append(out, FileClaim{ID: st.ColumnInt64(0), Clone: st.ColumnInt64(1), Host: st.ColumnText(2), Session: st.ColumnInt64(3),
			Holder: st.ColumnText(4), Path: st.ColumnText(5), TaskID: st.ColumnText(6), Exclusive: st.ColumnBool(7),
			Acquired: unix(st.ColumnInt64(8)), Expires: unix(st.ColumnInt64(9))})
		return nil
	}, append([]any{now()}, args...)...)
	return out, err
}

// ClaimFiles claims r's paths for a session of this member, all or
// nothing, against every other session's live claims.
func (s *Embedded) ClaimFiles(ctx context.Context, r FilesRequest, overlap func(a, b string) bool) (FilesResult, error) {
	var res FilesResult
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		res = FilesResult{}
		if err := s.live(conn); err != nil {
			return err
		}
		live, err := s.fileClaims(conn, "")
		if err != nil {
			return err
		}
		var own map[string]FileClaim
		if own, res.Conflicts = inTheWay(live, s.Clone(), r, overlap); len(res.Conflicts) > 0 {
			return nil
		}
		t := now()
		expires := t + r.TTL.Nanoseconds()
		for _, p := range r.Paths {
			c := FileClaim{Clone: s.Clone(), Host: s.opts.Host, Session: r.Session.ID, Holder: r.Session.Name, Path: p, TaskID: r.TaskID,
				Exclusive: r.Exclusive, Expires: unix(expires)}
			if old, ok := own[p]; ok {
				err = exec(conn, `UPDATE file_claims SET expires = ?, exclusive = ?, task_id = ? WHERE id = ?`, nil, expires, r.Exclusive, r.TaskID, old.ID)
				c.ID, c.Acquired = old.ID, old.Acquired
				res.Renewed++
			} else {
				err = exec(conn, `INSERT INTO file_claims (clone, session, holder, path, task_id, exclusive, acquired, expires) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, nil,
					s.Clone(), r.Session.ID, r.Session.Name, p, r.TaskID, r.Exclusive, t, expires)
				c.ID, c.Acquired = conn.LastInsertRowID(), unix(t)
			}
			if err != nil {
				return err
			}
			res.Claimed = append(res.Claimed, c)
		}
		return nil
	})
	return res, err
}

// FileClaims lists the live file claims of every member.
func (s *Embedded) FileClaims(ctx context.Context) ([]FileClaim, error) {
	var out []FileClaim
	err := s.read(ctx, func(conn *sqlite.Conn) (err error) {
		out, err = s.fileClaims(conn, "")
		return err
	})
	return out, err
}

// ReleaseFiles ends this member's session's claims of paths, or all of
// them when paths is empty.
func (s *Embedded) ReleaseFiles(ctx context.Context, session int64, paths []string, why string) error {
	return s.write(ctx, func(conn *sqlite.Conn) error {
		q := `UPDATE file_claims SET released = ?, why = ? WHERE clone = ? AND session = ? AND released IS NULL`
		args := []any{now(), why, s.Clone(), session}
		if len(paths) > 0 {
			q += ` AND path IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(paths)), ", ") + `)`
			for _, p := range paths {
				args = append(args, p)
			}
		}
		return exec(conn, q, nil, args...)
	})
}

// ForceReleaseFile ends every live claim of path, whoever holds it: a
// person's decision. It returns the claims it ended.
func (s *Embedded) ForceReleaseFile(ctx context.Context, path, why string) ([]FileClaim, error) {
	var out []FileClaim
	err := s.write(ctx, func(conn *sqlite.Conn) error {
		var err error
		if out, err = s.fileClaims(conn, "f.path = ?", path); err != nil || len(out) == 0 {
			return err
		}
		return exec(conn, `UPDATE file_claims SET released = ?, why = ? WHERE path = ? AND released IS NULL`, nil, now(), why, path)
	})
	return out, err
}

// TakeBranch takes, or renews, the write lease of branch for ses for ttl,
// unless another session holds it: then ok is false and held says who.
func (s *Embedded) TakeBranch(ctx context.Context, branch string, ses Session, ttl time.Duration) (held BranchLease, ok bool, err error) {
	err = s.write(ctx, func(conn *sqlite.Conn) error {
		if err := s.live(conn); err != nil {
			return err
		}
		t := now()
		err := exec(conn, `INSERT INTO branch_leases (branch, clone, session, holder, expires) VALUES (?1, ?2, ?3, ?4, ?5)
			ON CONFLICT (branch) DO UPDATE SET clone = ?2, session = ?3, holder = ?4, expires = ?5
			WHERE expires <= ?6 OR (clone = ?2 AND session = ?3)`, nil, branch, s.Clone(), ses.ID, ses.Name, t+ttl.Nanoseconds(), t)
		if err != nil {
			return err
		}
		if ok = conn.Changes() == 1; ok {
			return nil
		}
		return exec(conn, `SELECT b.branch, b.clone, coalesce(c.host, ''), b.session, b.holder, b.expires
			FROM branch_leases b LEFT JOIN clones c ON c.id = b.clone WHERE b.branch = ?`, func(st *sqlite.Stmt) error {
			held = BranchLease{Branch: st.ColumnText(0), Clone: st.ColumnInt64(1), Host: st.ColumnText(2), Session: st.ColumnInt64(3),
				Holder: st.ColumnText(4), Expires: unix(st.ColumnInt64(5))}
			return nil
		}, branch)
	})
	return held, ok, err
}

// Audit appends e to the audit of live actions as this member's.
func (s *Embedded) Audit(ctx context.Context, e Entry) error {
	return s.write(ctx, func(conn *sqlite.Conn) error { return s.audit(conn, e) })
}

// AuditBatch appends entries in one transaction.
func (s *Embedded) AuditBatch(ctx context.Context, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	return s.write(ctx, func(conn *sqlite.Conn) error {
		for _, e := range entries {
			if err := s.audit(conn, e); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Embedded) audit(conn *sqlite.Conn, e Entry) error {
	at := e.At
	if at.IsZero() {
		at = time.Now()
	}
	return exec(conn, `INSERT INTO audit (clone, at, session, actor, agent, action, task_id, outcome, detail, branch, log, local)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, nil,
		s.Clone(), at.UnixNano(), e.Session, e.Actor, e.Agent, e.Action, e.TaskID, e.Outcome, e.Detail, e.Branch, e.Log, e.Local)
}

// AuditLog returns the entries after id after, oldest first, at most limit.
func (s *Embedded) AuditLog(ctx context.Context, after int64, limit int) ([]Entry, error) {
	return s.auditRead(ctx, `WHERE a.id > ? ORDER BY a.id LIMIT ?`, after, limit)
}

// AuditTail returns the latest n entries, oldest first.
func (s *Embedded) AuditTail(ctx context.Context, n int) ([]Entry, error) {
	es, err := s.auditRead(ctx, `ORDER BY a.id DESC LIMIT ?`, n)
	slices.Reverse(es)
	return es, err
}

func (s *Embedded) auditRead(ctx context.Context, where string, args ...any) ([]Entry, error) {
	var out []Entry
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `SELECT a.id, coalesce(a.clone, 0), coalesce(c.host, ''), coalesce(c.root, ''), a.log, a.local, a.at,
				a.session, a.actor, a.agent, a.action, a.task_id, a.outcome, a.detail, a.branch
			FROM audit a LEFT JOIN clones c ON c.id = a.clone `+where, func(st *sqlite.Stmt) error {
			out = append(out, Entry{ID: st.ColumnInt64(0), Clone: st.ColumnInt64(1), Host: st.ColumnText(2), Root: st.ColumnText(3),
				Log: st.ColumnText(4), Local: st.ColumnInt64(5), At: unix(st.ColumnInt64(6)), Session: st.ColumnInt64(7),
				Actor: st.ColumnText(8), Agent: st.ColumnText(9), Action: st.ColumnText(10), TaskID: st.ColumnText(11),
				Outcome: st.ColumnText(12), Detail: st.ColumnText(13), Branch: st.ColumnText(14)})
			return nil
		}, args...)
	})
	return out, err
}

// AuditLog reads the log as [Embedded.AuditLog] does, without a member:
// snag log reads it so with no snagd running.
func (db *EmbeddedDB) AuditLog(ctx context.Context, after int64, limit int) ([]Entry, error) {
	return db.reader().AuditLog(ctx, after, limit)
}

// AuditTail reads the log as [Embedded.AuditTail] does, without a member.
func (db *EmbeddedDB) AuditTail(ctx context.Context, n int) ([]Entry, error) {
	return db.reader().AuditTail(ctx, n)
}

// reader is a member-less view of the file, for reads that need none.
func (db *EmbeddedDB) reader() *Embedded { return &Embedded{db: db, pool: db.pool, path: db.path} }

// AuditSent is the id of the last entry of the log named log that the
// store took (0: none).
func (s *Embedded) AuditSent(ctx context.Context, log string) (int64, error) {
	var n int64
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `SELECT coalesce(max(local), 0) FROM audit WHERE log = ? AND local > 0`,
			func(st *sqlite.Stmt) error { n = st.ColumnInt64(0); return nil }, log)
	})
	return n, err
}

// Clones lists the live members, with their live sessions and how many
// tasks each holds.
func (s *Embedded) Clones(ctx context.Context) ([]Clone, error) {
	var out []Clone
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		t := now()
		return exec(conn, `SELECT c.id, c.host, c.root, c.branch, c.version, c.started, c.seen, c.grace_ms,
				coalesce((SELECT group_concat(name, char(10)) FROM (SELECT name FROM sessions x WHERE x.clone = c.id AND x.ended IS NULL ORDER BY name)), ''),
				(SELECT count(*) FROM leases l WHERE l.clone = c.id AND l.state = 'held')
			FROM clones c WHERE c.ended IS NULL ORDER BY c.id`, func(st *sqlite.Stmt) error {
			c := Clone{ID: st.ColumnInt64(0), Host: st.ColumnText(1), Root: st.ColumnText(2), Branch: st.ColumnText(3), Version: st.ColumnText(4),
				Started: unix(st.ColumnInt64(5)), Seen: unix(st.ColumnInt64(6)), Grace: float64(st.ColumnInt64(7)) / 1000,
				Held: st.ColumnInt(9)}
			c.Silent = time.Duration(t - st.ColumnInt64(6)).Seconds()
			if names := st.ColumnText(8); names != "" {
				c.Sessions = strings.Split(names, "\n")
			}
			out = append(out, c)
			return nil
		})
	})
	return out, err
}

// Listen calls f for the other members' events until ctx ends. The
// members of the embedded store are the views of one snagd, which hear
// each other in process: it has none to pass, and returns when ctx ends.
func (s *Embedded) Listen(ctx context.Context, f func(Event)) error {
	<-ctx.Done()
	return nil
}

// Post adds m, from this member, for the others to read. A body over
// 4,000 bytes is cut.
func (s *Embedded) Post(ctx context.Context, m Message) error {
	m.Body = cutBody(m.Body)
	if m.Branch == "" {
		m.Branch = s.Branch()
	}
	return s.write(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `INSERT INTO messages (clone, kind, from_name, to_name, key, type, title, body, branch, created)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, nil, s.Clone(), m.Kind, m.From, m.To, m.Key, m.Type, m.Title, m.Body, m.Branch, now())
	})
}

// Messages lists the other members' messages of kind, newest first, at
// most limit: to name alone when to is set, and not yet seen when unseen
// is.
func (s *Embedded) Messages(ctx context.Context, kind, to string, unseen bool, limit int) ([]Message, error) {
	var out []Message
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		return exec(conn, `SELECT m.id, m.clone, coalesce(c.host, ''), m.kind, m.from_name, m.to_name, m.key, m.type,
				m.title, m.body, m.branch, m.created, m.seen IS NOT NULL
			FROM messages m LEFT JOIN clones c ON c.id = m.clone
			WHERE m.kind = ? AND m.clone <> ? AND (?3 = '' OR m.to_name = ?3) AND (NOT ?4 OR m.seen IS NULL)
			ORDER BY m.id DESC LIMIT ?`, func(st *sqlite.Stmt) error {
			out = append(out, Message{ID: st.ColumnInt64(0), Clone: st.ColumnInt64(1), Host: st.ColumnText(2), Kind: st.ColumnText(3),
				From: st.ColumnText(4), To: st.ColumnText(5), Key: st.ColumnText(6), Type: st.ColumnText(7), Title: st.ColumnText(8),
				Body: st.ColumnText(9), Branch: st.ColumnText(10), Created: unix(st.ColumnInt64(11)), Seen: st.ColumnBool(12)})
			return nil
		}, kind, s.Clone(), to, unseen, limit)
	})
	return out, err
}

// MarkSeen marks messages ids seen.
func (s *Embedded) MarkSeen(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	return s.write(ctx, func(conn *sqlite.Conn) error {
		t := now()
		for _, id := range ids {
			if err := exec(conn, `UPDATE messages SET seen = ? WHERE id = ? AND seen IS NULL`, nil, t, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// Agents lists the live agents of the other members, each with its held
// leases and live file claims.
func (s *Embedded) Agents(ctx context.Context) ([]TeamAgent, error) {
	var agents []TeamAgent
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		err := exec(conn, `SELECT x.clone, c.host, c.branch, x.id, x.name, x.client
			FROM sessions x JOIN clones c ON c.id = x.clone
			WHERE x.clone <> ? AND x.ended IS NULL AND c.ended IS NULL ORDER BY x.name`, func(st *sqlite.Stmt) error {
			agents = append(agents, TeamAgent{Clone: st.ColumnInt64(0), Host: st.ColumnText(1), Branch: st.ColumnText(2),
				ID: st.ColumnInt64(3), Name: st.ColumnText(4), Client: st.ColumnText(5)})
			return nil
		}, s.Clone())
		if err != nil || len(agents) == 0 {
			return err
		}
		type who struct{ clone, id int64 }
		at := map[who]int{}
		for i, a := range agents {
			at[who{a.Clone, a.ID}] = i
		}
		leases, err := s.leasesWhere(conn, `l.state = 'held' AND l.clone <> ?`, s.Clone())
		if err != nil {
			return err
		}
		for _, l := range leases {
			if i, ok := at[who{l.Clone, l.Session}]; ok {
				agents[i].Leases = append(agents[i].Leases, l)
			}
		}
		claims, err := s.fileClaims(conn, "f.clone <> ?", s.Clone())
		if err != nil {
			return err
		}
		for _, c := range claims {
			if i, ok := at[who{c.Clone, c.Session}]; ok {
				agents[i].Files = append(agents[i].Files, c)
			}
		}
		return nil
	})
	return agents, err
}

// Activity reads, by branch, what the other members did since since: the
// notes they published, the tasks claimed and resolved, the latest report.
func (s *Embedded) Activity(ctx context.Context, since time.Time) (map[string]*BranchActivity, error) {
	act := newActivity()
	err := s.read(ctx, func(conn *sqlite.Conn) error {
		err := exec(conn, `SELECT a.branch, a.action, a.at, a.agent, a.detail, coalesce(nullif(l.key, ''), a.task_id), coalesce(c.host, '')
			FROM audit a LEFT JOIN leases l ON l.task_id = a.task_id LEFT JOIN clones c ON c.id = a.clone
			WHERE a.clone <> ? AND a.branch <> '' AND a.at > ?
			AND a.action IN ('claim', 'resolve', 'report') AND a.outcome <> 'refused'
			AND (a.action <> 'resolve' OR l.state = 'done')
			ORDER BY a.at DESC LIMIT 5000`, func(st *sqlite.Stmt) error {
			act.event(st.ColumnText(0), st.ColumnText(1), unix(st.ColumnInt64(2)), st.ColumnText(3), st.ColumnText(4), st.ColumnText(5), st.ColumnText(6))
			return nil
		}, s.Clone(), since.UnixNano())
		if err != nil {
			return err
		}
		return exec(conn, `SELECT branch, key, created FROM messages
			WHERE clone <> ? AND kind = 'note' AND branch <> '' AND created > ? ORDER BY created DESC LIMIT 1000`, func(st *sqlite.Stmt) error {
			act.note(st.ColumnText(0), st.ColumnText(1), unix(st.ColumnInt64(2)))
			return nil
		}, s.Clone(), since.UnixNano())
	})
	return act.by, err
}
