package engine

import (
	"context"
	"fmt"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// outcomeMoves is what the outcomes that finish a task do to it: the move
// and the end of its lease. A fail sends the task back to its holder, or
// to the queue when the holder is gone (failMove); any other outcome
// leaves it verifying.
var outcomeMoves = map[string]queue.Action{
	snag.OutcomePass:          queue.ActPass,
	snag.OutcomeInconclusive:  queue.ActInconclusive,
	snag.OutcomeNeedsApproval: queue.ActInconclusive,
}

// teamFinishFirst tells the live state first of an outcome that
// finishes the task (teamEndFirst), waiting while the store is out of
// reach; lost is the store's refusal (the lease ended there meanwhile),
// and such an outcome is not applied. ok is false when snagd stops
// meanwhile (stopping ends).
func (e *Engine) teamFinishFirst(stopping context.Context, run snag.VerifyRun, res index.RunEnd) (undo func(), lost error, ok bool) {
	undo = func() {}
	if _, finishes := outcomeMoves[res.Outcome]; !finishes {
		return undo, nil, true
	}
	undo, err := e.teamEndFirstRetry(stopping, run.TaskID, "verify: "+res.Outcome)
	if stopping.Err() != nil {
		return undo, nil, false
	}
	return undo, err, true
}

// recordUnapplied ends a run whose outcome was not applied (the task is
// no longer verifying, or another run is its own), saying why.
func recordUnapplied(tx *index.Tx, run snag.VerifyRun, res index.RunEnd, it *index.Item, lost error) error {
	now := "gone"
	if it != nil {
		now = string(it.Status)
	}
	reason := res.Reason + fmt.Sprintf(" (not applied: the task is %s now)", now)
	if lost != nil {
		reason += " (" + lost.Error() + ")"
	}
	if err := tx.EndVerify(run.ID, index.RunEnd{Outcome: res.Outcome, Reason: reason, Shot: res.Shot, Visual: res.Visual}); err != nil {
		return err
	}
	return tx.Audit(snag.AuditEntry{SessionID: run.SessionID, Actor: queue.System, Agent: run.Holder, Action: "verify",
		TaskID: run.TaskID, Outcome: res.Outcome, Detail: reason})
}

// applyOutcome moves the verifying task as its run's outcome says, ends
// its lease when the outcome does, and ends the run. It returns where the
// task is now.
func (e *Engine) applyOutcome(ctx context.Context, tx *index.Tx, it *index.Item, run snag.VerifyRun, res index.RunEnd) (queue.Status, error) {
	action, endLease := outcomeMoves[res.Outcome], true
	switch {
	case res.Outcome == snag.OutcomeFail:
		action, endLease = e.failMove(ctx, tx, it)
	case action == "":
		endLease = false
	}
	status := it.Status
	if action != "" {
		moved, err := e.moveFile(tx, it, action, queue.System, run.Holder)
		if err != nil {
			return status, err
		}
		status = moved.Status
	}
	if endLease {
		if _, _, err := tx.End(it.ID, "verify: "+res.Outcome); err != nil {
			return status, err
		}
	}
	if err := tx.EndVerify(run.ID, res); err != nil {
		return status, err
	}
	return status, tx.Audit(snag.AuditEntry{SessionID: run.SessionID, Actor: queue.System, Agent: run.Holder, Action: "verify",
		TaskID: it.ID, Outcome: res.Outcome, Detail: fmt.Sprintf("%s -> %s: %s", queue.StatusVerifying, status, res.Reason)})
}

// failMove is where a failed check sends a task: back to its holder when
// the holder is still here (the lease stays); else to the queue, the
// lease ended.
func (e *Engine) failMove(ctx context.Context, tx *index.Tx, it *index.Item) (queue.Action, bool) {
	l, lerr := tx.Check(it.ID, 0)
	s, serr := e.p.DB.SessionByID(ctx, l.SessionID)
	if lerr == nil && !l.Detached && serr == nil && s.Ended.IsZero() {
		return queue.ActFail, false
	}
	return queue.ActRelease, true
}
