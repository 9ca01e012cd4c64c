package index

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// ErrNotFound is returned when no task answers to a reference.
var ErrNotFound = errors.New("no such task")

// ErrAmbiguous is returned when two files claim the same id or alias.
var ErrAmbiguous = errors.New("two files have this id")

// Blocked reports whether a dependency of the task is unresolved.
func (r *Row) Blocked() bool { return len(r.BlockedBy) > 0 }

// Claimable reports whether the row's task could be handed out: open, read
// cleanly, unique. It does not look at dependencies (see Blocked).
func (r *Row) Claimable() bool {
	return r.Status == queue.StatusOpen && r.State == snag.StateOK && !r.Duplicate
}

// depResolved is true for a dependency d that some resolved task answers
// to. It looks the reference up by id and by alias, each through its own
// index: written as one OR, or with status indexable, SQLite walks every
// resolved task instead, for every dependency.
const depResolved = `(EXISTS (SELECT 1 FROM tasks u WHERE u.id = d.ref AND +u.status = 'resolved') OR
	EXISTS (SELECT 1 FROM tasks u WHERE u.key = d.ref AND +u.status = 'resolved'))`

// blockers fills in BlockedBy for rows that have dependencies.
func blockers(conn *sqlite.Conn, rows []*Row) error {
	for _, r := range rows {
		if !r.hasDeps || r.Status.Terminal() {
			continue
		}
		// A dependency written by id is named by its task's key.
		err := sqlitex.Execute(conn, `
			SELECT coalesce((SELECT u.key FROM tasks u WHERE u.id = d.ref AND u.key <> '' LIMIT 1), d.ref)
			FROM deps d WHERE d.task_n = :n AND NOT `+depResolved+`
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

// DepKeys is refs, a task's depends_on, as people and agents read them:
// an id that names a task by its key, every other entry as it is.
func (db *DB) DepKeys(ctx context.Context, refs []string) []string {
	if len(refs) == 0 {
		return nil
	}
	out := slices.Clone(refs)
	db.withConn(ctx, func(conn *sqlite.Conn) error {
		for i, d := range refs {
			ref, err := queue.ParseRef(d)
			if err != nil || ref.ID == "" {
				continue
			}
			sqlitex.Execute(conn, `SELECT key FROM tasks WHERE id = :id AND key <> '' LIMIT 1`, &sqlitex.ExecOptions{
				Named: map[string]any{":id": ref.ID},
				ResultFunc: func(s *sqlite.Stmt) error {
					out[i] = s.ColumnText(0)
					return nil
				},
			})
		}
		return nil
	})
	return out
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

// List returns tasks in queue order (wave, severity, age, id). A file that
// stopped parsing keeps its place with its last good data, marked stale;
// files that never parsed (no data to place them by) are listed after the
// tasks, by name, with their error, when no filter on status, wave, kind or
// plan leaves them out.
func (db *DB) List(ctx context.Context, f Filter) (Page, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 20
	}
	var c cursor
	if f.Cursor != "" {
		var err error
		if c, err = decodeCursor(f.Cursor); err != nil {
			return Page{}, err
		}
	}
	var page Page
	err := db.withConn(ctx, func(conn *sqlite.Conn) (err error) {
		defer sqlitex.Transaction(conn)(&err) // one snapshot for both parts
		collect := func(q string, args map[string]any) error {
			return sqlitex.Execute(conn, q, &sqlitex.ExecOptions{
				Named: args,
				ResultFunc: func(s *sqlite.Stmt) error {
					page.Rows = append(page.Rows, scanRow(s))
					return nil
				},
			})
		}
		if !c.Broken {
			q, args := listQuery(f, c, limit+1)
			if err := collect(q, args); err != nil {
				return err
			}
		}
		if len(page.Rows) <= limit && listsBroken(f) {
			q, args := brokenQuery(c, limit+1-len(page.Rows))
			if err := collect(q, args); err != nil {
				return err
			}
		}
		if len(page.Rows) > limit {
			page.Rows = page.Rows[:limit]
			last := page.Rows[limit-1]
			if last.hasValid {
				page.Next = encodeCursor(cursor{Wave: int64(last.Wave), Sev: last.sevRank, Created: last.created, ID: last.ID, N: last.n})
			} else {
				page.Next = encodeCursor(cursor{Broken: true, Path: last.Path})
			}
		}
		return blockers(conn, page.Rows)
	})
	if err != nil {
		return Page{}, fmt.Errorf("list: %w", err)
	}
	return page, nil
}

// listsBroken reports whether a list with filter f includes files that
// never parsed: they have no status, wave, kind or plan to match.
func listsBroken(f Filter) bool {
	return len(f.Statuses) == 0 && f.Wave == 0 && f.Kind == "" && f.Plan == ""
}

// A LIMIT takes its bound value as +:limit, never :limit. SQLite (since
// 3.47) reads a LIMIT's bound parameter when it prepares a statement, and
// marks the statement to be prepared again whenever that parameter is
// bound: every call re-parsed and re-planned a cached statement (a tenth
// of snagd's CPU for a list, a twentieth of a claim's for the audit read).
// Through the unary plus the value is read when the statement runs, as
// before 3.47, and the cached statement is reused. TestLimitsStayPrepared
// holds every query of the package to it.

// listOrder is queue order, with the row number to break the last ties.
const listOrder = `wave, sev_rank, created, id, n`

// listQuery selects the rows with task data that f wants, in queue order,
// after cursor c. The rows come from one ordered walk of an index per
// status (or per terminal flag), each arm stopping at limit rows, so that
// no list sorts more than a few pages' worth of rows:
//
//	SELECT * FROM (SELECT ... WHERE status = :s0 ... ORDER BY ... LIMIT +:limit)
//	UNION ALL SELECT * FROM (SELECT ... WHERE status = :s1 ...)
//	ORDER BY ... LIMIT +:limit
//
// The cursor is a row value, (wave, sev_rank, created, id, n) > (...), which
// SQLite turns into a range on the index after its equality columns.
func listQuery(f Filter, c cursor, limit int) (string, map[string]any) {
	args := map[string]any{":limit": int64(limit)}
	where := []string{"id != ''"}
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
	if c != (cursor{}) {
		where = append(where, "("+listOrder+") > (:cw, :cs, :cc, :ci, :cn)")
		args[":cw"], args[":cs"], args[":cc"], args[":ci"], args[":cn"] = c.Wave, c.Sev, c.Created, c.ID, c.N
	}
	// The partitions: one arm of the query each.
	var parts []string
	switch {
	case len(f.Statuses) > 0:
		seen := map[queue.Status]bool{}
		for _, st := range f.Statuses {
			if seen[st] {
				continue
			}
			seen[st] = true
			k := ":s" + strconv.Itoa(len(parts))
			args[k] = string(st)
			parts = append(parts, "status = "+k)
		}
	case f.All:
		parts = []string{"terminal = 0", "terminal = 1"}
	default:
		parts = []string{"terminal = 0"}
	}
	arm := func(part string) string {
		return `SELECT ` + rowColumns + ` FROM tasks WHERE ` + part + ` AND ` + strings.Join(where, " AND ") +
			` ORDER BY ` + listOrder + ` LIMIT +:limit`
	}
	if len(parts) == 1 {
		return arm(parts[0]), args
	}
	arms := make([]string, len(parts))
	for i, p := range parts {
		arms[i] = `SELECT * FROM (` + arm(p) + `)`
	}
	return strings.Join(arms, " UNION ALL ") + ` ORDER BY ` + listOrder + ` LIMIT +:limit`, args
}

// brokenQuery selects files that never parsed, by path, after cursor c.
func brokenQuery(c cursor, limit int) (string, map[string]any) {
	return `SELECT ` + rowColumns + ` FROM tasks WHERE id = '' AND path > :cp ORDER BY path LIMIT +:limit`,
		map[string]any{":cp": c.Path, ":limit": int64(limit)}
}

// cursor is where a list page ended: the queue-order key of its last row,
// or, past the tasks, the path of the last file that never parsed.
type cursor struct {
	Wave    int64  `json:"w,omitempty"`
	Sev     int64  `json:"s,omitempty"`
	Created int64  `json:"c,omitempty"`
	ID      string `json:"i,omitempty"`
	N       int64  `json:"n,omitempty"`
	Broken  bool   `json:"b,omitempty"`
	Path    string `json:"p,omitempty"`
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
	var it *Item
	err := db.withConn(ctx, func(conn *sqlite.Conn) (err error) {
		it, err = get(conn, ref)
		return err
	})
	return it, err
}

// Get is [DB.Get] inside the transaction.
func (tx *Tx) Get(ref queue.Ref) (*Item, error) { return get(tx.conn, ref) }

// The queries of get, by id and by alias: a row, then its data, body and
// hash (at rowWidth).
var (
	getByIDSQL  = `SELECT ` + rowColumns + `, data, body, sha256 FROM tasks WHERE id = :ref`
	getByKeySQL = `SELECT ` + rowColumns + `, data, body, sha256 FROM tasks
		WHERE key = :ref OR (key = '' AND key_num = :num)`
)

func get(conn *sqlite.Conn, ref queue.Ref) (*Item, error) {
	var items []*Item
	err := func() error {
		// The rows are put in order here, not by SQLite: an ORDER BY copies
		// each row, body and all, into a sorter's record, whose memory
		// modernc's allocator maps and unmaps for every claim's lookup.
		q, args := getByIDSQL, map[string]any{":ref": ref.ID}
		if ref.ID == "" {
			q, args = getByKeySQL, map[string]any{":ref": ref.String(), ":num": int64(ref.Num)}
		}
		err := sqlitex.Execute(conn, q, &sqlitex.ExecOptions{
			Named: args,
			ResultFunc: func(s *sqlite.Stmt) error {
				it := &Item{Row: *scanRow(s)}
				if it.hasValid {
					var t queue.Task
					if err := json.Unmarshal([]byte(s.ColumnText(rowWidth)), &t); err != nil {
						return fmt.Errorf("decode %s: %w", it.Path, err)
					}
					t.Body = []byte(s.ColumnText(rowWidth + 1))
					it.Task = &t
				}
				it.SHA256 = make([]byte, s.ColumnLen(rowWidth+2))
				s.ColumnBytes(rowWidth+2, it.SHA256)
				items = append(items, it)
				return nil
			},
		})
		if err != nil {
			return err
		}
		// Rows with an id first (a key's lookup may find files without
		// one), then by path.
		slices.SortFunc(items, func(a, b *Item) int {
			return cmp.Or(cmp.Compare(boolInt(a.ID == ""), boolInt(b.ID == "")), strings.Compare(a.Path, b.Path))
		})
		rows := make([]*Row, len(items))
		for i, it := range items {
			rows[i] = &it.Row
		}
		return blockers(conn, rows)
	}()
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
	SELECT 1 FROM deps d WHERE d.task_n = tasks.n AND NOT ` + depResolved + `)`

// Next returns the next ready task in queue order: open, read cleanly, not
// blocked. With none it returns nil and says why.
func (db *DB) Next(ctx context.Context) (*Row, Readiness, error) {
	var row *Row
	var rd Readiness
	err := db.withConn(ctx, func(conn *sqlite.Conn) (err error) {
		defer sqlitex.Transaction(conn)(&err) // the counts agree with each other
		row, rd, err = next(conn)
		return err
	})
	if err != nil {
		return nil, rd, fmt.Errorf("next: %w", err)
	}
	return row, rd, nil
}

// Next is [DB.Next] inside the transaction.
func (tx *Tx) Next() (*Row, Readiness, error) {
	row, rd, err := next(tx.conn)
	if err != nil {
		return nil, rd, fmt.Errorf("next: %w", err)
	}
	return row, rd, nil
}

// nextSQL selects the next ready task.
var nextSQL = `SELECT ` + rowColumns + ` FROM tasks WHERE ` + readyWhere + `
		ORDER BY wave, sev_rank, created, id LIMIT 1`

func next(conn *sqlite.Conn) (row *Row, rd Readiness, err error) {
	err = sqlitex.Execute(conn, nextSQL, &sqlitex.ExecOptions{
		ResultFunc: func(s *sqlite.Stmt) error { row = scanRow(s); return nil },
	})
	if err != nil || row != nil {
		return row, rd, err
	}
	err = sqlitex.Execute(conn, `SELECT count(*) FROM tasks WHERE status = 'open'`, &sqlitex.ExecOptions{
		ResultFunc: func(s *sqlite.Stmt) error { rd.Open = s.ColumnInt(0); return nil },
	})
	if err != nil {
		return row, rd, err
	}
	err = sqlitex.Execute(conn, `
		SELECT d.ref, count(DISTINCT t.n) FROM tasks t JOIN deps d ON d.task_n = t.n
		WHERE t.status = 'open' AND NOT `+depResolved+`
		GROUP BY d.ref ORDER BY 2 DESC, 1 LIMIT 3`, &sqlitex.ExecOptions{
		ResultFunc: func(s *sqlite.Stmt) error {
			rd.Blockers = append(rd.Blockers, s.ColumnText(0))
			return nil
		},
	})
	if err != nil {
		return row, rd, err
	}
	err = sqlitex.Execute(conn, `SELECT count(DISTINCT t.n) FROM tasks t JOIN deps d ON d.task_n = t.n
		WHERE t.status = 'open' AND NOT `+depResolved,
		&sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error { rd.Blocked = s.ColumnInt(0); return nil }})
	return row, rd, err
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
// problem, by path, for plan.json and for checks that need the whole queue.
func (db *DB) Snapshot(ctx context.Context) ([]queue.Located, []queue.Problem, error) {
	type stored struct{ path, data string }
	var rows []stored
	var problems []queue.Problem
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		// In table order, one pass over the rows; by path, SQLite would
		// seek every row from the path index.
		return sqlitex.Execute(conn, `SELECT path, id != '', data, state, error FROM tasks`,
			&sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error {
				p := s.ColumnText(0)
				if s.ColumnBool(1) {
					rows = append(rows, stored{p, s.ColumnText(2)})
				}
				if s.ColumnText(3) != snag.StateOK {
					problems = append(problems, queue.Problem{File: p, Error: s.ColumnText(4)})
				}
				return nil
			}})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	slices.SortFunc(rows, func(a, b stored) int { return strings.Compare(a.path, b.path) })
	slices.SortFunc(problems, func(a, b queue.Problem) int { return strings.Compare(a.File, b.File) })
	// Decoding is most of the work: share it out.
	tasks := make([]queue.Located, len(rows))
	errs := make([]error, len(rows))
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(rows); i += workers {
				t := new(queue.Task)
				if err := json.Unmarshal([]byte(rows[i].data), t); err != nil {
					errs[i] = fmt.Errorf("decode %s: %w", rows[i].path, err)
				}
				tasks[i] = queue.Located{Task: t, File: rows[i].path}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	return tasks, problems, nil
}

// Count returns the number of task rows and of problem rows.
func (db *DB) Count(ctx context.Context) (snag.Counts, error) {
	var c snag.Counts
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT (SELECT count(*) FROM tasks),
			(SELECT count(*) FROM tasks WHERE state != 'ok' OR dup = 1),
			(SELECT count(*) FROM deps d JOIN tasks t ON t.n = d.task_n WHERE t.state = 'ok'
				AND NOT EXISTS (SELECT 1 FROM tasks u WHERE u.id = d.ref)
				AND NOT EXISTS (SELECT 1 FROM tasks u WHERE u.key = d.ref))`,
			&sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error {
				c.Tasks, c.Problems, c.Dangling = s.ColumnInt(0), s.ColumnInt(1), s.ColumnInt(2)
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
func (db *DB) Audit(ctx context.Context, e snag.AuditEntry) error {
	return db.Update(ctx, func(tx *Tx) error { return tx.Audit(e) })
}
