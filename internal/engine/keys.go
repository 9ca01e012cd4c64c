package engine

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// keyFix runs the settling of shared keys one look at a time: a look asked
// for while one runs is made after it (fixKeysLater).
type keyFix struct {
	running, again atomic.Bool
}

// fixKeysLater asks for a look at the keys two tasks share, once the write
// lock is free: after every change the watcher brought (a merge, a pull,
// a hand-written file) and at the start.
func (e *Engine) fixKeysLater() {
	if e.keyFixesOff.Load() {
		return
	}
	if !e.keyFix.running.CompareAndSwap(false, true) {
		e.keyFix.again.Store(true)
		return
	}
	e.keyFixes.Add(1) // under e.mu, as Close stops them: Close waits for it
	go func() {
		defer e.keyFixes.Done()
		for {
			e.fixKeys(e.runCtx)
			if e.keyFix.again.Swap(false) {
				continue
			}
			e.keyFix.running.Store(false)
			// A request between the Swap and the Store found it running
			// and set again: this goroutine looks once more.
			if !e.keyFix.again.Load() || !e.keyFix.running.CompareAndSwap(false, true) {
				return
			}
			e.keyFix.again.Store(false)
		}
	}()
}

// fixKeys settles every key that two tasks share (project.SharedKeys):
// each task but the one created first gets a new key from the sequence
// new keys come from, by an edit of its key: line and a rename of its
// file; its id never changes. Each is audited, announced and logged once:
// once renumbered, the key is no longer shared.
func (e *Engine) fixKeys(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() || !e.ready.Load() || e.keyFixesOff.Load() || ctx.Err() != nil {
		return
	}
	rows, err := e.p.DB.Problems(ctx)
	if err != nil {
		return
	}
	todo := project.SharedKeys(ctx, rows, func(ref queue.Ref) (*index.Item, error) { return e.p.DB.Get(ctx, ref) })
	tasks, _, _ := e.p.DB.Snapshot(ctx)
	if r := e.opts.Repository; r != nil {
		// Keys another worktree's tasks have: settled now, before the
		// branches meet, by the same rule.
		for _, x := range r.sharedAcross(ctx, e, tasks) {
			if !slices.ContainsFunc(todo, func(t project.Renumbering) bool { return t.ID == x.ID }) {
				todo = append(todo, x)
			}
		}
	}
	if len(todo) == 0 {
		return
	}
	for _, r := range todo {
		n, err := e.mintKey(ctx)
		if err != nil {
			e.log.Warn("a key two tasks share is left as it is", "key", r.Key, "err", err)
			return
		}
		newKey := queue.Alias(n)
		newName, err := project.Renumber(e.p.Tasks, r, newKey)
		if newName == "" && err == nil {
			continue // the file changed meanwhile: the next look decides
		}
		if err != nil && newName == "" {
			e.log.Warn("a key two tasks share is left as it is", "key", r.Key, "file", r.Path, "err", err)
			continue
		}
		old := path.Base(r.Path)
		e.syncOne(ctx, old, true)
		e.syncOne(ctx, newName, true)
		keeper := path.Base(r.Keeper)
		if filepath.IsAbs(r.Keeper) {
			keeper = r.Keeper // in another worktree
		}
		detail := fmt.Sprintf("%s was the key of two tasks: %s (created first) keeps it; this one is %s now, its file %s, its id %s unchanged",
			r.Key, keeper, newKey, newName, r.ID)
		if deps := project.Dependents(tasks, r.Key); len(deps) > 0 {
			detail += fmt.Sprintf("; %s depend on %s: each means %s now, change it to %s where it meant this task",
				strings.Join(deps, ", "), r.Key, path.Base(r.Keeper), newKey)
		}
		if err != nil {
			detail += "; " + err.Error()
		}
		e.Audit(ctx, snag.AuditEntry{Actor: queue.System, Agent: "snag", Action: "renumber", TaskID: r.ID, Outcome: "ok", Detail: detail})
		e.hub.Publish(snag.RenumberEvent{Task: newKey, Was: r.Key, ID: r.ID, KeptBy: r.KeptBy})
		e.log.Warn("renumbered a task whose key another task had", "was", r.Key, "now", newKey, "id", r.ID, "file", newName)
	}
	e.writePlan(ctx)
}

// mintKey reserves the next task key number: above every key this
// worktree's index and files and the repository's other worktrees' files
// know, from the live state's sequence. Worktrees and clones adding at
// once, on any branch, and a snagd started again in any of them, take
// numbers from that one sequence: merging their branches needs no
// renumbering.
func (e *Engine) mintKey(ctx context.Context) (int, error) {
	n, err := e.p.DB.NextFreeKey(ctx, e.p.Tasks)
	if err != nil {
		return 0, err
	}
	if r := e.opts.Repository; r != nil {
		n = r.floor(ctx, e, "task", n)
	}
	return e.teamAlias(ctx, "task", n)
}
