package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/queue"
	"github.com/snagdev/snag/watch"
)

// apply brings the index in step with one batch from the watcher. It holds
// the write lock, so a batch never interleaves with a claim.
func (d *Daemon) apply(ctx context.Context, b watch.Batch, polling bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	if b.Config {
		if cfg, err := queue.LoadConfig(d.p.Abs(d.configName())); err != nil {
			d.log.Warn("config.json not reloaded", "err", err)
		} else {
			d.p.Config = cfg
			d.cfg.Store(&cfg)
		}
	}
	changed := false
	if len(b.Files) > stormFiles && !b.Rescan {
		// A storm (a git checkout, a script): one rescan reads the files in
		// parallel and writes them in one transaction, where a transaction
		// per file would take seconds. The names it covers need no settling.
		b.Rescan, b.Reasons = true, []string{fmt.Sprintf("%d files changed", len(b.Files))}
	}
	if b.Rescan {
		// The start, an overflow, a replaced folder and the timer hash every
		// file; polling compares sizes and times, which is cheap enough to
		// run every second.
		hash := !(len(b.Reasons) == 1 && b.Reasons[0] == "poll")
		st, err := d.p.DB.Scan(ctx, d.p.Tasks, index.ScanOptions{Hash: hash})
		if err != nil {
			d.log.Error("rescan failed", "reasons", b.Reasons, "err", err)
			return
		}
		switch {
		case st.FolderGone && !d.tasksGone:
			d.log.Warn("tasks/ is gone (a branch without it checked out?): no tasks until it is back; snag add and claims are refused meanwhile",
				"folder", d.p.Tasks.Path())
		case !st.FolderGone && d.tasksGone:
			d.log.Info("tasks/ is back", "folder", d.p.Tasks.Path(), "files", st.Files)
		}
		d.tasksGone = st.FolderGone
		if st.Changed() && d.ready.Load() {
			d.audit(ctx, index.AuditEntry{Actor: queue.Person, Agent: fileAgent, Action: "edit", Outcome: "ok",
				Detail: fmt.Sprintf("files changed together (%s): %d added, %d changed, %d removed",
					strings.Join(b.Reasons, ", "), st.Added, st.Updated, st.Removed)})
		}
		if st.Changed() || !d.ready.Load() {
			d.log.Info("rescan", "reasons", b.Reasons, "files", st.Files, "added", st.Added,
				"updated", st.Updated, "removed", st.Removed, "failed", st.Failed, "took", st.Duration)
			d.hub.publish("rescan", map[string]any{"reasons": b.Reasons, "files": st.Files,
				"added": st.Added, "updated": st.Updated, "removed": st.Removed})
			changed = true
		} else {
			d.log.Debug("rescan", "reasons", b.Reasons, "files", st.Files, "changed", false)
		}
		if !d.ready.Load() {
			d.reconcile(ctx, nil)
			d.adoptSessions(ctx)
			d.ready.Store(true)
		} else if st.Changed() {
			d.reconcile(ctx, nil)
		}
	}
	done := map[string]bool{}
	if b.Rescan && len(b.Files) > stormFiles {
		for _, name := range b.Files {
			d.cancelSettle(name)
		}
		b.Files = nil
	}
	for from, to := range d.renames(ctx, b.Files) {
		if d.move(ctx, from, to) {
			changed = true
		}
		done[from], done[to] = true, true
	}
	for _, name := range b.Files {
		if done[name] {
			continue
		}
		if d.syncOne(ctx, name, false) {
			changed = true
		}
	}
	if changed {
		d.writePlan(ctx)
	}
}

func (d *Daemon) configName() string { return "config.json" }

// fileAgent names, in the audit log, the task files as the author of a
// change a person made by editing them (snag cannot tell who saved).
const fileAgent = "the file"

// auditFileEdit writes the audit entry of a change the watcher found in
// one task file: what a person changed by hand, field by field. snag's
// own writes never get here: they are indexed in their own transaction,
// and the watcher finds them unchanged.
func (d *Daemon) auditFileEdit(ctx context.Context, p string, before, after *index.Row) {
	e := index.AuditEntry{Actor: queue.Person, Agent: fileAgent, Action: "edit", Outcome: "ok"}
	switch {
	case after == nil && before != nil:
		e.TaskID, e.Detail = before.ID, "removed "+p
	case after == nil:
		return
	case after.State != index.StateOK:
		e.TaskID, e.Outcome, e.Detail = after.ID, "invalid", p+": "+after.Error
	case before == nil || before.ID != after.ID:
		e.TaskID, e.Detail = after.ID, "added "+p
	default:
		e.TaskID = after.ID
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
		e.Detail = strings.Join(ch, "; ")
	}
	d.audit(ctx, e)
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
// looked at again once it has had time to settle (settled is then true).
func (d *Daemon) syncOne(ctx context.Context, name string, settled bool) bool {
	p := path.Join(index.TasksFolder, name)
	if !settled && d.unchanged(ctx, name, p) {
		return false // snag's own write, indexed in its transaction; or nothing new
	}
	if !settled && d.isSettling(name) {
		// Seen missing or broken a moment ago: an editor is at work, and
		// what reads well now may be half of its write. The look already
		// due indexes it, once, whole.
		return false
	}
	if !settled && d.looksWorse(ctx, name, p) {
		d.settleLater(name)
		return false
	}
	d.cancelSettle(name)
	before, _ := d.p.DB.RowAt(ctx, p)
	fc, err := d.p.DB.SyncFile(ctx, d.p.Tasks, name)
	if err != nil {
		d.log.Error("sync failed", "file", p, "err", err)
		return false
	}
	if !fc.Added && !fc.Updated && !fc.Removed {
		return false
	}
	after, _ := d.p.DB.RowAt(ctx, p)
	d.auditFileEdit(ctx, p, before, after)
	if row, err := d.p.DB.RowAt(ctx, p); err == nil && row.ID != "" && row.State == index.StateOK {
		d.reconcile(ctx, []string{row.ID})
	}
	ev := map[string]any{"path": p, "added": fc.Added, "removed": fc.Removed}
	if fc.Err != nil {
		ev["error"] = fc.Err.Error()
		d.hub.publish("problem", ev)
	} else {
		d.hub.publish("task", ev)
	}
	return true
}

// unchanged reports whether the file still has the size and modification
// time it was indexed with.
func (d *Daemon) unchanged(ctx context.Context, name, p string) bool {
	in, found, err := d.p.DB.IndexedAt(ctx, p)
	if err != nil || !found {
		return false
	}
	fi, err := os.Lstat(filepath.Join(d.p.Tasks.Path(), name))
	return err == nil && fi.Mode().IsRegular() && fi.Size() == in.Size && fi.ModTime().UnixNano() == in.MTime
}

// looksWorse reports whether the file now reads as gone or broken while its
// row is good.
func (d *Daemon) looksWorse(ctx context.Context, name, p string) bool {
	state, found, err := d.p.DB.StateOf(ctx, p)
	if err != nil || !found || state != index.StateOK {
		return false
	}
	raw, _, err := d.p.Tasks.Read(name)
	if err != nil {
		return true // gone, or unreadable for now
	}
	_, perr := queue.Parse(raw)
	return perr != nil
}

func (d *Daemon) settleLater(name string) {
	d.settleMu.Lock()
	defer d.settleMu.Unlock()
	if t, ok := d.settling[name]; ok {
		t.Reset(d.opts.Settle)
		return
	}
	d.settling[name] = time.AfterFunc(d.opts.Settle, func() {
		d.settleMu.Lock()
		delete(d.settling, name)
		d.settleMu.Unlock()
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.p == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if d.syncOne(ctx, name, true) {
			d.writePlan(ctx)
		}
	})
}

// isSettling reports whether name waits for a second look: it was seen
// missing or broken less than the settle time ago.
func (d *Daemon) isSettling(name string) bool {
	d.settleMu.Lock()
	defer d.settleMu.Unlock()
	_, ok := d.settling[name]
	return ok
}

// renames finds the task files renamed within tasks/: a name of the batch,
// or one left to settle, that is gone while the id its row had is in a
// file of the batch that exists. It maps the old names to the new.
func (d *Daemon) renames(ctx context.Context, names []string) map[string]string {
	d.settleMu.Lock()
	candidates := slices.Concat(names, slices.Collect(maps.Keys(d.settling)))
	d.settleMu.Unlock()
	gone := map[string]string{} // id -> old name
	for _, name := range candidates {
		if _, err := os.Lstat(filepath.Join(d.p.Tasks.Path(), name)); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if row, err := d.p.DB.RowAt(ctx, path.Join(index.TasksFolder, name)); err == nil && row.ID != "" {
			gone[row.ID] = name
		}
	}
	if len(gone) == 0 {
		return nil
	}
	moved := map[string]string{}
	for _, name := range names {
		raw, _, err := d.p.Tasks.Read(name)
		if err != nil {
			continue
		}
		t, err := queue.Parse(raw)
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

// move indexes a rename in one transaction, so no reader ever sees the
// task twice (two files with its id) or not at all.
func (d *Daemon) move(ctx context.Context, from, to string) bool {
	d.cancelSettle(from)
	d.cancelSettle(to)
	err := d.p.DB.Update(ctx, func(tx *index.Tx) error {
		if err := tx.SyncFile(d.p.Tasks, from); err != nil {
			return err
		}
		return tx.SyncFile(d.p.Tasks, to)
	})
	if err != nil {
		d.log.Error("sync of a rename failed", "from", from, "to", to, "err", err)
		return false
	}
	p := path.Join(index.TasksFolder, to)
	if row, err := d.p.DB.RowAt(ctx, p); err == nil && row.ID != "" && row.State == index.StateOK {
		d.audit(ctx, index.AuditEntry{Actor: queue.Person, Agent: fileAgent, Action: "edit", TaskID: row.ID, Outcome: "ok",
			Detail: fmt.Sprintf("renamed %s to %s", from, to)})
		d.reconcile(ctx, []string{row.ID})
	}
	d.hub.publish("task", map[string]any{"path": path.Join(index.TasksFolder, from), "added": false, "removed": true, "renamed": p})
	d.hub.publish("task", map[string]any{"path": p, "added": true, "removed": false})
	return true
}

func (d *Daemon) cancelSettle(name string) {
	d.settleMu.Lock()
	defer d.settleMu.Unlock()
	if t, ok := d.settling[name]; ok {
		t.Stop()
		delete(d.settling, name)
	}
}

func (d *Daemon) stopSettling() {
	d.settleMu.Lock()
	defer d.settleMu.Unlock()
	for name, t := range d.settling {
		t.Stop()
		delete(d.settling, name)
	}
	d.p = nil
}

// writePlan asks for plan.json to be regenerated. Requests are debounced:
// one write follows a burst of changes, PlanDelay after the first.
func (d *Daemon) writePlan(ctx context.Context) {
	d.planMu.Lock()
	defer d.planMu.Unlock()
	if d.planTimer == nil && !d.planStopped {
		// Wait at least ten times as long as the last write took, so a
		// burst of claims on a large queue is not spent rewriting it.
		d.planTimer = time.AfterFunc(max(d.opts.PlanDelay, 10*d.planTook), d.flushPlan)
	}
}

// flushPlan writes plan.json from the index as it is now. It reads one
// consistent snapshot and needs no write lock; planMu keeps two flushes
// from racing to the rename.
func (d *Daemon) flushPlan() {
	d.planMu.Lock()
	defer d.planMu.Unlock()
	d.planTimer = nil
	if d.planStopped {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := d.p.WritePlan(ctx); err != nil {
		d.log.Warn("plan.json not written", "err", err)
	}
	d.planTook = time.Since(start)
}

// stopPlan writes a pending plan.json now and stops further writes.
func (d *Daemon) stopPlan() {
	d.planMu.Lock()
	pending := d.planTimer != nil && d.planTimer.Stop()
	d.planTimer = nil
	d.planMu.Unlock()
	if pending {
		d.flushPlan()
	}
	d.planMu.Lock()
	d.planStopped = true
	d.planMu.Unlock()
}
