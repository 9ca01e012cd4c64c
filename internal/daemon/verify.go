package daemon

import (
	"context"
	"net/http"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/ops"
)

const (
	resolveRefusal = "resolve is an agent's move: a person resolves with POST /tasks/{ref}/accept (snag resolve ID), or checks with POST /verify/{ref} (snag verify ID)"
	acceptRefusal  = "only a person resolves a task without verify: resolve it, and verify checks it"
)

// verify is POST /verify/{ref} (a dry run, or a check now) and a holder's
// POST /tasks/{ref}/resolve: an agent's request is the holder's resolve; a
// person's (no session) checks a task that is claimed, verifying or
// needs_review.
func (d *Daemon) verify(ctx context.Context, c *call[verifyRequest]) (answer, error) {
	req := c.body
	if req.DryRun { // a read: it waits for no write
		c.dryRun = true
		dir := ""
		if c.session != nil {
			dir = c.session.Root
		}
		p, err := d.e.VerifyPlan(ctx, c.ref, dir)
		if err != nil {
			return answer{}, err
		}
		if p.Code == ops.VerifyUnavailable {
			return answer{http.StatusServiceUnavailable, dryRun(p)}, nil // no Retry-After: this is not a moment's wait
		}
		return ok(dryRun(p)), nil
	}
	res, err := d.e.Resolve(ctx, engine.VerifyRequest{Ref: c.ref, Session: c.session, By: req.By, Epoch: req.Epoch,
		Note: req.Note, Commit: req.Commit})
	if err != nil {
		return answer{}, err
	}
	return answer{resolvedStatus(res), resolved(res)}, nil
}

// getVerify is GET /verify/{ref}: the latest outcome and the history.
func (d *Daemon) getVerify(ctx context.Context, c *call[struct{}]) (answer, error) {
	st, _, err := d.e.Verification(ctx, c.ref)
	if err != nil {
		return answer{}, err
	}
	return ok(&st), nil
}

// accept is POST /tasks/{ref}/accept: a person resolves a task that is
// claimed (nothing could verify it), verifying or needs_review. The lease
// ends and a run in flight is stopped; verified stays false.
func (d *Daemon) accept(ctx context.Context, c *call[moveRequest]) (answer, error) {
	t, err := d.e.Accept(ctx, c.ref, c.body.By)
	if err != nil {
		return answer{}, err
	}
	return ok(moved(t)), nil
}
