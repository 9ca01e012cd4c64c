package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/taskfs"
	"github.com/snagdev/snag/internal/watch"
)

// apply brings the index in step with one batch from the watcher (the file
// sync service's, through ApplyBatch). It holds the write lock, so a batch
// never interleaves with a claim.
func (e *Engine) apply(ctx context.Context, b watch.Batch, polling bool) {
	e.polling.Store(polling)
	e.mu.Lock()
	defer e.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	if b.Config {
		e.reloadConfig()
	}
	if b.IndexGone {
		e.restoreIndex(ctx)
	}
	if b.Notes || b.Rescan {
		e.syncNotesChanged(ctx)
	}
	b = e.withoutOwnWrites(ctx, b)
	changed := false
	if b.Rescan {
		var ok bool
		if changed, ok = e.rescan(ctx, b); !ok {
			return
		}
	}
	if e.syncFiles(ctx, b) {
		changed = true
	}
	if changed || b.PlanGone {
		e.writePlan(ctx)
	}
	if changed && e.ready.Load() {
		e.fixKeysLater()
	}
}

// reloadConfig reads config.json again; a config that does not load is
// kept as it was.
func (e *Engine) reloadConfig() {
	cfg, err := queue.LoadConfig(e.p.Abs(e.configName()))
	if err != nil {
		e.log.Warn("config.json not reloaded", "err", err)
		return
	}
	e.p.Config = cfg
	e.cfg.Store(&cfg)
}

// syncNotesChanged indexes the notes again: a note saved by hand, or a
// checkout that brought notes. The graph's readers hear of it as of
// snag's own.
func (e *Engine) syncNotesChanged(ctx context.Context) {
	n, err := e.syncNotesCount(ctx, true)
	if err != nil {
		e.log.Warn("notes not indexed", "err", err)
		return
	}
	if n > 0 && e.ready.Load() {
		e.hub.Publish(snag.NoteEvent{Changed: n})
	}
}

// withoutOwnWrites is the batch with snag's own writes left out of its files,
// and made a rescan when the files left are a storm.
func (e *Engine) withoutOwnWrites(ctx context.Context, b watch.Batch) watch.Batch {
	if b.Rescan {
		return b
	}
	if len(b.Files) > 0 {
		// snag's own writes are no storm, nor anything to read again:
		// claims at a hundred a second leave the watcher no quiet, and its
		// batch, sent at MaxDelay, names a hundred files that are as their
		// writes indexed them. Those are left out (syncOne would pass over
		// them too) before the files left are counted; a checkout's are
		// soon too many.
		if others, ok := e.othersOf(ctx, b.Files); ok {
			b.Files = others
		}
	}
	if len(b.Files) > stormFiles {
		// A storm (a git checkout, a script): one rescan reads the files in
		// parallel and writes them in one transaction, where a transaction
		// per file would take seconds. The names it covers need no settling.
		b.Rescan, b.Reasons = true, []string{fmt.Sprintf("%d files changed", len(b.Files))}
	}
	return b
}

// rescan reads the folder again, says what changed, and at the start (or
// when files changed) makes the leases agree with the files. changed says
// the index changed, or snagd was not ready yet; ok is false when the
// scan failed.
//
// Only a rescan someone asked for (snag doctor, POST /rescan) reads and
// hashes every file. The start, an overflow, a replaced folder, a storm,
// the timer and polling read only the files whose stamp (size, times,
// inode: taskfs.Stamp) is not the one indexed, so a start on 100,000
// unchanged files reads none of them.
func (e *Engine) rescan(ctx context.Context, b watch.Batch) (changed, ok bool) {
	hash := slices.Contains(b.Reasons, "requested")
	st, err := e.p.DB.Scan(ctx, e.p.Tasks, index.ScanOptions{Hash: hash})
	if err != nil {
		e.log.Error("rescan failed", "reasons", b.Reasons, "err", err)
		return false, false
	}
	e.noteTasksFolder(st)
	if st.Changed() && e.ready.Load() {
		e.Audit(ctx, snag.AuditEntry{Actor: queue.Person, Agent: fileAgent, Action: "edit", Outcome: "ok",
			Detail: fmt.Sprintf("files changed together (%s): %d added, %d changed, %d removed",
				strings.Join(b.Reasons, ", "), st.Added, st.Updated, st.Removed)})
	}
	if st.Changed() || !e.ready.Load() {
		e.log.Info("rescan", "reasons", b.Reasons, "files", st.Files, "read", st.Read, "added", st.Added,
			"updated", st.Updated, "removed", st.Removed, "failed", st.Failed, "took", st.Duration)
		e.hub.Publish(snag.RescanEvent{Reasons: b.Reasons, Files: st.Files,
			Added: new(st.Added), Updated: new(st.Updated), Removed: new(st.Removed)})
		changed = true
	} else {
		e.log.Debug("rescan", "reasons", b.Reasons, "files", st.Files, "read", st.Read, "changed", false)
	}
	if !e.ready.Load() {
		e.reconcile(ctx, nil)
		e.adoptSessions(ctx)
		e.ready.Store(true)
		close(e.readyCh)
		e.fixKeysLater()
	} else if st.Changed() {
		e.reconcile(ctx, nil)
	}
	return changed, true
}

// noteTasksFolder logs tasks/ going away and coming back, as a rescan
// finds it.
func (e *Engine) noteTasksFolder(st index.ScanStats) {
	switch {
	case st.FolderGone && !e.tasksGone:
		e.log.Warn("tasks/ is gone (a branch without it checked out?): no tasks until it is back; snag add and claims are refused meanwhile",
			"folder", e.p.Tasks.Path())
	case !st.FolderGone && e.tasksGone:
		e.log.Info("tasks/ is back", "folder", e.p.Tasks.Path(), "files", st.Files)
	}
	e.tasksGone = st.FolderGone
}

// syncFiles brings the batch's files in step one by one, renames first
// (of the files settling too), and reports whether any changed. A storm's
// files the rescan read are not read again: their settling is cancelled.
func (e *Engine) syncFiles(ctx context.Context, b watch.Batch) (changed bool) {
	if b.Rescan && len(b.Files) > stormFiles {
		for _, name := range b.Files {
			e.cancelSettle(name)
		}
		b.Files = nil
	}
	done := map[string]bool{}
	for from, to := range e.renames(ctx, b.Files) {
		if e.rename(ctx, from, to) {
			changed = true
		}
		done[from], done[to] = true, true
	}
	for _, name := range b.Files {
		if done[name] {
			continue
		}
		if e.syncOne(ctx, name, false) {
			changed = true
		}
	}
	return changed
}

func (e *Engine) configName() string { return "config.json" }

// fileAgent names, in the audit log, the task files as the author of a
// change a person made by editing them (snag cannot tell who saved).
const fileAgent = "the file"

// auditFileEdit writes the audit entry of a change the watcher found in
// one task file: what a person changed by hand, field by field. snag's
// own writes never get here: they are indexed in their own transaction,
// and the watcher finds them unchanged.
func (e *Engine) auditFileEdit(ctx context.Context, p string, before, after *index.Row) {
	a := snag.AuditEntry{Actor: queue.Person, Agent: fileAgent, Action: "edit", Outcome: "ok"}
	switch {
	case after == nil && before != nil:
		a.TaskID, a.Detail = before.ID, "removed "+p
	case after == nil:
		return
	case after.State != snag.StateOK:
		a.TaskID, a.Outcome, a.Detail = after.ID, "invalid", p+": "+after.Error
	case before == nil || before.ID != after.ID:
		a.TaskID, a.Detail = after.ID, "added "+p
	default:
		a.TaskID = after.ID
		var ch []string
		field := func(name string, a, b any) {
			if a != b {
				ch = append(ch, fmt.Sprintf("%s %v -> %v", name, orNone(a), orNone(b)))
			}
		}
		field("title", before.Title, after.Title)
		field("status", before.Status, after.Status)
		field("severity", before.Severity, after.Severity)
		field("kind", before.Kind, after.Kind)
		field("wave", before.Wave, after.Wave)
		field("plan", before.Plan, after.Plan)
		field("assignee", before.Assignee, after.Assignee)
		field("trust", before.Trust, after.Trust)
		field("key", before.Key, after.Key)
		if len(ch) == 0 {
			ch = []string{"the body or other fields"}
		}
		a.Detail = strings.Join(ch, "; ")
	}
	e.Audit(ctx, a)
}

// orNone shows an empty value as (none).
func orNone(v any) any {
	if fmt.Sprint(v) == "" {
		return "(none)"
	}
	return v
}

// stormFiles is the most files a batch may name before it is applied as a
// full rescan instead of file by file.
const stormFiles = 64

// syncOne re-reads one task file. One read never proves a file deleted or
// broken: when a file that was good reads as missing or unparsable, it is
// looked at again once it has had time to settle (the Settler, the file
// sync service, has LookAgain call it with settled true).
func (e *Engine) syncOne(ctx context.Context, name string, settled bool) bool {
	p := path.Join(index.TasksFolder, name)
	if !settled && e.unchanged(ctx, name, p) {
		return false // snag's own write, indexed in its transaction; or nothing new
	}
	if !settled && e.isSettling(name) {
		// Seen missing or broken a moment ago: an editor is at work, and
		// what reads well now may be half of its write. The look already
		// due indexes it, once, whole.
		return false
	}
	if !settled && e.looksWorse(ctx, name, p) && e.settleLater(name) {
		return false
	}
	e.cancelSettle(name)
	before, _ := e.p.DB.RowAt(ctx, p)
	fc, err := e.p.DB.SyncFile(ctx, e.p.Tasks, name)
	if err != nil {
		e.log.Error("sync failed", "file", p, "err", err)
		return false
	}
	if !fc.Added && !fc.Updated && !fc.Removed {
		return false
	}
	after, _ := e.p.DB.RowAt(ctx, p)
	e.auditFileEdit(ctx, p, before, after)
	if row, err := e.p.DB.RowAt(ctx, p); err == nil && row.ID != "" && row.State == snag.StateOK {
		e.reconcile(ctx, []string{row.ID})
	}
	if fc.Err != nil {
		e.hub.Publish(snag.ProblemEvent{Path: p, Added: fc.Added, Removed: fc.Removed, Error: fc.Err.Error()})
	} else {
		e.hub.Publish(snag.TaskEvent{Path: p, Added: new(fc.Added), Removed: new(fc.Removed)})
	}
	return true
}

// unchanged reports whether the file still has the size, modification
// time and inode it was indexed with (snag's own write records the inode it
// renamed into place, so a save renamed over it within the same tick of the
// clock is still seen). A save in place within that tick is left to the
// next rescan: snag's own writes are indexed with stamps it does not trust.
func (e *Engine) unchanged(ctx context.Context, name, p string) bool {
	in, found, err := e.p.DB.IndexedAt(ctx, p)
	return err == nil && found && e.stampIs(name, in)
}

// stampIs reports whether the file name has the stamp the index holds of
// it, in (see unchanged).
func (e *Engine) stampIs(name string, in index.Indexed) bool {
	fi, err := os.Lstat(filepath.Join(e.p.Tasks.Path(), name))
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	s := taskfs.StampOf(fi)
	return s.Size == in.Size && s.ModTime == in.MTime && (in.Inode == 0 || s.Inode == in.Inode)
}

// othersOf returns the files of names that are not as the index has them
// (unchanged), with ok true, or ok false once it has found more than
// stormFiles of them. It reads in one transaction on the writer's
// connection (e.mu is held): the writes that made these files keep that
// connection's cache warm, where a pooled connection drops its whole cache
// at its first read after each write, and frees it page by page.
func (e *Engine) othersOf(ctx context.Context, names []string) (others []string, ok bool) {
	err := e.p.DB.Read(ctx, func(tx *index.Tx) error {
		for _, name := range names {
			in, found, err := tx.IndexedAt(path.Join(index.TasksFolder, name))
			if err != nil {
				return err
			}
			if found && e.stampIs(name, in) {
				continue
			}
			if others = append(others, name); len(others) > stormFiles {
				return nil
			}
		}
		return nil
	})
	return others, err == nil && len(others) <= stormFiles
}

// looksWorse reports whether the file now reads as gone or broken while its
// row is good.
func (e *Engine) looksWorse(ctx context.Context, name, p string) bool {
	state, found, err := e.p.DB.StateOf(ctx, p)
	if err != nil || !found || state != snag.StateOK {
		return false
	}
	raw, _, err := e.p.Tasks.Read(name)
	if err != nil {
		return true // gone, or unreadable for now
	}
	_, perr := codec.Parse(raw)
	return perr != nil
}

// renames finds the task files renamed within tasks/: a name of the batch,
// or one left to settle, that is gone while the id its row had is in a
// file of the batch that exists. It maps the old names to the new.
func (e *Engine) renames(ctx context.Context, names []string) map[string]string {
	candidates := slices.Concat(names, e.settlingNames())
	gone := map[string]string{} // id -> old name
	for _, name := range candidates {
		if _, err := os.Lstat(filepath.Join(e.p.Tasks.Path(), name)); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if row, err := e.p.DB.RowAt(ctx, path.Join(index.TasksFolder, name)); err == nil && row.ID != "" {
			gone[row.ID] = name
		}
	}
	if len(gone) == 0 {
		return nil
	}
	moved := map[string]string{}
	for _, name := range names {
		raw, _, err := e.p.Tasks.Read(name)
		if err != nil {
			continue
		}
		t, err := codec.Parse(raw)
		if err != nil {
			continue
		}
		if old, ok := gone[t.ID]; ok && old != name {
			moved[old] = name
			delete(gone, t.ID)
		}
	}
	return moved
}

// rename indexes a rename in one transaction, so no reader ever sees the
// task twice (two files with its id) or not at all.
func (e *Engine) rename(ctx context.Context, from, to string) bool {
	e.cancelSettle(from)
	e.cancelSettle(to)
	err := e.p.DB.Update(ctx, func(tx *index.Tx) error {
		if err := tx.SyncFile(e.p.Tasks, from); err != nil {
			return err
		}
		return tx.SyncFile(e.p.Tasks, to)
	})
	if err != nil {
		e.log.Error("sync of a rename failed", "from", from, "to", to, "err", err)
		return false
	}
	p := path.Join(index.TasksFolder, to)
	if row, err := e.p.DB.RowAt(ctx, p); err == nil && row.ID != "" && row.State == snag.StateOK {
		e.Audit(ctx, snag.AuditEntry{Actor: queue.Person, Agent: fileAgent, Action: "edit", TaskID: row.ID, Outcome: "ok",
			Detail: fmt.Sprintf("renamed %s to %s", from, to)})
		e.reconcile(ctx, []string{row.ID})
	}
	e.hub.Publish(snag.TaskEvent{Path: path.Join(index.TasksFolder, from), Added: new(false), Removed: new(true), Renamed: p})
	e.hub.Publish(snag.TaskEvent{Path: p, Added: new(true), Removed: new(false)})
	return true
}

// Rescan reads every task file now, as the watcher's timer would: for a
// person who wants the index to have seen their latest edits.
func (e *Engine) Rescan(ctx context.Context) {
	e.apply(ctx, watch.Batch{Rescan: true, Reasons: []string{"requested"}}, false)
	e.fixKeys(ctx) // what the rescan found settled before its answer
}

// restoreIndex writes snag.db again when it was deleted or moved away
// while snagd ran (index.DB.Restore): from what snagd holds, so nothing of
// it is lost, the leases of this view's agents included. The watcher says
// so at once; the sweep looks every few seconds too, as a watcher that
// polls sees no removal.
func (e *Engine) restoreIndex(ctx context.Context) {
	done, err := e.p.DB.Restore(ctx)
	switch {
	case err != nil:
		e.log.Error("snag.db was deleted or moved away while snagd ran, and writing it again failed: restart snagd (snag daemon stop), which rebuilds it", "err", err)
	case done:
		e.log.Warn("snag.db was deleted or moved away while snagd ran: written again from what snagd held, nothing lost", "path", e.p.DB.Path())
		e.Audit(ctx, snag.AuditEntry{Actor: queue.System, Action: "restore", Outcome: "ok",
			Detail: "snag.db was deleted or moved away while snagd ran: written again from what snagd held"})
	}
}

// Reindex rebuilds the index from the task files, as snag reindex does
// when no daemon runs, for the person by; live state is kept and leases
// are reconciled with what the files now say.
func (e *Engine) Reindex(ctx context.Context, by string) (index.ScanStats, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, err := e.p.Rebuild(ctx)
	if err != nil {
		return st, err
	}
	e.reconcile(ctx, nil)
	e.Audit(ctx, snag.AuditEntry{Actor: queue.Person, Agent: by, Action: "reindex", Outcome: "ok",
		Detail: fmt.Sprintf("%d files, %d failed", st.Files, st.Failed)})
	e.hub.Publish(snag.RescanEvent{Reasons: []string{"reindex"}, Files: st.Files})
	return st, nil
}
