package index

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
)

// NoteRow is a note as the index holds it: one file in one worktree.
type NoteRow struct {
	Tree    string    `json:"tree,omitempty"` // the worktree's top folder, "" for snagd's own
	Path    string    `json:"path"`           // relative to .snag/
	ID      string    `json:"id,omitempty"`
	Key     string    `json:"key"`
	Type    string    `json:"type"`
	Title   string    `json:"title"`
	Branch  string    `json:"branch,omitempty"`
	Commit  string    `json:"commit,omitempty"`
	Trust   string    `json:"trust"`
	Author  string    `json:"author,omitempty"`
	Created time.Time `json:"created,omitzero"`
	Tasks   []string  `json:"tasks,omitempty"`
	Files   []string  `json:"files,omitempty"`
	Links   []LinkRow `json:"links,omitempty"`
	Body    string    `json:"-"`
	Error   string    `json:"error,omitempty"`
	Snippet string    `json:"snippet,omitempty"` // of a search hit
}

// LinkRow is an edge of the decision graph: from the note it is written
// in (From, a key) to another (To, a key or an id as written), with the
// trust of the note or the link's own when lower.
type LinkRow struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Kind  string `json:"kind"`
	Why   string `json:"why,omitempty"`
	Trust string `json:"trust"`
}

// NoteTree is a notes folder to index: Dir, the .snag/notes of the
// worktree Tree ("" for snagd's own).
type NoteTree struct {
	Tree, Dir string
}

const noteColumns = `tree, path, id, key, type, title, branch, commit_, trust, author, created, tasks, files, body, error`

func scanNote(st *sqlite.Stmt) NoteRow {
	n := NoteRow{Tree: st.ColumnText(0), Path: st.ColumnText(1), ID: st.ColumnText(2), Key: st.ColumnText(3),
		Type: st.ColumnText(4), Title: st.ColumnText(5), Branch: st.ColumnText(6), Commit: st.ColumnText(7),
		Trust: st.ColumnText(8), Author: st.ColumnText(9), Tasks: strings.Fields(st.ColumnText(11)),
		Files: strings.Fields(st.ColumnText(12)), Body: st.ColumnText(13), Error: st.ColumnText(14)}
	if c := st.ColumnInt64(10); c != 0 {
		n.Created = time.Unix(0, c)
	}
	return n
}

// bestNotes is the notes that read cleanly, one row per note: a note in
// several worktrees is read from snagd's own when it is there, else from
// the copy last written.
const bestNotes = `WITH best AS (SELECT *, row_number() OVER (
		PARTITION BY CASE WHEN id = '' THEN tree || '/' || path ELSE id END
		ORDER BY tree != '', mtime DESC) AS rn
	FROM notes WHERE error = '')`

// SyncNotes brings the notes table in step with the folders of trees:
// new and changed files (by size and modification time) are read, and
// removed ones, and the rows of worktrees no longer in trees, dropped. A
// file that does not parse keeps a row with its error. A note's links are
// indexed with it, in the same transaction. It returns how many files
// it read or dropped.
func (db *DB) SyncNotes(ctx context.Context, trees []NoteTree) (int, error) {
	type stamp struct{ size, mtime int64 }
	type at struct{ tree, path string }
	onDisk := map[at]stamp{}
	dirs := map[string]string{}
	for _, t := range trees {
		dirs[t.Tree] = t.Dir
		ents, err := os.ReadDir(t.Dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("notes: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue
			}
			onDisk[at{t.Tree, queue.NotesFolder + "/" + e.Name()}] = stamp{fi.Size(), fi.ModTime().UnixNano()}
		}
	}
	indexed := map[at]stamp{}
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT tree, path, size, mtime FROM notes`, &sqlitex.ExecOptions{
			ResultFunc: func(st *sqlite.Stmt) error {
				indexed[at{st.ColumnText(0), st.ColumnText(1)}] = stamp{st.ColumnInt64(2), st.ColumnInt64(3)}
				return nil
			}})
	})
	if err != nil {
		return 0, err
	}
	var changed, gone []at
	for p, s := range onDisk {
		if old, ok := indexed[p]; !ok || old != s {
			changed = append(changed, p)
		}
	}
	for p := range indexed {
		if _, ok := onDisk[p]; !ok {
			gone = append(gone, p)
		}
	}
	if len(changed) == 0 && len(gone) == 0 {
		return 0, nil
	}
	return len(changed) + len(gone), db.write(ctx, func(conn *sqlite.Conn) error {
		for _, p := range gone {
			if err := deleteNote(conn, p.tree, p.path); err != nil {
				return err
			}
		}
		for _, p := range changed {
			raw, err := os.ReadFile(filepath.Join(dirs[p.tree], strings.TrimPrefix(p.path, queue.NotesFolder+"/")))
			if err != nil {
				continue // gone meanwhile: the next sync drops it
			}
			s := onDisk[p]
			if err := putNote(conn, p.tree, p.path, s.size, s.mtime, raw); err != nil {
				return err
			}
		}
		return nil
	})
}

func deleteNote(conn *sqlite.Conn, tree, path string) error {
	args := &sqlitex.ExecOptions{Named: map[string]any{":t": tree, ":p": path}}
	if err := sqlitex.Execute(conn, `DELETE FROM note_links WHERE note = (SELECT n FROM notes WHERE tree = :t AND path = :p)`, args); err != nil {
		return err
	}
	return sqlitex.Execute(conn, `DELETE FROM notes WHERE tree = :t AND path = :p`, args)
}

// putNote indexes one note file's bytes, and its links.
func putNote(conn *sqlite.Conn, tree, path string, size, mtime int64, raw []byte) error {
	args := map[string]any{":t": tree, ":p": path, ":size": size, ":mtime": mtime, ":id": "", ":key": "", ":num": int64(0),
		":type": "", ":title": "", ":branch": "", ":commit": "", ":trust": "", ":author": "", ":created": int64(0),
		":tasks": "", ":files": "", ":body": string(raw), ":error": ""}
	n, err := codec.ParseNote(raw)
	if err != nil {
		args[":error"] = err.Error()
		args[":title"] = strings.TrimSuffix(filepath.Base(path), ".md")
		key, _, _ := strings.Cut(filepath.Base(path), " ")
		if queue.NoteNum(key) > 0 {
			args[":key"], args[":num"] = key, int64(queue.NoteNum(key))
		}
	} else {
		args[":id"], args[":key"], args[":num"], args[":title"] = n.ID, n.Key, int64(queue.NoteNum(n.Key)), n.Title
		args[":type"], args[":branch"], args[":commit"] = n.Type, n.Branch, n.Commit
		args[":trust"], args[":author"] = string(n.Trust), n.Author
		args[":tasks"], args[":files"], args[":body"] = strings.Join(n.Tasks, " "), strings.Join(n.Files, " "), string(n.Body)
		if !n.Created.IsZero() {
			args[":created"] = n.Created.UnixNano()
		}
	}
	if err := deleteNote(conn, tree, path); err != nil {
		return err
	}
	err = sqlitex.Execute(conn, `INSERT INTO notes (tree, path, size, mtime, id, key, key_num, type, title, branch, commit_,
		trust, author, created, tasks, files, body, error) VALUES (:t, :p, :size, :mtime, :id, :key, :num, :type, :title,
		:branch, :commit, :trust, :author, :created, :tasks, :files, :body, :error)`, &sqlitex.ExecOptions{Named: args})
	if err != nil || n == nil {
		return err
	}
	row := conn.LastInsertRowID()
	for i, l := range n.Links {
		err := sqlitex.Execute(conn, `INSERT INTO note_links (note, pos, to_, kind, why, trust) VALUES (:n, :pos, :to, :kind, :why, :trust)`,
			&sqlitex.ExecOptions{Named: map[string]any{":n": row, ":pos": int64(i), ":to": l.To, ":kind": l.Kind, ":why": l.Why, ":trust": string(l.Trust)}})
		if err != nil {
			return err
		}
	}
	return nil
}

// NoteFilter picks notes: by type, by the branch they were written on, by
// a task they name, or by their files; zero values pick all.
type NoteFilter struct {
	Type, Branch, Task string
	// Query keeps the notes a full-text search matches, best first
	// (engine.Notes runs it).
	Query string
	Limit int
}

// Notes lists notes newest first, one row per note (see bestNotes),
// without their links.
func (db *DB) Notes(ctx context.Context, f NoteFilter) ([]NoteRow, error) {
	if f.Limit <= 0 {
		f.Limit = 20
	}
	var out []NoteRow
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, bestNotes+` SELECT `+noteColumns+` FROM best WHERE rn = 1
			AND (:type = '' OR type = :type) AND (:branch = '' OR branch = :branch)
			AND (:task = '' OR ' ' || tasks || ' ' LIKE '% ' || :task || ' %')
			ORDER BY created DESC, key_num DESC LIMIT +:limit`, &sqlitex.ExecOptions{
			Named:      map[string]any{":type": f.Type, ":branch": f.Branch, ":task": f.Task, ":limit": int64(f.Limit)},
			ResultFunc: func(st *sqlite.Stmt) error { out = append(out, scanNote(st)); return nil }})
	})
	return out, err
}

// Note reads one note by its key (N-7) or id, with the links written in
// it: those of every copy, for a branch may have added one to its own.
func (db *DB) Note(ctx context.Context, ref string) (NoteRow, error) {
	var out NoteRow
	found := false
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		err := sqlitex.Execute(conn, bestNotes+` SELECT `+noteColumns+` FROM best WHERE rn = 1 AND (key = :r OR id = :r)
			ORDER BY created LIMIT 1`, &sqlitex.ExecOptions{
			Named:      map[string]any{":r": ref},
			ResultFunc: func(st *sqlite.Stmt) error { out, found = scanNote(st), true; return nil }})
		if err != nil || !found {
			return err
		}
		out.Links, err = linksWhere(conn, `(notes.id = :id AND :id != '') OR (notes.tree = :t AND notes.path = :p)`,
			map[string]any{":id": out.ID, ":t": out.Tree, ":p": out.Path})
		return err
	})
	if err == nil && !found {
		err = fmt.Errorf("note %s: %w", ref, ErrNotFound)
	}
	return out, err
}

// NoteCopies is every indexed file of the note key or id names, snagd's
// own worktree first, even those that do not read cleanly.
func (db *DB) NoteCopies(ctx context.Context, ref string) ([]NoteRow, error) {
	var out []NoteRow
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT `+noteColumns+` FROM notes WHERE key = :r OR (id = :r AND id != '')
			ORDER BY tree != '', tree, path`, &sqlitex.ExecOptions{
			Named:      map[string]any{":r": ref},
			ResultFunc: func(st *sqlite.Stmt) error { out = append(out, scanNote(st)); return nil }})
	})
	return out, err
}

// LinksTo is every edge that points at the note with key or id, from any
// note, one per source note, kind and target.
func (db *DB) LinksTo(ctx context.Context, key, id string) ([]LinkRow, error) {
	var out []LinkRow
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		var err error
		out, err = linksWhere(conn, `note_links.to_ IN (:key, :id)`, map[string]any{":key": key, ":id": id})
		return err
	})
	return out, err
}

// Links is every edge of the graph, one per source note, kind and target.
func (db *DB) Links(ctx context.Context) ([]LinkRow, error) {
	var out []LinkRow
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		var err error
		out, err = linksWhere(conn, `1`, nil)
		return err
	})
	return out, err
}

// linksWhere reads edges of notes that read cleanly, where cond holds,
// dropping the same edge read from a note's other copies.
func linksWhere(conn *sqlite.Conn, cond string, args map[string]any) ([]LinkRow, error) {
	var out []LinkRow
	seen := map[[3]string]bool{}
	err := sqlitex.Execute(conn, `SELECT notes.key, note_links.to_, note_links.kind, note_links.why,
		CASE WHEN note_links.trust != '' THEN note_links.trust ELSE notes.trust END
		FROM note_links JOIN notes ON notes.n = note_links.note
		WHERE notes.error = '' AND (`+cond+`) ORDER BY notes.tree != '', notes.key_num, note_links.pos`, &sqlitex.ExecOptions{
		Named: args,
		ResultFunc: func(st *sqlite.Stmt) error {
			l := LinkRow{From: st.ColumnText(0), To: st.ColumnText(1), Kind: st.ColumnText(2), Why: st.ColumnText(3), Trust: st.ColumnText(4)}
			k := [3]string{l.From, l.To, l.Kind}
			if !seen[k] {
				seen[k] = true
				out = append(out, l)
			}
			return nil
		}})
	return out, err
}

// NoteProblems are the note files that do not read cleanly, and the keys
// that two different notes share.
func (db *DB) NoteProblems(ctx context.Context) (bad []NoteRow, dupKeys map[string][]NoteRow, err error) {
	dupKeys = map[string][]NoteRow{}
	err = db.withConn(ctx, func(conn *sqlite.Conn) error {
		err := sqlitex.Execute(conn, `SELECT `+noteColumns+` FROM notes WHERE error != '' ORDER BY tree, path`, &sqlitex.ExecOptions{
			ResultFunc: func(st *sqlite.Stmt) error { bad = append(bad, scanNote(st)); return nil }})
		if err != nil {
			return err
		}
		return sqlitex.Execute(conn, bestNotes+` SELECT `+noteColumns+` FROM best WHERE rn = 1 AND key IN
			(SELECT key FROM best WHERE rn = 1 GROUP BY key HAVING count(*) > 1) ORDER BY key_num, created`, &sqlitex.ExecOptions{
			ResultFunc: func(st *sqlite.Stmt) error { n := scanNote(st); dupKeys[n.Key] = append(dupKeys[n.Key], n); return nil }})
	})
	return bad, dupKeys, err
}

// NextNoteKey is the lowest note number above every indexed one, in any
// worktree.
func (db *DB) NextNoteKey(ctx context.Context) (int, error) {
	n := 0
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT coalesce(max(key_num), 0) FROM notes`, &sqlitex.ExecOptions{
			ResultFunc: func(st *sqlite.Stmt) error { n = st.ColumnInt(0); return nil }})
	})
	return n + 1, err
}

// SearchNotes runs a full-text query over the notes' titles, bodies and
// files, best match first, one hit per note: every word must match, the
// last as a prefix.
func (db *DB) SearchNotes(ctx context.Context, query string, limit int) ([]NoteRow, error) {
	words := queryWords(query)
	if len(words) == 0 {
		return nil, nil
	}
	var parts []string
	for i, w := range words {
		p := `"` + strings.ReplaceAll(w, `"`, `""`) + `"`
		if i == len(words)-1 {
			p += "*"
		}
		parts = append(parts, p)
	}
	var out []NoteRow
	seen := map[string]bool{}
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT `+qualified("notes", noteColumns)+`, snippet(notes_fts, -1, '[', ']', '…', 10)
			FROM notes_fts JOIN notes ON notes.n = notes_fts.rowid
			WHERE notes_fts MATCH :q AND notes.error = '' ORDER BY rank, notes.tree != '' LIMIT +:limit`, &sqlitex.ExecOptions{
			Named: map[string]any{":q": strings.Join(parts, " "), ":limit": int64(limit * 4)},
			ResultFunc: func(st *sqlite.Stmt) error {
				n := scanNote(st)
				n.Snippet = st.ColumnText(len(strings.Split(noteColumns, ",")))
				k := n.ID
				if k == "" {
					k = n.Tree + "/" + n.Path
				}
				if !seen[k] && len(out) < limit {
					seen[k] = true
					out = append(out, n)
				}
				return nil
			}})
	})
	if err != nil {
		return nil, fmt.Errorf("search notes %q: %w", query, err)
	}
	return out, nil
}

// qualified prefixes each of a comma-separated list of columns with table.
func qualified(table, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = table + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// BranchLease is an advisory lease on writing the graph on one branch.
type BranchLease struct {
	Workspace string    `json:"workspace"`
	Branch    string    `json:"branch"`
	SessionID int64     `json:"session_id"`
	Holder    string    `json:"holder"`
	Taken     time.Time `json:"taken"`
	Expires   time.Time `json:"expires"`
}

// TakeBranchLease takes or renews the lease on (workspace, branch) for a
// session, for ttl. When another session holds it and it has not expired,
// nothing changes and that lease comes back with ok false.
func (db *DB) TakeBranchLease(ctx context.Context, l BranchLease, ttl time.Duration) (held BranchLease, ok bool, err error) {
	now := time.Now()
	err = db.write(ctx, func(conn *sqlite.Conn) error {
		found := false
		err := sqlitex.Execute(conn, `SELECT session_id, holder, taken, expires FROM branch_leases
			WHERE workspace = :ws AND branch = :b AND expires > :now`, &sqlitex.ExecOptions{
			Named: map[string]any{":ws": l.Workspace, ":b": l.Branch, ":now": now.UnixNano()},
			ResultFunc: func(st *sqlite.Stmt) error {
				found = true
				held = BranchLease{Workspace: l.Workspace, Branch: l.Branch, SessionID: st.ColumnInt64(0), Holder: st.ColumnText(1),
					Taken: time.Unix(0, st.ColumnInt64(2)), Expires: time.Unix(0, st.ColumnInt64(3))}
				return nil
			}})
		if err != nil {
			return err
		}
		if found && held.SessionID != l.SessionID {
			return nil
		}
		taken := now
		if found {
			taken = held.Taken
		}
		held = BranchLease{Workspace: l.Workspace, Branch: l.Branch, SessionID: l.SessionID, Holder: l.Holder, Taken: taken, Expires: now.Add(ttl)}
		ok = true
		return sqlitex.Execute(conn, `INSERT INTO branch_leases (workspace, branch, session_id, holder, taken, expires)
			VALUES (:ws, :b, :s, :h, :taken, :exp) ON CONFLICT (workspace, branch) DO UPDATE SET
			session_id = :s, holder = :h, taken = :taken, expires = :exp`, &sqlitex.ExecOptions{
			Named: map[string]any{":ws": l.Workspace, ":b": l.Branch, ":s": l.SessionID, ":h": l.Holder,
				":taken": taken.UnixNano(), ":exp": held.Expires.UnixNano()}})
	})
	return held, ok, err
}

// BranchLeases are the live branch leases of a workspace, newest first.
func (db *DB) BranchLeases(ctx context.Context, workspace string) ([]BranchLease, error) {
	var out []BranchLease
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT branch, session_id, holder, taken, expires FROM branch_leases
			WHERE workspace = :ws AND expires > :now ORDER BY taken DESC`, &sqlitex.ExecOptions{
			Named: map[string]any{":ws": workspace, ":now": time.Now().UnixNano()},
			ResultFunc: func(st *sqlite.Stmt) error {
				out = append(out, BranchLease{Workspace: workspace, Branch: st.ColumnText(0), SessionID: st.ColumnInt64(1),
					Holder: st.ColumnText(2), Taken: time.Unix(0, st.ColumnInt64(3)), Expires: time.Unix(0, st.ColumnInt64(4))})
				return nil
			}})
	})
	return out, err
}

// SetSessionBranch records the branch a session was last seen on.
func (db *DB) SetSessionBranch(ctx context.Context, id int64, branch string) error {
	return db.write(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `UPDATE sessions SET branch = :b WHERE id = :id AND branch != :b`,
			&sqlitex.ExecOptions{Named: map[string]any{":b": branch, ":id": id}})
	})
}
