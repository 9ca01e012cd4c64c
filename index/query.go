package index

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/snagdev/snag/queue"
)

// ErrNotFound is returned when no task answers to a reference.
var ErrNotFound = errors.New("no such task")

// ErrAmbiguous is returned when two files claim the same id or alias.
var ErrAmbiguous = errors.New("two files have this id")

// Row is one task as lists show it: the columns a compact table needs.
type Row struct {
	ID        string         `json:"id"`
	Key       string         `json:"key"`
	Title     string         `json:"title"`
	Status    queue.Status   `json:"status"`
	Trust     queue.Trust    `json:"trust"`
	Severity  queue.Severity `json:"severity"`
	Kind      queue.Kind     `json:"kind"`
	Wave      int            `json:"wave"`
	Plan      string         `json:"plan,omitempty"`
	Assignee  string         `json:"assignee,omitempty"`
	File      string         `json:"file,omitempty"` // first suspect file, path:a-b
	BlockedBy []string       `json:"blocked_by,omitempty"`
	Path      string         `json:"path"` // the task file, relative to .snag/
	// State is ok, invalid or conflict; Error says why when it is not ok.
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Stale is set when the row holds the last good data of a file that no
	// longer parses; Dup when another file has the same id or alias.
	Stale bool `json:"stale,omitempty"`
	Dup   bool `json:"duplicate,omitempty"`

	n        int64
	created  int64
	sevRank  int64
	hasDeps  bool
	hasValid bool // the row has task data (parsed now or before)
}

// Blocked reports whether a dependency of the task is unresolved.
func (r *Row) Blocked() bool { return len(r.BlockedBy) > 0 }

// Claimable reports whether the row's task could be handed out: open, read
// cleanly, unique. It does not look at dependencies (see Blocked).
func (r *Row) Claimable() bool {
	return r.Status == queue.StatusOpen && r.State == StateOK && !r.Dup
}

const rowColumns = `tasks.n, tasks.id, tasks.key, tasks.title, tasks.status, tasks.trust, tasks.severity,
	tasks.kind, tasks.wave, tasks.plan, tasks.assignee, tasks.first_file, tasks.path, tasks.state, tasks.error,
	tasks.stale, tasks.dup, tasks.created, tasks.sev_rank, EXISTS (SELECT 1 FROM deps d WHERE d.task_n = tasks.n)`

func scanRow(s *sqlite.Stmt) *Row {
	r := &Row{
		n: s.ColumnInt64(0), ID: s.ColumnText(1), Key: s.ColumnText(2), Title: s.ColumnText(3),
		Status: queue.Status(s.ColumnText(4)), Trust: queue.Trust(s.ColumnText(5)),
		Severity: queue.Severity(s.ColumnText(6)), Kind: queue.Kind(s.ColumnText(7)),
		Wave: s.ColumnInt(8), Plan: s.ColumnText(9), Assignee: s.ColumnText(10), File: s.ColumnText(11),
		Path: s.ColumnText(12), State: s.ColumnText(13), Error: s.ColumnText(14),
		Stale: s.ColumnBool(15), Dup: s.ColumnBool(16), created: s.ColumnInt64(17), sevRank: s.ColumnInt64(18),
		hasDeps: s.ColumnBool(19),
	}
	r.hasValid = r.ID != ""
	return r
}

// blockers fills in BlockedBy for rows that have dependencies.
func blockers(conn *sqlite.Conn, rows []*Row) error {
	for _, r := range rows {
		if !r.hasDeps || r.Status.Terminal() {
			continue
		}
		err := sqlitex.Execute(conn, `
			SELECT d.ref FROM deps d WHERE d.task_n = :n AND NOT EXISTS (
				SELECT 1 FROM tasks u WHERE (u.id = d.ref OR u.key = d.ref) AND u.status = 'resolved')
			ORDER BY d.ref`, &sqlitex.ExecOptions{
			Named: map[string]any{":n": r.n},
			ResultFunc: func(s *sqlite.Stmt) error {
				r.BlockedBy = append(r.BlockedBy, s.ColumnText(0))
				return nil
			},
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Filter selects tasks for [DB.List].
type Filter struct {
	Statuses []queue.Status // any of these; empty: every non-terminal status (or all, with All)
	Wave     int            // only this wave; 0: any
	Kind     queue.Kind     // only this kind; "": any
	Plan     string         // only this plan; "": any
	All      bool           // include resolved and cancelled tasks
	Limit    int            // at most this many rows; 0: 20
	Cursor   string         // from a previous Page's Next
}

// Page is one page of a list.
type Page struct {
	Rows []*Row
	// Next continues the list after the last row; empty at the end.
	Next string
}

// List returns tasks in queue order (wave, severity, age, id). Files that
// do not parse are listed too, with their error, after the tasks.
func (db *DB) List(ctx context.Context, f Filter) (Page, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 20
	}
	var where []string
	args := map[string]any{":limit": int64(limit + 1)}
	switch {
	case len(f.Statuses) > 0:
		var in []string
		for i, s := range f.Statuses {
			k := ":s" + strconv.Itoa(i)
			in = append(in, k)
			args[k] = string(s)
		}
		where = append(where, "status IN ("+strings.Join(in, ", ")+")")
	case !f.All:
		where = append(where, "terminal = 0")
	}
	if f.Wave > 0 {
		where = append(where, "wave = :wave")
		args[":wave"] = int64(f.Wave)
	}
	if f.Kind != "" {
		where = append(where, "kind = :kind")
		args[":kind"] = string(f.Kind)
	}
	if f.Plan != "" {
		where = append(where, "plan = :plan")
		args[":plan"] = f.Plan
	}
	if f.Cursor != "" {
		c, err := decodeCursor(f.Cursor)
		if err != nil {
			return Page{}, err
		}
		where = append(where, "(wave, sev_rank, created, id, n) > (:cw, :cs, :cc, :ci, :cn)")
		args[":cw"], args[":cs"], args[":cc"], args[":ci"], args[":cn"] = c.Wave, c.Sev, c.Created, c.ID, c.N
	}
	q := `SELECT ` + rowColumns + ` FROM tasks`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY wave, sev_rank, created, id, n LIMIT :limit`
	var page Page
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		err := sqlitex.Execute(conn, q, &sqlitex.ExecOptions{
			Named: args,
			ResultFunc: func(s *sqlite.Stmt) error {
				page.Rows = append(page.Rows, scanRow(s))
				return nil
			},
		})
		if err != nil {
			return err
		}
		if len(page.Rows) > limit {
			page.Rows = page.Rows[:limit]
			last := page.Rows[limit-1]
			page.Next = encodeCursor(cursor{Wave: int64(last.Wave), Sev: last.sevRank, Created: last.created, ID: last.ID, N: last.n})
		}
		return blockers(conn, page.Rows)
	})
	if err != nil {
		return Page{}, fmt.Errorf("list: %w", err)
	}
	return page, nil
}

type cursor struct {
	Wave    int64  `json:"w"`
	Sev     int64  `json:"s"`
	Created int64  `json:"c"`
	ID      string `json:"i"`
	N       int64  `json:"n"`
}

func encodeCursor(c cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return c, errors.New("list: bad cursor: pass back the next value of the previous page unchanged, or start without one")
	}
	return c, nil
}

// Item is one task in full, as [DB.Get] returns it.
type Item struct {
	Row
	// Task is the task's data; nil for a file that never parsed.
	Task *queue.Task
	// SHA256 is the hash of the file's bytes when it was indexed.
	SHA256 []byte
}

// Get finds a task by id or alias. A reference that two files answer to
// fails with [ErrAmbiguous], naming both.
func (db *DB) Get(ctx context.Context, ref queue.Ref) (*Item, error) {
	var items []*Item
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		q := `SELECT ` + rowColumns + `, data, body, sha256 FROM tasks WHERE id = :ref ORDER BY path`
		args := map[string]any{":ref": ref.ID}
		if ref.ID == "" {
			q = `SELECT ` + rowColumns + `, data, body, sha256 FROM tasks
				WHERE key = :ref OR (key = '' AND key_num = :num) ORDER BY id = '', path`
			args = map[string]any{":ref": ref.String(), ":num": int64(ref.Num)}
		}
		err := sqlitex.Execute(conn, q, &sqlitex.ExecOptions{
			Named: args,
			ResultFunc: func(s *sqlite.Stmt) error {
				it := &Item{Row: *scanRow(s)}
				if it.hasValid {
					var t queue.Task
					if err := json.Unmarshal([]byte(s.ColumnText(20)), &t); err != nil {
						return fmt.Errorf("decode %s: %w", it.Path, err)
					}
					t.Body = []byte(s.ColumnText(21))
					it.Task = &t
				}
				it.SHA256 = make([]byte, s.ColumnLen(22))
				s.ColumnBytes(22, it.SHA256)
				items = append(items, it)
				return nil
			},
		})
		if err != nil {
			return err
		}
		rows := make([]*Row, len(items))
		for i, it := range items {
			rows[i] = &it.Row
		}
		return blockers(conn, rows)
	})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", ref, err)
	}
	switch {
	case len(items) == 0:
		return nil, fmt.Errorf("get %s: %w: snag list shows the tasks there are", ref, ErrNotFound)
	case len(items) > 1 && items[1].hasValid:
		paths := make([]string, len(items))
		for i, it := range items {
			paths[i] = it.Path
		}
		return nil, fmt.Errorf("get %s: %w: %s; give one of them a new id and key (snag doctor lists it)", ref, ErrAmbiguous, strings.Join(paths, " and "))
	}
	return items[0], nil
}

// Readiness explains why [DB.Next] found nothing.
type Readiness struct {
	Open     int      // open tasks, blocked or not
	Blocked  int      // open tasks with an unresolved dependency
	Blockers []string // the dependencies that block the most tasks, most first
}

// String is the sentence an agent reads when nothing is ready.
func (r Readiness) String() string {
	switch {
	case r.Open == 0:
		return "nothing is ready: no task is open"
	case r.Blocked > 0 && len(r.Blockers) > 0:
		noun := "tasks are"
		if r.Blocked == 1 {
			noun = "task is"
		}
		return fmt.Sprintf("nothing is ready: %d %s blocked by %s", r.Blocked, noun, strings.Join(r.Blockers, ", "))
	}
	return fmt.Sprintf("nothing is ready: %d open tasks cannot be claimed (invalid, conflicted or duplicated: snag doctor)", r.Open)
}

// readyWhere selects the tasks claim-next may hand out.
const readyWhere = `status = 'open' AND state = 'ok' AND dup = 0 AND NOT EXISTS (
	SELECT 1 FROM deps d WHERE d.task_n = tasks.n AND NOT EXISTS (
		SELECT 1 FROM tasks u WHERE (u.id = d.ref OR u.key = d.ref) AND u.status = 'resolved'))`

// Next returns the next ready task in queue order: open, read cleanly, not
// blocked. With none it returns nil and says why.
func (db *DB) Next(ctx context.Context) (*Row, Readiness, error) {
	var row *Row
	var rd Readiness
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		err := sqlitex.Execute(conn, `SELECT `+rowColumns+` FROM tasks WHERE `+readyWhere+`
			ORDER BY wave, sev_rank, created, id LIMIT 1`, &sqlitex.ExecOptions{
			ResultFunc: func(s *sqlite.Stmt) error { row = scanRow(s); return nil },
		})
		if err != nil || row != nil {
			return err
		}
		err = sqlitex.Execute(conn, `SELECT count(*) FROM tasks WHERE status = 'open'`, &sqlitex.ExecOptions{
			ResultFunc: func(s *sqlite.Stmt) error { rd.Open = s.ColumnInt(0); return nil },
		})
		if err != nil {
			return err
		}
		return sqlitex.Execute(conn, `
			SELECT d.ref, count(DISTINCT t.n) FROM tasks t JOIN deps d ON d.task_n = t.n
			WHERE t.status = 'open' AND NOT EXISTS (
				SELECT 1 FROM tasks u WHERE (u.id = d.ref OR u.key = d.ref) AND u.status = 'resolved')
			GROUP BY d.ref ORDER BY 2 DESC, 1 LIMIT 3`, &sqlitex.ExecOptions{
			ResultFunc: func(s *sqlite.Stmt) error {
				rd.Blockers = append(rd.Blockers, s.ColumnText(0))
				return nil
			},
		})
	})
	if err != nil {
		return nil, rd, fmt.Errorf("next: %w", err)
	}
	if row == nil {
		_ = db.withConn(ctx, func(conn *sqlite.Conn) error {
			return sqlitex.Execute(conn, `SELECT count(DISTINCT t.n) FROM tasks t JOIN deps d ON d.task_n = t.n
				WHERE t.status = 'open' AND NOT EXISTS (
				SELECT 1 FROM tasks u WHERE (u.id = d.ref OR u.key = d.ref) AND u.status = 'resolved')`,
				&sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error { rd.Blocked = s.ColumnInt(0); return nil }})
		})
	}
	return row, rd, nil
}

// Hit is one search result.
type Hit struct {
	Row
	Snippet string `json:"snippet"`
}

// Search runs a full-text query over titles, bodies, console errors and
// suspect file paths of every task, inbox and terminal ones included, best
// match first. Words are matched as prefixes; quotes and operators a person
// types are taken as plain words.
func (db *DB) Search(ctx context.Context, query string, limit int) ([]Hit, error) {
	if limit <= 0 {
		limit = 20
	}
	match := ftsQuery(query)
	if match == "" {
		return nil, errors.New("search: empty query: give a word or two to look for")
	}
	var hits []Hit
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		err := sqlitex.Execute(conn, `
			SELECT `+rowColumns+`, snippet(tasks_fts, -1, '[', ']', '…', 10)
			FROM tasks_fts JOIN tasks ON tasks.n = tasks_fts.rowid
			WHERE tasks_fts MATCH :q ORDER BY bm25(tasks_fts, 10.0, 1.0, 2.0, 2.0) LIMIT :limit`,
			&sqlitex.ExecOptions{
				Named: map[string]any{":q": match, ":limit": int64(limit)},
				ResultFunc: func(s *sqlite.Stmt) error {
					h := Hit{Row: *scanRow(s), Snippet: s.ColumnText(20)}
					hits = append(hits, h)
					return nil
				},
			})
		if err != nil {
			return err
		}
		rows := make([]*Row, len(hits))
		for i := range hits {
			rows[i] = &hits[i].Row
		}
		return blockers(conn, rows)
	})
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", query, err)
	}
	return hits, nil
}

// ftsQuery turns what a person typed into an FTS5 query: each word quoted
// (so operators and punctuation are plain text) and matched as a prefix.
func ftsQuery(q string) string {
	var terms []string
	for _, w := range strings.FieldsFunc(q, func(r rune) bool {
		return !(r == '_' || r == '.' || r == '-' || r == '/' || r > 127 || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		w = strings.Trim(w, ".-/")
		if w == "" {
			continue
		}
		terms = append(terms, `"`+strings.ReplaceAll(w, `"`, `""`)+`"*`)
	}
	return strings.Join(terms, " ")
}

// Problems lists files that are not clean tasks: ones that do not parse,
// carry conflict markers, or share an id or alias with another file.
func (db *DB) Problems(ctx context.Context) ([]*Row, error) {
	var rows []*Row
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT `+rowColumns+` FROM tasks WHERE state != 'ok' OR dup = 1 ORDER BY path`,
			&sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error { rows = append(rows, scanRow(s)); return nil }})
	})
	if err != nil {
		return nil, fmt.Errorf("problems: %w", err)
	}
	return rows, nil
}

// Snapshot returns every task with data (parsed now, or stale) and every
// problem, for plan.json and for checks that need the whole queue.
func (db *DB) Snapshot(ctx context.Context) ([]queue.Located, []queue.Problem, error) {
	var tasks []queue.Located
	var problems []queue.Problem
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT path, id != '', data, state, error FROM tasks ORDER BY path`,
			&sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error {
				p := s.ColumnText(0)
				if s.ColumnBool(1) {
					var t queue.Task
					if err := json.Unmarshal([]byte(s.ColumnText(2)), &t); err != nil {
						return fmt.Errorf("decode %s: %w", p, err)
					}
					tasks = append(tasks, queue.Located{Task: &t, File: p})
				}
				if s.ColumnText(3) != StateOK {
					problems = append(problems, queue.Problem{File: p, Error: s.ColumnText(4)})
				}
				return nil
			}})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	return tasks, problems, nil
}

// Counts are totals for health reports.
type Counts struct {
	Tasks    int `json:"tasks"`
	Problems int `json:"problems"`
}

// Count returns the number of task rows and of problem rows.
func (db *DB) Count(ctx context.Context) (Counts, error) {
	var c Counts
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT count(*), count(*) FILTER (WHERE state != 'ok' OR dup = 1) FROM tasks`,
			&sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error {
				c.Tasks, c.Problems = s.ColumnInt(0), s.ColumnInt(1)
				return nil
			}})
	})
	return c, err
}

// NextKey reserves the next alias number: one more than the highest seen
// in any file or reserved before. Reservations are durable, so two writers
// never get the same number.
func (db *DB) NextKey(ctx context.Context) (int, error) {
	var n int
	err := db.write(ctx, func(conn *sqlite.Conn) error {
		err := sqlitex.Execute(conn, `SELECT max(coalesce((SELECT max(key_num) FROM tasks), 0),
			coalesce((SELECT CAST(v AS INTEGER) FROM meta WHERE k = 'last_key'), 0)) + 1`,
			&sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error { n = s.ColumnInt(0); return nil }})
		if err != nil {
			return err
		}
		return sqlitex.Execute(conn, `INSERT INTO meta (k, v) VALUES ('last_key', :n)
			ON CONFLICT (k) DO UPDATE SET v = excluded.v`, &sqlitex.ExecOptions{Named: map[string]any{":n": strconv.Itoa(n)}})
	})
	if err != nil {
		return 0, fmt.Errorf("next key: %w", err)
	}
	return n, nil
}

// Audit appends one entry to the audit log.
func (db *DB) Audit(ctx context.Context, e AuditEntry) error {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	return db.write(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `INSERT INTO audit (at, actor, agent, action, task_id, outcome, detail)
			VALUES (:at, :actor, :agent, :action, :task, :outcome, :detail)`, &sqlitex.ExecOptions{Named: map[string]any{
			":at": e.At.UnixNano(), ":actor": string(e.Actor), ":agent": e.Agent, ":action": e.Action,
			":task": e.TaskID, ":outcome": e.Outcome, ":detail": e.Detail,
		}})
	})
}

// AuditEntry is one line of the audit log.
type AuditEntry struct {
	At      time.Time   `json:"at"`
	Actor   queue.Actor `json:"actor"`
	Agent   string      `json:"agent,omitempty"`
	Action  string      `json:"action"`
	TaskID  string      `json:"task_id,omitempty"`
	Outcome string      `json:"outcome"`
	Detail  string      `json:"detail,omitempty"`
}
