package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// Repository is what the worktrees of one repository share inside the one
// snagd that serves them all: which tasks their agents hold, and the
// sequences their keys come from. Each worktree has an engine of its own
// (its files, its index, its sessions); every engine of the repository is
// opened with the same Repository, so that a task is leased in at most one
// worktree at a time and a key is minted once in the whole repository.
//
// The sequences themselves are the live state's (coord.Live.NextAlias:
// live.db in git's common folder, or a team's store), so they outlive the
// snagd and count every key ever minted, in any worktree or branch; the
// Repository raises their floor above every key the other worktrees'
// files use. A Repository is safe for concurrent use.
type Repository struct {
	// mu guards members, expected and reserved. It is held while other
	// engines' leases are read, never while an engine's own lock is.
	mu       sync.Mutex
	members  map[string]*Engine // by root
	expected map[string]bool    // roots whose engines are being opened
	reserved map[string]string  // task id -> the root whose claim of it is under way
	// namesMu serialises the names of new sessions across the worktrees:
	// a registration checks the other worktrees' live names and takes its
	// own under it.
	namesMu sync.Mutex
	// seen caches the identity of other worktrees' task files
	// (sharedAcross), by path.
	seenMu sync.Mutex
	seen   map[string]fileIdentity
}

// NewRepository returns an empty Repository: its worktrees' engines join
// it as they open.
func NewRepository() *Repository {
	return &Repository{members: map[string]*Engine{}, expected: map[string]bool{}, reserved: map[string]string{}}
}

// Expect says that the engine of the worktree whose project root is root
// is being opened: until it has joined and read its files, or [Repository.Gone]
// says it will not, no claim is granted in the repository, since its
// index may hold leases no other engine knows of.
func (r *Repository) Expect(root string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expected[root] = true
}

// Gone says that the engine of root will not be opened after all (it
// failed), or has closed.
func (r *Repository) Gone(root string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.expected, root)
	delete(r.members, root)
}

// roots lists the project roots of the engines open in the repository.
func (r *Repository) roots() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.members))
	for root := range r.members {
		out = append(out, root)
	}
	sort.Strings(out)
	return out
}

func (r *Repository) join(e *Engine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.members[e.root] = e
}

func (r *Repository) leave(e *Engine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.members[e.root] == e {
		delete(r.members, e.root)
	}
	delete(r.expected, e.root)
}

// others calls f with each engine of the repository but e, and its root,
// under r.mu: f reads the other engine's index, never takes an engine's
// lock.
func (r *Repository) others(e *Engine, f func(root string, m *Engine)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for root, m := range r.members {
		if m != e {
			f(root, m)
		}
	}
}

// activity is the activity by branch since since that the repository's
// other worktrees than e's recorded, one list each.
func (r *Repository) activity(ctx context.Context, e *Engine, since time.Time) [][]snag.BranchActivity {
	var out [][]snag.BranchActivity
	r.others(e, func(_ string, m *Engine) {
		if list, _, err := m.p.DB.Activity(ctx, since, 0); err == nil {
			out = append(out, list)
		}
	})
	return out
}

// liveNames lists the names of the live sessions of the repository's
// other worktrees than e's.
func (r *Repository) liveNames(ctx context.Context, e *Engine) []string {
	var out []string
	r.others(e, func(_ string, m *Engine) {
		ss, _ := m.p.DB.LiveSessions(ctx)
		for _, s := range ss {
			out = append(out, s.Name)
		}
	})
	return out
}

// Holder is who holds a task in another worktree of the repository.
type Holder struct {
	Name     string // the holder's name, as its worktree's lease says
	Worktree string // the project root of that worktree
	Epoch    int64
}

// ErrHeldElsewhere is a claim refused because another worktree of the
// repository holds the task, or is claiming it; it wraps index.ErrHeld.
var ErrHeldElsewhere = fmt.Errorf("%w, in another worktree", index.ErrHeld)

// settled waits until every engine the repository expects has joined and
// read its files, so that every lease of the repository is known.
func (r *Repository) settled(ctx context.Context) error {
	for {
		r.mu.Lock()
		waiting := ""
		for root := range r.expected {
			if e := r.members[root]; e == nil || !e.Ready() {
				waiting = root
				break
			}
		}
		r.mu.Unlock()
		if waiting == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("claim: waiting for snagd to read the task files of %s: %w", waiting, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// reserve marks task id as being claimed by e until release is called,
// once the lease row is committed (or the claim failed): it is refused,
// wrapping ErrHeldElsewhere, when another worktree's live lease holds the
// task or its claim of it is under way. Between the reservation and the
// commit no other worktree can take the task; after the commit, e's lease
// row says it is held.
func (r *Repository) reserve(ctx context.Context, e *Engine, id string) (release func(), err error) {
	if err := r.settled(ctx); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if root, ok := r.reserved[id]; ok && root != e.root {
		return nil, fmt.Errorf("%w: a claim of it is under way in %s: claim another task", ErrHeldElsewhere, root)
	}
	for root, m := range r.members { // under r.mu already: not r.others
		if m == e {
			continue
		}
		l, err := m.p.DB.LeaseOf(ctx, id)
		if errors.Is(err, index.ErrNoLease) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("claim: read the leases of %s: %w", root, err)
		}
		return nil, fmt.Errorf("%w: %s holds it in %s (epoch %d): claim another task", ErrHeldElsewhere, l.Holder, root, l.Epoch)
	}
	r.reserved[id] = e.root
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.reserved[id] == e.root {
			delete(r.reserved, id)
		}
	}, nil
}

// elsewhere gives the tasks that the live leases of the repository's other
// worktrees hold, or whose claims are under way there, by task id.
func (r *Repository) elsewhere(ctx context.Context, e *Engine) map[string]Holder {
	out := map[string]Holder{}
	r.others(e, func(root string, m *Engine) {
		ls, _ := m.p.DB.HeldTasks(ctx) // unread now: the grant's reserve checks again
		for _, l := range ls {
			out[l.TaskID] = Holder{Name: l.Holder, Worktree: root, Epoch: l.Epoch}
		}
		for id, by := range r.reserved { // r.mu is held
			if _, ok := out[id]; !ok && by == root {
				out[id] = Holder{Worktree: root}
			}
		}
	})
	return out
}

// floor is the lowest number of kind ("task" for SNAG-n, "note" for N-n)
// e may mint: above floor (what e's own index and folders leave free) and
// above every number the other worktrees' files use, indexed or not.
func (r *Repository) floor(ctx context.Context, e *Engine, kind string, floor int) int {
	for _, root := range r.worktreeRoots(e) {
		floor = max(floor, r.highest(ctx, root, kind)+1)
	}
	return floor
}

// worktreeRoots lists the project roots in the repository's other
// worktrees than e's: the folder of e's root below each worktree's top.
func (r *Repository) worktreeRoots(e *Engine) []string {
	seen := map[string]bool{e.root: true}
	var out []string
	add := func(root string) {
		if !seen[root] {
			seen[root] = true
			out = append(out, root)
		}
	}
	for _, root := range r.roots() {
		add(root)
	}
	if e.gitCommon == "" {
		return out
	}
	top := gitdir.Top(e.root)
	rel, err := filepath.Rel(top, e.root)
	if top == "" || err != nil {
		return out
	}
	for _, wt := range gitdir.Worktrees(e.gitCommon) {
		if real, err := filepath.EvalSymlinks(wt); err == nil {
			wt = real
		}
		add(filepath.Join(wt, rel))
	}
	return out
}

// sharedAcross lists the tasks of e's worktree (tasks, its snapshot) whose
// key a task of another worktree of the repository has under another id:
// a hand-written file, or a branch brought into one worktree, that the
// branches' merge would make a shared key. The rule is the one for a
// shared key in one worktree (project.SharedKeys): the task created first
// keeps the key. Those of e's worktree that must give theirs up are
// returned, for e to renumber in its own files; a worktree whose task
// must give its key up is asked to look (its view, when open, settles it;
// one not open does so when it opens).
func (r *Repository) sharedAcross(ctx context.Context, e *Engine, tasks []queue.Located) []project.Renumbering {
	mine := map[string]queue.Located{}
	for _, l := range tasks {
		if l.Task != nil && l.Task.Key != "" && l.Task.ID != "" {
			mine[l.Task.Key] = l
		}
	}
	if len(mine) == 0 {
		return nil
	}
	var out []project.Renumbering
	for _, root := range r.worktreeRoots(e) {
		dir := filepath.Join(root, ".snag", index.TasksFolder)
		ents, _ := os.ReadDir(dir)
		theirsLose := false
		for _, ent := range ents {
			key, _, _ := strings.Cut(ent.Name(), " ")
			l, ok := mine[strings.TrimSuffix(key, ".md")]
			if !ok || !queue.IsTaskFileName(ent.Name()) {
				continue
			}
			t := r.fileTask(filepath.Join(dir, ent.Name()), ent)
			if t == nil || t.ID == l.Task.ID || t.Key != l.Task.Key {
				continue // the same task on another branch, or not this key after all
			}
			if firstMade(t, l.Task) {
				out = append(out, project.Renumbering{ID: l.Task.ID, Key: l.Task.Key, Path: l.File,
					KeptBy: t.ID, Keeper: filepath.Join(dir, ent.Name())})
			} else {
				theirsLose = true
			}
		}
		if theirsLose {
			r.mu.Lock()
			m := r.members[root]
			r.mu.Unlock()
			if m != nil {
				m.fixKeysLater()
			}
		}
	}
	return out
}

// fileTask is the identity of the task in the file at p (ent its entry),
// or nil when it does not parse: read once, and again only when the
// file's size or time changed, since every worktree holds most tasks
// under the same keys and each look would read them all.
func (r *Repository) fileTask(p string, ent os.DirEntry) *queue.Task {
	fi, err := ent.Info()
	if err != nil {
		return nil
	}
	r.seenMu.Lock()
	c, ok := r.seen[p]
	r.seenMu.Unlock()
	if ok && c.size == fi.Size() && c.mod.Equal(fi.ModTime()) {
		return c.task
	}
	var t *queue.Task
	if b, err := os.ReadFile(p); err == nil {
		if pt, err := codec.Parse(b); err == nil && pt.ID != "" {
			t = &queue.Task{ID: pt.ID, Key: pt.Key, Created: pt.Created}
		}
	}
	r.seenMu.Lock()
	if r.seen == nil || len(r.seen) > maxSeen {
		r.seen = map[string]fileIdentity{} // renamed and removed files' entries go with the rest
	}
	r.seen[p] = fileIdentity{size: fi.Size(), mod: fi.ModTime(), task: t}
	r.seenMu.Unlock()
	return t
}

// maxSeen bounds Repository.seen: past it the cache starts again.
const maxSeen = 100_000

// fileIdentity is a task file of another worktree as sharedAcross last
// read it.
type fileIdentity struct {
	size int64
	mod  time.Time
	task *queue.Task // id, key and created time; nil when it did not parse
}

// firstMade reports whether task a was made before task b, as
// project.SharedKeys orders them: by created time (a task with none counts
// as made last), then by id.
func firstMade(a, b *queue.Task) bool {
	switch {
	case a.Created.IsZero() != b.Created.IsZero():
		return b.Created.IsZero()
	case !a.Created.Equal(b.Created):
		return a.Created.Before(b.Created)
	}
	return a.ID < b.ID
}

// highest is the highest number of kind that the project at root uses: in
// its index when its engine is open here, and in its folder's file names.
func (r *Repository) highest(ctx context.Context, root, kind string) int {
	top := 0
	r.mu.Lock()
	m := r.members[root]
	r.mu.Unlock()
	if m != nil {
		if kind == "task" {
			if n, err := m.p.DB.HighestKey(ctx); err == nil {
				top = n
			}
		} else if n, err := m.p.DB.NextNoteKey(ctx); err == nil {
			top = n - 1
		}
	}
	folder, parse := "tasks", func(key string) int { n, _ := queue.AliasNumber(key); return n }
	if kind == "note" {
		folder, parse = "notes", queue.NoteNum
	}
	ents, _ := os.ReadDir(filepath.Join(root, ".snag", folder))
	for _, ent := range ents {
		key, _, _ := strings.Cut(ent.Name(), " ")
		top = max(top, parse(strings.TrimSuffix(key, ".md")))
	}
	return top
}
