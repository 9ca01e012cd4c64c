package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/queue"
)

// NoteInput is a note to write.
type NoteInput struct {
	Title string
	Body  string
	Kind  string // decision (default), observation or action
	Task  string // a task ref it is about, or ""
	Files []string
}

func (e *Engine) notesDir() string { return filepath.Join(e.root, ".snag", queue.NotesFolder) }

// noteTries is how many keys AddNote tries: each try loses only to a note
// file written with that very key in the same instant.
const noteTries = 20

// AddNote writes a note, .snag/notes/N-<n> - <title>.md, with the next
// free key: an agent's is unvetted, with the agent as its author. It is
// indexed for snag_search and the recent decisions at once.
func (e *Engine) AddNote(ctx context.Context, actor queue.Actor, who string, in NoteInput) (index.NoteRow, error) {
	entry := index.AuditEntry{Actor: actor, Agent: who, Action: "note"}
	refused := func(err *Error) (index.NoteRow, error) {
		entry.Outcome, entry.Detail = "refused", err.Message
		e.Audit(ctx, entry)
		return index.NoteRow{}, err
	}
	title := strings.TrimSpace(in.Title)
	if in.Kind == "" {
		in.Kind = "decision"
	}
	switch {
	case title == "" || len(title) > 200:
		return refused(refuse(ErrInvalid, "bad_title", "note: a title of 1 to 200 bytes: the decision or finding in a line"))
	case strings.ContainsFunc(title, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return refused(refuse(ErrInvalid, "bad_title", "note: the title has a control character: keep it on one line"))
	case !slices.Contains(queue.NoteKinds, in.Kind):
		return refused(refuse(ErrInvalid, "bad_kind", "note: unknown kind %q (want decision, observation or action)", in.Kind))
	case len(in.Body) > 32<<10:
		return refused(refuse(ErrInvalid, "long_body", "note: the body is over 32 KiB: keep a note to one decision"))
	case len(in.Files) > 20:
		return refused(refuse(ErrInvalid, "bad_file", "note: over 20 files: name the folder instead"))
	}
	for _, f := range in.Files {
		if len(f) > 512 || strings.ContainsAny(f, "\x00\n") {
			return refused(refuse(ErrInvalid, "bad_file", "note: file %q: a repository path on one line", f))
		}
	}
	now := time.Now().UTC().Truncate(time.Second)
	n := &queue.Note{ID: "note_" + strings.TrimPrefix(queue.NewID(now), queue.IDPrefix), Title: title, Kind: in.Kind,
		Trust: queue.TrustVetted, Created: now, Files: in.Files, Body: []byte(in.Body)}
	if actor != queue.Person {
		n.Trust, n.Author = queue.TrustUnvetted, who
	}
	if in.Task != "" {
		it, err := e.taskOf(ctx, in.Task)
		if err != nil {
			var r *Error
			if errors.As(err, &r) {
				return refused(r)
			}
			return index.NoteRow{}, err
		}
		n.Tasks, entry.TaskID = []string{it.Key}, it.ID
	}
	if err := os.MkdirAll(e.notesDir(), 0o755); err != nil {
		return index.NoteRow{}, fmt.Errorf("note: %w", err)
	}
	if err := e.syncNotes(ctx, true); err != nil {
		return index.NoteRow{}, err
	}
	next, err := e.p.DB.NextNoteKey(ctx)
	if err != nil {
		return index.NoteRow{}, err
	}
	if onDisk := maxNoteOnDisk(e.notesDir()); onDisk >= next {
		next = onDisk + 1
	}
	for i := 0; ; i++ {
		if i == noteTries {
			return index.NoteRow{}, fmt.Errorf("note: every key tried was taken by a note written meanwhile: try again")
		}
		n.Key = queue.NoteAlias(next + i)
		if _, err := queue.ParseNote(queue.FormatNote(n)); err != nil {
			return index.NoteRow{}, fmt.Errorf("note: %w", err)
		}
		err := createFile(filepath.Join(e.notesDir(), queue.NoteFileName(n.Key, n.Title)), queue.FormatNote(n))
		if errors.Is(err, fs.ErrExist) || (err == nil && filesWithKey(e.notesDir(), n.Key) > 1) {
			if err == nil { // another file has the key: give it up, take the next
				os.Remove(filepath.Join(e.notesDir(), queue.NoteFileName(n.Key, n.Title)))
			}
			continue
		}
		if err != nil {
			return index.NoteRow{}, fmt.Errorf("note: %w", err)
		}
		break
	}
	if err := e.syncNotes(ctx, true); err != nil {
		return index.NoteRow{}, err
	}
	entry.Outcome, entry.Detail = "ok", fmt.Sprintf("%s %s %q (%s)", n.Key, n.Kind, n.Title, n.Trust)
	e.Audit(ctx, entry)
	e.hub.Publish("note", map[string]any{"note": n.Key, "kind": n.Kind, "by": who})
	return e.p.DB.Note(ctx, n.Key)
}

// maxNoteOnDisk is the highest N-<n> a file name in dir starts with.
func maxNoteOnDisk(dir string) int {
	ents, _ := os.ReadDir(dir)
	top := 0
	for _, e := range ents {
		key, _, _ := strings.Cut(e.Name(), " ")
		top = max(top, queue.NoteNum(key))
	}
	return top
}

// filesWithKey counts the files in dir whose names start with key.
func filesWithKey(dir, key string) int {
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if k, _, _ := strings.Cut(e.Name(), " "); k == key {
			n++
		}
	}
	return n
}

// Notes lists notes newest first, of kind ("" for any).
func (e *Engine) Notes(ctx context.Context, kind string, limit int) ([]index.NoteRow, error) {
	if err := e.syncNotes(ctx, false); err != nil {
		return nil, err
	}
	return e.p.DB.Notes(ctx, kind, limit)
}

// Note reads one note by its key or id.
func (e *Engine) Note(ctx context.Context, ref string) (index.NoteRow, error) {
	if err := e.syncNotes(ctx, false); err != nil {
		return index.NoteRow{}, err
	}
	n, err := e.p.DB.Note(ctx, strings.ToUpper(ref))
	if errors.Is(err, index.ErrNotFound) {
		n, err = e.p.DB.Note(ctx, ref)
	}
	if errors.Is(err, index.ErrNotFound) {
		return n, refuse(ErrNotFound, "not_found", "no note %s: snag notes lists them", ref)
	}
	return n, err
}

// SearchNotes runs a full-text query over the notes.
func (e *Engine) SearchNotes(ctx context.Context, query string, limit int) ([]index.NoteRow, error) {
	if err := e.syncNotes(ctx, false); err != nil {
		return nil, err
	}
	return e.p.DB.SearchNotes(ctx, query, limit)
}

// notesFresh is how long the notes index is trusted without reading the
// folder again, when the folder's own modification time has not moved
// (a note added, removed or saved by rename moves it; one rewritten in
// place does not, and is seen within this time).
const notesFresh = 2 * time.Second

// notesSync is when the notes were last brought in step with their folder.
type notesSync struct {
	mu    sync.Mutex
	at    time.Time
	mtime time.Time
}

// syncNotes brings the notes index in step with the folder (index.DB.
// SyncNotes), unless it was moments ago and the folder has not changed
// since; force always does.
func (e *Engine) syncNotes(ctx context.Context, force bool) error {
	e.notes.mu.Lock()
	defer e.notes.mu.Unlock()
	var mtime time.Time
	if fi, err := os.Stat(e.notesDir()); err == nil {
		mtime = fi.ModTime()
	}
	if !force && mtime.Equal(e.notes.mtime) && time.Since(e.notes.at) < notesFresh {
		return nil
	}
	if err := e.p.DB.SyncNotes(ctx, e.notesDir()); err != nil {
		return err
	}
	e.notes.at, e.notes.mtime = time.Now(), mtime
	return nil
}
