package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// Released is where a release or a holder's move left a task.
type Released struct {
	Key    string
	Status queue.Status
}

// holds checks, inside tx, that s holds it under a live lease of epoch
// (0: whichever is live).
func holds(tx *index.Tx, it *index.Item, s index.Session, epoch int64) error {
	l, err := tx.Check(it.ID, epoch)
	if err != nil {
		return err
	}
	if l.SessionID != s.ID {
		return fmt.Errorf("%w: %s holds %s, not %s", index.ErrHeld, l.Holder, it.Key, s.Name)
	}
	return nil
}

// Release gives a task back to the queue for the session that holds it,
// fenced by its epoch (0: its live lease), with a reason it must give.
func (e *Engine) Release(ctx context.Context, s index.Session, ref queue.Ref, epoch int64, reason string) (Released, error) {
	if strings.TrimSpace(reason) == "" {
		return Released{}, refuse(ErrInvalid, "no_reason", "release needs a reason: say why the task goes back (blocked, out of scope, ...)")
	}
	// The lease is checked first, under e.mu, so that a stale or foreign
	// release is refused as such; the new bytes are then written with no
	// lock held, and the check, the swap and the rows made in a batch.
	var it *index.Item
	var lease index.Lease
	err := func() error {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.p.DB.Read(ctx, func(tx *index.Tx) (err error) {
			if it, err = tx.Get(ref); err != nil {
				return err
			}
			if err := holds(tx, it, s, epoch); err != nil {
				return err
			}
			lease, err = tx.LeaseOf(it.ID)
			return err
		})
	}()
	refused := func(err error) (Released, error) {
		if it != nil && !index.Busy(err) && !errors.Is(err, errClosed) {
			e.Audit(ctx, snag.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: string(queue.ActRelease),
				TaskID: it.ID, Outcome: "refused", Detail: err.Error()})
		}
		return Released{}, err
	}
	if err != nil {
		return refused(err)
	}
	m, err := e.prepareMoveOf(it, &lease, s.Name, Step{queue.ActRelease, queue.Agent})
	if err != nil {
		return refused(err)
	}
	var status queue.Status
	err = e.commit(ctx, []*move{m}, func(tx *index.Tx) error {
		if err := holds(tx, it, s, epoch); err != nil {
			return err
		}
		return m.swap()
	}, func(tx *index.Tx) error {
		if _, _, err := tx.End(it.ID, string(queue.ActRelease)+": "+reason); err != nil {
			return err
		}
		t, err := m.written(tx, e.p.Tasks)
		if err != nil {
			return err
		}
		status = t.Status
		return tx.Audit(snag.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: string(queue.ActRelease),
			TaskID: it.ID, Outcome: "ok", Detail: reason})
	}, nil)
	if err != nil {
		return refused(err)
	}
	e.hub.Publish(snag.LeaseEvent{Task: it.Key, Action: queue.ActRelease, Status: status})
	e.writePlan(ctx)
	e.noteGaveBack(s.ID, it.ID)
	return Released{Key: it.Key, Status: status}, nil
}

// noteGaveBack records that session id released task: its claim-next
// passes over it while another task is ready.
func (e *Engine) noteGaveBack(id int64, task string) {
	e.claimMu.Lock()
	defer e.claimMu.Unlock()
	if e.gaveBack == nil {
		e.gaveBack = map[int64]map[string]bool{}
	}
	if e.gaveBack[id] == nil {
		e.gaveBack[id] = map[string]bool{}
	}
	e.gaveBack[id][task] = true
}

// gaveBackBy lists the tasks session id released.
func (e *Engine) gaveBackBy(id int64) []string {
	e.claimMu.Lock()
	defer e.claimMu.Unlock()
	out := make([]string, 0, len(e.gaveBack[id]))
	for task := range e.gaveBack[id] {
		out = append(out, task)
	}
	return out
}

func (e *Engine) forgetGaveBack(id int64) {
	e.claimMu.Lock()
	defer e.claimMu.Unlock()
	delete(e.gaveBack, id)
}

// PersonRelease is a person, by, taking a task back from whoever holds
// it: the lease ends, its epoch moves on, and the holder's later writes
// are stale. A check in flight is stopped.
func (e *Engine) PersonRelease(ctx context.Context, ref queue.Ref, by, reason string) (Released, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	it, err := e.p.DB.Get(ctx, ref)
	if err != nil {
		return Released{}, err
	}
	if it.Status != queue.StatusClaimed && it.Status != queue.StatusVerifying {
		if _, err := e.p.DB.LeaseOf(ctx, it.ID); err != nil {
			return Released{}, refuse(ErrNotHeld, "not_held", "%s is %s and held by no one: nothing to release", it.Key, it.Status)
		}
	}
	why := "released by " + by
	if reason != "" {
		why += ": " + reason
	}
	if err := e.releaseLocked(ctx, it.ID, queue.Person, by, why); err != nil {
		return Released{}, err
	}
	e.verify.stop(it.ID)
	e.hub.Publish(snag.LeaseEvent{Task: it.Key, Ended: true, Reason: why})
	e.writePlan(ctx)
	return Released{Key: it.Key, Status: queue.StatusOpen}, nil
}

// releaseLocked gives a task back to the queue on behalf of snag or a
// person: whatever lease is live ends. e.mu must be held.
func (e *Engine) releaseLocked(ctx context.Context, taskID string, actor queue.Actor, who, why string) error {
	it, err := e.item(ctx, queue.Ref{ID: taskID})
	if errors.Is(err, index.ErrNotFound) || err == nil && it.State == snag.StateMissing {
		// The file is gone (moved out, or on another branch): end the lease
		// alone, the file has nothing to change; the missing row goes with it.
		return e.p.DB.Update(ctx, func(tx *index.Tx) error {
			if _, _, err := tx.End(taskID, why); err != nil {
				return err
			}
			if it != nil {
				if err := tx.SyncFile(e.p.Tasks, project.Name(it)); err != nil {
					return err
				}
			}
			return tx.Audit(snag.AuditEntry{Actor: actor, Agent: who, Action: "release", TaskID: taskID, Outcome: "ok",
				Detail: why + " (the task file is missing: the lease ended, no file changed)"})
		})
	}
	if err != nil {
		return err
	}
	return e.p.DB.Update(ctx, func(tx *index.Tx) error {
		l, lerr := tx.LeaseOf(taskID)
		if _, _, err := tx.End(taskID, why); err != nil {
			return err
		}
		if it.Status == queue.StatusClaimed || it.Status == queue.StatusVerifying {
			var under *index.Lease
			if lerr == nil {
				under = &l
			}
			if _, err := e.moveStepsOf(tx, it, under, who, Step{queue.ActRelease, actor}); err != nil {
				return err
			}
		}
		return tx.Audit(snag.AuditEntry{Actor: actor, Agent: who, Action: "release", TaskID: taskID, Outcome: "ok", Detail: why})
	})
}

// item reads a task on the writer's connection, for a write about to be
// made on it (index.DB.Read). e.mu must be held.
func (e *Engine) item(ctx context.Context, ref queue.Ref) (it *index.Item, err error) {
	err = e.p.DB.Read(ctx, func(tx *index.Tx) error {
		it, err = tx.Get(ref)
		return err
	})
	return it, err
}
