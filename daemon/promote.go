package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/project"
	"github.com/snagdev/snag/queue"
)

// promote moves a task from the inbox to the queue for a person and, in
// the same turn of the writer's lock, sets the severity and wave they chose
// (zero values keep the file's).
func (d *Daemon) promote(ctx context.Context, r queue.Ref, sev queue.Severity, wave int, by string) (*queue.Task, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := d.p.Move(ctx, r, queue.ActPromote, queue.Person, by)
	if err != nil {
		return nil, err
	}
	var fields []queue.Field
	var changed []string
	if sev != "" && sev != t.Severity {
		fields = append(fields, queue.Set("severity", string(sev)))
		changed = append(changed, "severity "+string(t.Severity)+" -> "+string(sev))
	}
	if wave != 0 && wave != t.Wave {
		fields = append(fields, queue.Set("wave", wave))
		changed = append(changed, fmt.Sprintf("wave %d -> %d", t.Wave, wave))
	}
	if len(fields) > 0 {
		it, err := d.p.DB.Get(ctx, queue.Ref{ID: t.ID})
		if err != nil {
			return nil, err
		}
		fields = append(fields, queue.Set("updated", time.Now().UTC().Truncate(time.Second)))
		_, _, err = d.p.Tasks.Update(project.Name(it), func(cur []byte) ([]byte, error) {
			return queue.Edit(cur, fields...)
		})
		if err != nil {
			return nil, fmt.Errorf("promoted %s, but setting %s failed: %w (edit the file)", t.Key, strings.Join(changed, ", "), err)
		}
		if _, err := d.p.DB.SyncFile(ctx, d.p.Tasks, project.Name(it)); err != nil {
			return nil, err
		}
		d.audit(ctx, index.AuditEntry{Actor: queue.Person, Agent: by, Action: "edit", TaskID: t.ID, Outcome: "ok",
			Detail: "on promotion from the board: " + strings.Join(changed, ", ")})
		if it, err := d.p.DB.Get(ctx, queue.Ref{ID: t.ID}); err == nil && it.Task != nil {
			t = it.Task
		}
	}
	d.writePlan(ctx)
	d.hub.publish("task", map[string]any{"key": t.Key, "status": t.Status})
	return t, nil
}
