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

	"github.com/snagdev/snag/queue"
)

// NoteRow is a note as the index holds it.
type NoteRow struct {
	Path    string    `json:"path"` // relative to .snag/
	ID      string    `json:"id,omitempty"`
	Key     string    `json:"key"`
	Title   string    `json:"title"`
	Kind    string    `json:"kind"`
	Trust   string    `json:"trust"`
	Author  string    `json:"author,omitempty"`
	Created time.Time `json:"created,omitzero"`
	Tasks   []string  `json:"tasks,omitempty"`
	Files   []string  `json:"files,omitempty"`
	Body    string    `json:"-"`
	Error   string    `json:"error,omitempty"`
	Snippet string    `json:"snippet,omitempty"` // of a search hit
}

const noteColumns = `path, id, key, title, kind, trust, author, created, tasks, files, body, error`

func scanNote(st *sqlite.Stmt) NoteRow {
	n := NoteRow{Path: st.ColumnText(0), ID: st.ColumnText(1), Key: st.ColumnText(2), Title: st.ColumnText(3),
		Kind: st.ColumnText(4), Trust: st.ColumnText(5), Author: st.ColumnText(6), Tasks: strings.Fields(st.ColumnText(8)),
		Files: strings.Fields(st.ColumnText(9)), Body: st.ColumnText(10), Error: st.ColumnText(11)}
	if c := st.ColumnInt64(7); c != 0 {
		n.Created = time.Unix(0, c)
	}
	return n
}

// SyncNotes brings the notes table in step with the folder dir
// (.snag/notes): new and changed files (by size and modification time)
// are read, removed ones dropped. A file that does not parse keeps a row
// with its error.
func (db *DB) SyncNotes(ctx context.Context, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("notes: %w", err)
	}
	type stamp struct{ size, mtime int64 }
	onDisk := map[string]stamp{}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		onDisk[queue.NotesFolder+"/"+e.Name()] = stamp{fi.Size(), fi.ModTime().UnixNano()}
	}
	indexed := map[string]stamp{}
	err = db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT path, size, mtime FROM notes`, &sqlitex.ExecOptions{
			ResultFunc: func(st *sqlite.Stmt) error {
				indexed[st.ColumnText(0)] = stamp{st.ColumnInt64(1), st.ColumnInt64(2)}
				return nil
			}})
	})
	if err != nil {
		return err
	}
	var changed, gone []string
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
		return nil
	}
	return db.write(ctx, func(conn *sqlite.Conn) error {
		for _, p := range gone {
			if err := sqlitex.Execute(conn, `DELETE FROM notes WHERE path = :p`, &sqlitex.ExecOptions{Named: map[string]any{":p": p}}); err != nil {
				return err
			}
		}
		for _, p := range changed {
			raw, err := os.ReadFile(filepath.Join(dir, strings.TrimPrefix(p, queue.NotesFolder+"/")))
			if err != nil {
				continue // gone meanwhile: the next sync drops it
			}
			s := onDisk[p]
			args := map[string]any{":p": p, ":size": s.size, ":mtime": s.mtime, ":id": "", ":key": "", ":num": int64(0),
				":title": "", ":kind": "", ":trust": "", ":author": "", ":created": int64(0), ":tasks": "", ":files": "",
				":body": string(raw), ":error": ""}
			n, err := queue.ParseNote(raw)
			if err != nil {
				args[":error"] = err.Error()
				args[":title"] = strings.TrimSuffix(filepath.Base(p), ".md")
			} else {
				args[":id"], args[":key"], args[":num"], args[":title"] = n.ID, n.Key, int64(queue.NoteNum(n.Key)), n.Title
				args[":kind"], args[":trust"], args[":author"] = n.Kind, string(n.Trust), n.Author
				args[":tasks"], args[":files"], args[":body"] = strings.Join(n.Tasks, " "), strings.Join(n.Files, " "), string(n.Body)
				if !n.Created.IsZero() {
					args[":created"] = n.Created.UnixNano()
				}
			}
			err = sqlitex.Execute(conn, `INSERT INTO notes (path, size, mtime, id, key, key_num, title, kind, trust, author,
				created, tasks, files, body, error) VALUES (:p, :size, :mtime, :id, :key, :num, :title, :kind, :trust, :author,
				:created, :tasks, :files, :body, :error)
				ON CONFLICT (path) DO UPDATE SET size = :size, mtime = :mtime, id = :id, key = :key, key_num = :num,
				title = :title, kind = :kind, trust = :trust, author = :author, created = :created, tasks = :tasks,
				files = :files, body = :body, error = :error`, &sqlitex.ExecOptions{Named: args})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// Notes lists notes newest first: of kind ("" for any), at most limit.
func (db *DB) Notes(ctx context.Context, kind string, limit int) ([]NoteRow, error) {
	var out []NoteRow
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT `+noteColumns+` FROM notes WHERE (:kind = '' OR kind = :kind) AND error = ''
			ORDER BY created DESC, key_num DESC LIMIT :limit`, &sqlitex.ExecOptions{
			Named:      map[string]any{":kind": kind, ":limit": int64(limit)},
			ResultFunc: func(st *sqlite.Stmt) error { out = append(out, scanNote(st)); return nil }})
	})
	return out, err
}

// Note reads one note by its key (N-7) or id.
func (db *DB) Note(ctx context.Context, ref string) (NoteRow, error) {
	var out NoteRow
	found := false
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT `+noteColumns+` FROM notes WHERE key = :r OR id = :r LIMIT 1`, &sqlitex.ExecOptions{
			Named:      map[string]any{":r": ref},
			ResultFunc: func(st *sqlite.Stmt) error { out, found = scanNote(st), true; return nil }})
	})
	if err == nil && !found {
		err = fmt.Errorf("note %s: %w", ref, ErrNotFound)
	}
	return out, err
}

// NextNoteKey is the lowest note number above every indexed one.
func (db *DB) NextNoteKey(ctx context.Context) (int, error) {
	n := 0
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT coalesce(max(key_num), 0) FROM notes`, &sqlitex.ExecOptions{
			ResultFunc: func(st *sqlite.Stmt) error { n = st.ColumnInt(0); return nil }})
	})
	return n + 1, err
}

// SearchNotes runs a full-text query over the notes' titles, bodies and
// files, best match first: every word must match, the last as a prefix.
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
	err := db.withConn(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT `+qualified("notes", noteColumns)+`, snippet(notes_fts, -1, '[', ']', '…', 10)
			FROM notes_fts JOIN notes ON notes.n = notes_fts.rowid
			WHERE notes_fts MATCH :q ORDER BY rank LIMIT :limit`, &sqlitex.ExecOptions{
			Named: map[string]any{":q": strings.Join(parts, " "), ":limit": int64(limit)},
			ResultFunc: func(st *sqlite.Stmt) error {
				n := scanNote(st)
				n.Snippet = st.ColumnText(12)
				out = append(out, n)
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
