package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// PersonMove makes a person's move of the status machine (promote,
// reject, cancel, reopen) on a task, for by: it checks the move against
// the file's current bytes, rewrites only the lines that change, indexes
// the file and records the move in the audit log, and returns the task as
// it now is.
func (e *Engine) PersonMove(ctx context.Context, ref queue.Ref, action queue.Action, by string) (*queue.Task, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, err := e.move(ctx, ref, action, queue.Person, by)
	if err != nil {
		return nil, err
	}
	e.writePlan(ctx)
	e.hub.Publish(snag.TaskEvent{Key: t.Key, Status: t.Status})
	e.teamMoved(t, by)
	return t, nil
}

// move makes one move on a task for actor and who, in one transaction
// with its index row and audit entry; a refused move is audited too.
// e.mu must be held.
func (e *Engine) move(ctx context.Context, ref queue.Ref, action queue.Action, actor queue.Actor, who string) (*queue.Task, error) {
	it, err := e.p.DB.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	var moved *queue.Task
	err = e.p.DB.Update(ctx, func(tx *index.Tx) error {
		if moved, err = e.moveFile(tx, it, action, actor, who); err != nil {
			return err
		}
		return tx.Audit(snag.AuditEntry{Actor: actor, Agent: who, Action: string(action), TaskID: moved.ID, Outcome: "ok",
			Detail: string(it.Status) + " -> " + string(moved.Status)})
	})
	if err != nil {
		if it.Task != nil && !index.Busy(err) {
			e.Audit(ctx, snag.AuditEntry{Actor: actor, Agent: who, Action: string(action), TaskID: it.Task.ID,
				Outcome: "refused", Detail: err.Error()})
		}
		return nil, err
	}
	return moved, nil
}

// Promote moves a task from the inbox to the queue for a person and, in
// the same turn of the writer's lock, sets the severity and wave they chose
// (zero values keep the file's).
func (e *Engine) Promote(ctx context.Context, ref queue.Ref, sev queue.Severity, wave int, by string) (*queue.Task, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, err := e.move(ctx, ref, queue.ActPromote, queue.Person, by)
	if err != nil {
		return nil, err
	}
	var fields []codec.Field
	var changed []string
	if sev != "" && sev != t.Severity {
		fields = append(fields, codec.Set("severity", string(sev)))
		changed = append(changed, "severity "+string(t.Severity)+" -> "+string(sev))
	}
	if wave != 0 && wave != t.Wave {
		fields = append(fields, codec.Set("wave", wave))
		changed = append(changed, fmt.Sprintf("wave %d -> %d", t.Wave, wave))
	}
	if len(fields) > 0 {
		it, err := e.p.DB.Get(ctx, queue.Ref{ID: t.ID})
		if err != nil {
			return nil, err
		}
		fields = append(fields, codec.Set("updated", time.Now().UTC().Truncate(time.Second)))
		_, _, err = e.p.Tasks.Update(project.Name(it), func(cur []byte) ([]byte, error) {
			return codec.Edit(cur, fields...)
		})
		if err != nil {
			return nil, fmt.Errorf("promoted %s, but setting %s failed: %w (edit the file)", t.Key, strings.Join(changed, ", "), err)
		}
		if _, err := e.p.DB.SyncFile(ctx, e.p.Tasks, project.Name(it)); err != nil {
			return nil, err
		}
		e.Audit(ctx, snag.AuditEntry{Actor: queue.Person, Agent: by, Action: "edit", TaskID: t.ID, Outcome: "ok",
			Detail: "on promotion from the board: " + strings.Join(changed, ", ")})
		if it, err := e.p.DB.Get(ctx, queue.Ref{ID: t.ID}); err == nil && it.Task != nil {
			t = it.Task
		}
	}
	e.writePlan(ctx)
	e.hub.Publish(snag.TaskEvent{Key: t.Key, Status: t.Status})
	return t, nil
}

// Accept is a person's resolve without verify (snag done), of a task that
// is open, claimed (nothing could verify it), verifying or needs_review.
// The lease ends and a check in flight is stopped; verified stays false.
func (e *Engine) Accept(ctx context.Context, ref queue.Ref, by string) (*queue.Task, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	it, err := e.p.DB.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	var moved *queue.Task
	err = e.p.DB.Update(ctx, func(tx *index.Tx) error {
		if moved, err = e.moveFile(tx, it, queue.ActAccept, queue.Person, by); err != nil {
			return err
		}
		if _, _, err := tx.End(it.ID, "resolved by "+by); err != nil {
			return err
		}
		return tx.Audit(snag.AuditEntry{Actor: queue.Person, Agent: by, Action: "accept", TaskID: it.ID, Outcome: "ok",
			Detail: fmt.Sprintf("%s -> %s by a person", it.Status, moved.Status)})
	})
	if err != nil {
		return nil, err
	}
	e.verify.stop(it.ID)
	e.hub.Publish(snag.TaskEvent{Key: it.Key, Status: moved.Status})
	e.writePlan(ctx)
	if it.Status == queue.StatusOpen {
		e.teamMoved(moved, by) // no lease ended to say it: no clone may take it now
	}
	return moved, nil
}
