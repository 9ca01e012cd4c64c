package daemon

import (
	"context"
	"os"
	"path"
	"path/filepath"
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
		}
	}
	changed := false
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
		if st.Changed() || !d.ready.Load() {
			d.log.Info("rescan", "reasons", b.Reasons, "files", st.Files, "added", st.Added,
				"updated", st.Updated, "removed", st.Removed, "failed", st.Failed, "took", st.Duration)
			d.hub.publish("rescan", map[string]any{"reasons": b.Reasons, "files": st.Files,
				"added": st.Added, "updated": st.Updated, "removed": st.Removed})
			changed = true
		}
		if !d.ready.Load() {
			d.reconcile(ctx, nil)
			d.adoptSessions(ctx)
			d.ready.Store(true)
		} else if st.Changed() {
			d.reconcile(ctx, nil)
		}
	}
	for _, name := range b.Files {
		if d.syncOne(ctx, name, false) {
			changed = true
		}
	}
	if changed {
		d.writePlan(ctx)
	}
}

func (d *Daemon) configName() string { return "config.json" }

// syncOne re-reads one task file. One read never proves a file deleted or
// broken: when a file that was good reads as missing or unparsable, it is
// looked at again once it has had time to settle (settled is then true).
func (d *Daemon) syncOne(ctx context.Context, name string, settled bool) bool {
	p := path.Join(index.TasksFolder, name)
	if !settled && d.unchanged(ctx, name, p) {
		return false // snag's own write, indexed in its transaction; or nothing new
	}
	if !settled && d.looksWorse(ctx, name, p) {
		d.settleLater(name)
		return false
	}
	d.cancelSettle(name)
	fc, err := d.p.DB.SyncFile(ctx, d.p.Tasks, name)
	if err != nil {
		d.log.Error("sync failed", "file", p, "err", err)
		return false
	}
	if !fc.Added && !fc.Updated && !fc.Removed {
		return false
	}
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
		d.planTimer = time.AfterFunc(d.opts.PlanDelay, d.flushPlan)
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
	if err := d.p.WritePlan(ctx); err != nil {
		d.log.Warn("plan.json not written", "err", err)
	}
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
