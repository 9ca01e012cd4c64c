package daemon

import (
	"context"
	"net/http"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/snag"
)

const (
	resolveRefusal = "resolve is an agent's move: a person resolves with POST /tasks/{ref}/accept (snag resolve ID), or checks with POST /verify/{ref} (snag verify ID)"
	acceptRefusal  = "only a person resolves a task without verify: resolve it, and verify checks it"
)

// verifyOps are the operations that end a task's work: the holder's
// resolve, a check now, its dry run, where a check stands, and a
// person's accept.
func (d *Daemon) verifyOps(hs ops.Handlers) {
	ops.Handle(hs, ops.Resolve, d.verify)
	ops.Handle(hs, ops.Verify, d.verify)
	ops.Handle(hs, ops.PlanVerify, d.verifyPlan)
	ops.Handle(hs, ops.VerifyStatus, d.verifyState)
	ops.Handle(hs, ops.Accept, d.accept)
}

// errDryRun is a resolve or verify given dry_run: the caller meant
// verify_plan, which HTTP picks by the flag (api.Route.When), so only a
// caller in process can get it.
var errDryRun = &apiError{Status: http.StatusBadRequest, Code: "bad_json", Message: "resolve and verify take no dry_run: a dry run is the verify_plan operation (POST /verify/{ref} with dry_run)"}

// verify is the holder's resolve (an agent's request) or a person's check
// of a task that is claimed, verifying or needs_review (no session). Its
// answer's status says how it went (ops.Resolved.AnswerStatus).
func (d *Daemon) verify(ctx context.Context, req ops.VerifyRequest) (ops.Resolved, error) {
	if req.DryRun {
		return ops.Resolved{}, errDryRun
	}
	ref, epoch, err := d.leaseOf(ctx, req.Ref, req.Epoch)
	if err != nil {
		return ops.Resolved{}, err
	}
	res, err := d.e.Resolve(ctx, engine.VerifyRequest{Ref: ref, Session: sessionIn(ctx), By: req.By, Epoch: epoch,
		Note: req.Note, Commit: req.Commit})
	if err != nil {
		return ops.Resolved{}, err
	}
	return resolved(res), nil
}

// verifyPlan is a dry run: what would check the task, in the caller's
// worktree (an agent's session's), changing nothing. It waits for no
// write. No browser is answered 503 with the plan
// (ops.VerifyPlan.AnswerStatus), without Retry-After: this is not a
// moment's wait.
func (d *Daemon) verifyPlan(ctx context.Context, req ops.VerifyRequest) (ops.VerifyPlan, error) {
	ref, err := taskRef(req.Ref)
	if err != nil {
		return ops.VerifyPlan{}, err
	}
	dir := ""
	if s := sessionIn(ctx); s != nil {
		dir = s.Root
	}
	p, err := d.w.Verifier.VerifyPlan(ctx, ref, dir)
	if err != nil {
		return ops.VerifyPlan{}, err
	}
	return dryRun(p), nil
}

// verifyState is the latest outcome of verify and its history.
func (d *Daemon) verifyState(ctx context.Context, req ops.TaskRef) (snag.VerifyState, error) {
	ref, err := taskRef(req.Ref)
	if err != nil {
		return snag.VerifyState{}, err
	}
	st, _, err := d.w.Verifier.Verification(ctx, ref)
	if err != nil {
		return snag.VerifyState{}, err
	}
	return st, nil
}

// accept is a person's resolve of a task that is claimed (nothing could
// verify it), verifying or needs_review. The lease ends and a run in
// flight is stopped; verified stays false.
func (d *Daemon) accept(ctx context.Context, req ops.TaskMove) (ops.Moved, error) {
	if req.Severity != "" || req.Wave != 0 {
		return ops.Moved{}, errPromoteOnly
	}
	ref, err := taskRef(req.Ref)
	if err != nil {
		return ops.Moved{}, err
	}
	t, err := d.e.Accept(ctx, ref, req.By)
	if err != nil {
		return ops.Moved{}, err
	}
	return moved(t), nil
}
