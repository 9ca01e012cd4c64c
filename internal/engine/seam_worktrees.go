package engine

import (
	"context"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// The seam of the worktrees service (internal/engine/worktrees): a claim
// that asks for a worktree is Claim, then the service's git work, then
// WorktreeMade; the list reads each task's status with TaskStatus.

// WorktreeMade records on the live lease of the task id session s holds
// the worktree made for it at path on branch (a verify of the task runs
// there), and audits it.
func (e *Engine) WorktreeMade(ctx context.Context, s index.Session, taskID, path, branch string) error {
	if err := e.p.DB.SetWorktree(ctx, taskID, path); err != nil {
		return err
	}
	e.Audit(ctx, snag.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: "worktree", TaskID: taskID,
		Outcome: "ok", Detail: path + " on " + branch})
	return nil
}

// TaskStatus is the status of the task ref as this worktree's index has
// it (a lease in another worktree or clone is not looked at, unlike Get).
func (e *Engine) TaskStatus(ctx context.Context, ref queue.Ref) (queue.Status, error) {
	it, err := e.p.DB.Get(ctx, ref)
	if err != nil {
		return "", err
	}
	return it.Status, nil
}
