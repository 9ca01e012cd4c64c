package engine

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
)

// The decision graph's writes and reads are the graph service's
// (internal/engine/graph); the engine keeps what its own reads need of
// the notes (the team context's decisions, the activity) and the sync of
// the notes index with their folders, which the watcher's batches call.

// Workspace is the project's workspace name (gitdir.Workspace): where
// its clones meet, and what a client over HTTP may name to be sure it
// reached the right project.
func (e *Engine) Workspace() string { return gitdir.Workspace(e.root, e.Config().Workspace) }

// noteTrees are the notes folders indexed (project.Project.NoteTrees).
func (e *Engine) noteTrees() []index.NoteTree { return e.p.NoteTrees() }

// NoteFilter picks notes (see index.NoteFilter).
type NoteFilter = index.NoteFilter

// Notes lists notes newest first, as f picks them.
func (e *Engine) Notes(ctx context.Context, f NoteFilter) ([]index.NoteRow, error) {
	if err := e.syncNotes(ctx, false); err != nil {
		return nil, err
	}
	if f.Query == "" {
		return e.p.DB.Notes(ctx, f)
	}
	if f.Limit <= 0 {
		f.Limit = 20
	}
	hits, err := e.p.DB.SearchNotes(ctx, f.Query, 4*f.Limit)
	out := hits[:0]
	for _, n := range hits {
		if (f.Type == "" || n.Type == f.Type) && (f.Branch == "" || n.Branch == f.Branch) &&
			(f.Task == "" || slices.Contains(n.Tasks, f.Task)) && len(out) < f.Limit {
			out = append(out, n)
		}
	}
	return out, err
}

// notesFresh is how long the notes index is trusted without reading the
// folders again, when their own modification times have not moved (a
// note added, removed or saved by rename moves them; one rewritten in
// place does not, and is seen within this time).
const notesFresh = 2 * time.Second

// notesSync is when the notes were last brought in step with their
// folders.
type notesSync struct {
	mu     sync.Mutex
	at     time.Time
	mtimes map[string]time.Time
}

// syncNotes brings the notes index in step with the folders of every
// worktree (index.DB.SyncNotes), unless it was moments ago and no folder
// has changed since; force always does.
func (e *Engine) syncNotes(ctx context.Context, force bool) error {
	_, err := e.syncNotesCount(ctx, force)
	return err
}

// syncNotesCount is syncNotes, saying how many files changed.
func (e *Engine) syncNotesCount(ctx context.Context, force bool) (int, error) {
	e.notes.mu.Lock()
	defer e.notes.mu.Unlock()
	trees := e.noteTrees()
	mtimes := make(map[string]time.Time, len(trees))
	same := len(trees) == len(e.notes.mtimes)
	for _, t := range trees {
		var m time.Time
		if fi, err := os.Stat(t.Dir); err == nil {
			m = fi.ModTime()
		}
		mtimes[t.Dir] = m
		if old, ok := e.notes.mtimes[t.Dir]; !ok || !old.Equal(m) {
			same = false
		}
	}
	if !force && same && time.Since(e.notes.at) < notesFresh {
		return 0, nil
	}
	n, err := e.p.DB.SyncNotes(ctx, trees)
	if err != nil {
		return 0, err
	}
	e.notes.at, e.notes.mtimes = time.Now(), mtimes
	return n, nil
}

// nextNoteKey is the first note key to try: past every key indexed, on
// disk in any notes folder, in the repository's other worktrees and
// handed out by the live state.
func (e *Engine) nextNoteKey(ctx context.Context) (int, error) {
	next, err := e.p.DB.NextNoteKey(ctx)
	if err != nil {
		return 0, err
	}
	for _, t := range e.noteTrees() {
		next = max(next, maxNoteOnDisk(t.Dir)+1)
	}
	if r := e.opts.Repository; r != nil {
		next = r.floor(ctx, e, "note", next)
	}
	if next, err = e.teamAlias(ctx, "note", next); err != nil {
		return 0, fmt.Errorf("note: %w", err)
	}
	return next, nil
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
