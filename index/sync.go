package index

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/snagdev/snag/queue"
)

// TasksFolder is where task files live, relative to .snag/.
const TasksFolder = "tasks"

// Row states.
const (
	StateOK       = "ok"
	StateInvalid  = "invalid"
	StateConflict = "conflict"
)

// ScanStats says what a scan found and did.
type ScanStats struct {
	Files     int           // task files seen
	Read      int           // files read and hashed
	Parsed    int           // files parsed (new content)
	Failed    int           // files that do not parse, now
	Added     int           // rows added
	Updated   int           // rows whose content changed
	Removed   int           // rows whose file is gone
	Duration  time.Duration // wall time of the whole scan
	Unchanged int           // files whose content was already indexed
}

// Changed reports whether the scan changed any row's content.
func (s ScanStats) Changed() bool { return s.Added+s.Updated+s.Removed > 0 }

// ScanOptions tune a scan.
type ScanOptions struct {
	// Hash reads and hashes every file. Without it, a file whose size and
	// modification time match its row is taken as unchanged.
	Hash bool
}

// fileResult is one file's outcome, computed outside the transaction.
type fileResult struct {
	name    string
	size    int64
	mtime   int64
	sum     []byte
	task    *queue.Task
	err     error // parse error: the file is invalid or conflicted
	touched bool  // content unchanged; only size or mtime differ
}

type rowInfo struct {
	n     int64
	sum   []byte
	size  int64
	mtime int64
}

// Scan brings the index in step with the task files in dir: it walks the
// folder, hashes what may have changed, parses new content in parallel, and
// applies every difference in one transaction. A row whose file is gone is
// removed; a file that no longer parses keeps its last good data, marked
// stale, beside its error.
func (db *DB) Scan(ctx context.Context, dir *queue.Dir, opts ScanOptions) (ScanStats, error) {
	start := time.Now()
	var st ScanStats
	entries, err := dir.List()
	if err != nil {
		return st, fmt.Errorf("scan: %w", err)
	}
	st.Files = len(entries)
	known := map[string]rowInfo{}
	err = db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT path, n, sha256, size, mtime FROM tasks`, &sqlitex.ExecOptions{
			ResultFunc: func(s *sqlite.Stmt) error {
				sum := make([]byte, s.ColumnLen(2))
				s.ColumnBytes(2, sum)
				known[s.ColumnText(0)] = rowInfo{n: s.ColumnInt64(1), sum: sum, size: s.ColumnInt64(3), mtime: s.ColumnInt64(4)}
				return nil
			},
		})
	})
	if err != nil {
		return st, fmt.Errorf("scan: %w", err)
	}

	results := make([]*fileResult, len(entries))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	seen := make(map[string]bool, len(entries))
	for i, e := range entries {
		p := path.Join(TasksFolder, e.Name)
		seen[p] = true
		old, had := known[p]
		if e.Problem == nil && had && !opts.Hash && old.size == e.Size && old.mtime == e.ModTime.UnixNano() {
			continue
		}
		g.Go(func() error {
			if gctx.Err() != nil {
				return gctx.Err()
			}
			results[i] = readFile(dir, e, old, had)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return st, fmt.Errorf("scan: %w", err)
	}

	err = db.write(ctx, func(conn *sqlite.Conn) error {
		var changedKeys []string
		for _, r := range results {
			if r == nil {
				continue
			}
			p := path.Join(TasksFolder, r.name)
			if errors.Is(r.err, fs.ErrNotExist) {
				delete(seen, p) // removed since the listing
				continue
			}
			st.Read++
			old, had := known[p]
			ch, err := apply(conn, p, r, old, had)
			if err != nil {
				return err
			}
			countChange(&st, r, ch, had)
			changedKeys = append(changedKeys, ch.keys...)
		}
		for p, old := range known {
			if seen[p] {
				continue
			}
			keys, err := deleteRow(conn, old.n)
			if err != nil {
				return err
			}
			st.Removed++
			changedKeys = append(changedKeys, keys...)
		}
		return markDups(conn, changedKeys)
	})
	if err != nil {
		return st, fmt.Errorf("scan: %w", err)
	}
	st.Unchanged = st.Files - st.Parsed - st.Failed
	st.Duration = time.Since(start)
	return st, nil
}

// Rebuild empties the index tables and scans every file afresh. Live state
// is left alone.
func (db *DB) Rebuild(ctx context.Context, dir *queue.Dir) (ScanStats, error) {
	err := db.write(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.ExecuteScript(conn, `DELETE FROM deps; DELETE FROM tasks;`, nil)
	})
	if err != nil {
		return ScanStats{}, fmt.Errorf("rebuild: %w", err)
	}
	return db.Scan(ctx, dir, ScanOptions{Hash: true})
}

// FileChange says what [DB.SyncFile] did to one file's row.
type FileChange struct {
	Path    string // relative to .snag/
	Added   bool
	Updated bool // content changed (parsed, or now failing)
	Removed bool
	Err     error // the file's parse error, when it has one
}

// SyncFile brings one task file's row in step with the file: added,
// updated, marked failing, or removed when the file is gone. The watcher
// calls it for each file that settled.
func (db *DB) SyncFile(ctx context.Context, dir *queue.Dir, name string) (FileChange, error) {
	p := path.Join(TasksFolder, name)
	fc := FileChange{Path: p}
	var old rowInfo
	var had bool
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT n, sha256, size, mtime FROM tasks WHERE path = :path`, &sqlitex.ExecOptions{
			Named: map[string]any{":path": p},
			ResultFunc: func(s *sqlite.Stmt) error {
				had = true
				sum := make([]byte, s.ColumnLen(1))
				s.ColumnBytes(1, sum)
				old = rowInfo{n: s.ColumnInt64(0), sum: sum, size: s.ColumnInt64(2), mtime: s.ColumnInt64(3)}
				return nil
			},
		})
	})
	if err != nil {
		return fc, fmt.Errorf("sync %s: %w", p, err)
	}
	var r *fileResult
	gone := !queue.IsTaskFileName(name)
	if !gone {
		entries, err := dirEntry(dir, name)
		if err != nil {
			return fc, fmt.Errorf("sync %s: %w", p, err)
		}
		if entries == nil {
			gone = true
		} else {
			r = readFile(dir, *entries, old, had)
			if r.err != nil && errors.Is(r.err, fs.ErrNotExist) {
				gone = true
			}
		}
	}
	err = db.write(ctx, func(conn *sqlite.Conn) error {
		if gone {
			if !had {
				return nil
			}
			keys, err := deleteRow(conn, old.n)
			if err != nil {
				return err
			}
			fc.Removed = true
			return markDups(conn, keys)
		}
		ch, err := apply(conn, p, r, old, had)
		if err != nil {
			return err
		}
		fc.Added = ch.added
		fc.Updated = ch.updated
		fc.Err = r.err
		return markDups(conn, ch.keys)
	})
	if err != nil {
		return fc, fmt.Errorf("sync %s: %w", p, err)
	}
	return fc, nil
}

// dirEntry stats one name the way [queue.Dir.List] would, or returns nil
// when it does not exist.
func dirEntry(dir *queue.Dir, name string) (*queue.Entry, error) {
	entries, err := dir.List()
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Name == name {
			return &e, nil
		}
	}
	return nil, nil
}

// readFile reads, hashes and (when the content is new) parses one file.
func readFile(dir *queue.Dir, e queue.Entry, old rowInfo, had bool) *fileResult {
	r := &fileResult{name: e.Name, size: e.Size, mtime: e.ModTime.UnixNano()}
	if e.Problem != nil {
		r.err = &queue.ParseError{Msg: e.Problem.Error()}
		r.sum = []byte{}
		return r
	}
	raw, fi, err := dir.Read(e.Name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			r.err = err
			return r
		}
		r.err = &queue.ParseError{Msg: err.Error()}
		r.sum = []byte{}
		return r
	}
	r.size, r.mtime = fi.Size(), fi.ModTime().UnixNano()
	sum := sha256.Sum256(raw)
	r.sum = sum[:]
	if had && bytes.Equal(old.sum, r.sum) {
		r.touched = true
		return r
	}
	t, err := queue.Parse(raw)
	if err != nil {
		r.err = err
		return r
	}
	r.task = t
	return r
}

type rowChange struct {
	added, updated bool
	keys           []string // ids and aliases whose duplicate flags need a look
}

func countChange(st *ScanStats, r *fileResult, ch rowChange, had bool) {
	switch {
	case r.touched:
	case r.err != nil:
		st.Failed++
	default:
		st.Parsed++
	}
	if ch.added {
		st.Added++
	} else if ch.updated {
		st.Updated++
	}
}

// apply writes one file's result into its row.
func apply(conn *sqlite.Conn, p string, r *fileResult, old rowInfo, had bool) (rowChange, error) {
	var ch rowChange
	if r.touched {
		err := sqlitex.Execute(conn, `UPDATE tasks SET size = :size, mtime = :mtime WHERE n = :n`, &sqlitex.ExecOptions{
			Named: map[string]any{":size": r.size, ":mtime": r.mtime, ":n": old.n},
		})
		return ch, err
	}
	if r.err != nil {
		return applyFailure(conn, p, r, old, had)
	}
	oldKeys, err := rowKeys(conn, old.n, had)
	if err != nil {
		return ch, err
	}
	t := r.task
	data, err := json.Marshal(t)
	if err != nil {
		return ch, err
	}
	var files, console []string
	for _, f := range t.SuspectFiles {
		files = append(files, f.Path)
	}
	first := ""
	if len(t.SuspectFiles) > 0 {
		first = t.SuspectFiles[0].String()
	}
	if t.Capture != nil {
		console = t.Capture.ConsoleErrors
	}
	args := map[string]any{
		":path": p, ":sha256": r.sum, ":size": r.size, ":mtime": r.mtime,
		":id": t.ID, ":key": t.Key, ":key_num": int64(t.Num()), ":title": t.Title,
		":status": string(t.Status), ":trust": string(t.Trust), ":severity": string(t.Severity),
		":sev_rank": int64(t.Severity.Rank()), ":kind": string(t.Kind), ":wave": int64(t.Wave),
		":plan": t.Plan, ":assignee": t.Assignee, ":created": unixNano(t.Created), ":updated": unixNano(t.Updated),
		":terminal": boolInt(t.Status.Terminal()), ":first_file": first,
		":console": strings.Join(console, "\n"), ":files": strings.Join(files, "\n"),
		":data": string(data), ":body": string(t.Body),
	}
	err = sqlitex.Execute(conn, `
		INSERT INTO tasks (path, sha256, size, mtime, id, key, key_num, title, status, trust, severity,
			sev_rank, kind, wave, plan, assignee, created, updated, terminal, first_file, console, files,
			data, body, state, error, error_line, stale)
		VALUES (:path, :sha256, :size, :mtime, :id, :key, :key_num, :title, :status, :trust, :severity,
			:sev_rank, :kind, :wave, :plan, :assignee, :created, :updated, :terminal, :first_file, :console, :files,
			:data, :body, 'ok', '', 0, 0)
		ON CONFLICT (path) DO UPDATE SET sha256 = excluded.sha256, size = excluded.size, mtime = excluded.mtime,
			id = excluded.id, key = excluded.key, key_num = excluded.key_num, title = excluded.title,
			status = excluded.status, trust = excluded.trust, severity = excluded.severity,
			sev_rank = excluded.sev_rank, kind = excluded.kind, wave = excluded.wave, plan = excluded.plan,
			assignee = excluded.assignee, created = excluded.created, updated = excluded.updated,
			terminal = excluded.terminal, first_file = excluded.first_file, console = excluded.console,
			files = excluded.files, data = excluded.data, body = excluded.body,
			state = 'ok', error = '', error_line = 0, stale = 0`, &sqlitex.ExecOptions{Named: args})
	if err != nil {
		return ch, fmt.Errorf("upsert %s: %w", p, err)
	}
	n := old.n
	if !had {
		n = conn.LastInsertRowID()
		ch.added = true
	} else {
		ch.updated = true
		if err := sqlitex.Execute(conn, `DELETE FROM deps WHERE task_n = :n`, &sqlitex.ExecOptions{Named: map[string]any{":n": n}}); err != nil {
			return ch, err
		}
	}
	for _, d := range t.DependsOn {
		ref, err := queue.ParseRef(d)
		if err != nil {
			continue // Parse already refused these; keep going if it ever lets one by
		}
		err = sqlitex.Execute(conn, `INSERT OR IGNORE INTO deps (task_n, ref) VALUES (:n, :ref)`,
			&sqlitex.ExecOptions{Named: map[string]any{":n": n, ":ref": ref.String()}})
		if err != nil {
			return ch, err
		}
	}
	ch.keys = append(oldKeys, t.ID, t.Key)
	return ch, nil
}

// applyFailure records a file that does not parse. A row with good data
// keeps it, marked stale; a new file gets a row with its error alone.
func applyFailure(conn *sqlite.Conn, p string, r *fileResult, old rowInfo, had bool) (rowChange, error) {
	ch := rowChange{added: !had, updated: had}
	state, msg, line := StateInvalid, r.err.Error(), 0
	var pe *queue.ParseError
	if errors.As(r.err, &pe) {
		line = pe.Line
		if pe.Conflict {
			state = StateConflict
		}
		msg = queue.WithPath(pe, p).Error()
	}
	keyNum := keyNumFromName(path.Base(p))
	err := sqlitex.Execute(conn, `
		INSERT INTO tasks (path, sha256, size, mtime, key_num, title, state, error, error_line)
		VALUES (:path, :sha256, :size, :mtime, :key_num, :title, :state, :error, :line)
		ON CONFLICT (path) DO UPDATE SET sha256 = excluded.sha256, size = excluded.size,
			mtime = excluded.mtime, state = excluded.state, error = excluded.error,
			error_line = excluded.error_line, stale = (id != ''),
			key_num = coalesce(key_num, excluded.key_num)`,
		&sqlitex.ExecOptions{Named: map[string]any{
			":path": p, ":sha256": r.sum, ":size": r.size, ":mtime": r.mtime, ":key_num": keyNum,
			":title": path.Base(p), ":state": state, ":error": msg, ":line": int64(line),
		}})
	return ch, err
}

// keyNumFromName reads n out of a file named SNAG-n - ..., so a file that
// never parsed still holds its alias number against reuse.
func keyNumFromName(name string) any {
	head, _, ok := strings.Cut(name, " ")
	if !ok {
		head = strings.TrimSuffix(name, ".md")
	}
	if n, err := queue.AliasNumber(head); err == nil {
		return int64(n)
	}
	return nil
}

func rowKeys(conn *sqlite.Conn, n int64, had bool) ([]string, error) {
	if !had {
		return nil, nil
	}
	var keys []string
	err := sqlitex.Execute(conn, `SELECT id, key FROM tasks WHERE n = :n`, &sqlitex.ExecOptions{
		Named: map[string]any{":n": n},
		ResultFunc: func(s *sqlite.Stmt) error {
			keys = append(keys, s.ColumnText(0), s.ColumnText(1))
			return nil
		},
	})
	return keys, err
}

func deleteRow(conn *sqlite.Conn, n int64) ([]string, error) {
	keys, err := rowKeys(conn, n, true)
	if err != nil {
		return nil, err
	}
	return keys, sqlitex.Execute(conn, `DELETE FROM tasks WHERE n = :n`, &sqlitex.ExecOptions{Named: map[string]any{":n": n}})
}

// markDups recomputes the duplicate flag of every row that shares an id or
// alias with the given ones.
func markDups(conn *sqlite.Conn, keys []string) error {
	done := map[string]bool{}
	for _, k := range keys {
		if k == "" || done[k] {
			continue
		}
		done[k] = true
		col := "id"
		if strings.HasPrefix(k, queue.AliasPrefix) {
			col = "key"
		}
		q := `UPDATE tasks SET dup = (
				(SELECT count(*) FROM tasks t WHERE t.id = tasks.id) > 1 OR
				(SELECT count(*) FROM tasks t WHERE t.key = tasks.key) > 1)
			WHERE ` + col + ` = :k`
		if err := sqlitex.Execute(conn, q, &sqlitex.ExecOptions{Named: map[string]any{":k": k}}); err != nil {
			return fmt.Errorf("mark duplicates: %w", err)
		}
	}
	return nil
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

