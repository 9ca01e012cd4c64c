package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// Resolve sends a task to verify: never resolved by an agent's word
// alone. The holder's resolve and a person's verify both come here; the
// task goes to verifying with a check queued, or where the project's
// config and the approvals send it (see Resolution).
//
// A resolve that finishes the task (resolved, or sent to a person's
// review) is told to the live state before its file is written
// (teamEndFirst): a clone killed after the answer, or cut off from the
// store, can never leave the lease to be swept and the finished work
// granted to another clone.
func (e *Engine) Resolve(ctx context.Context, req VerifyRequest) (Resolution, error) {
	r := newResolving(req, e.root)
	if r.agent {
		// The store must still have the lease: a clone cut off past the
		// grace gave it up, and another may hold the task now.
		if err := e.teamFence(ctx, req.Ref, r.s); err != nil {
			return Resolution{}, err
		}
	}
	e.mu.Lock()
	locked := true
	defer func() {
		if locked {
			e.mu.Unlock()
		}
	}()
	if err := e.readResolving(ctx, r); err != nil {
		return Resolution{}, err
	}
	if err := r.holderRefusal(); err != nil {
		return e.refuseResolve(ctx, r, err)
	}
	if r.it.Status == queue.StatusVerifying && e.verify.inFlight(r.it.ID) {
		return e.alreadyVerifying(ctx, r.it)
	}
	if err := r.statusRefusal(); err != nil {
		return e.refuseResolve(ctx, r, err)
	}
	switch r.p.Code {
	case ops.VerifyNoCaptureURL:
		return e.refuseResolve(ctx, r, refuse(ErrCannotVerify, ops.VerifyNoCaptureURL, "%s", r.p.Message))
	case ops.VerifyDisabled:
		// Nothing waits on a check: the write is made as a claim is
		// (commit.go), its checks made again in its batch.
		e.mu.Unlock()
		locked = false
		return e.resolveUnverified(ctx, r)
	}
	if r.p.Verifier == "command" && r.p.Approved != nil && !*r.p.Approved {
		return e.needsApproval(ctx, r)
	}
	return e.startVerify(ctx, r)
}

// resolving is one resolve, or a person's verify, as Resolve reads it:
// who asks, the task and its lease, and the plan that would check it.
type resolving struct {
	req   VerifyRequest
	s     index.Session // the holder's session; zero for a person
	agent bool          // the holder asks, not a person
	actor queue.Actor
	who   string
	// action is what the audit calls the request: resolve or verify.
	action string
	// dir is where the work is: the task's worktree once its lease is
	// read, else the caller's root or the project's.
	dir    string
	detail string // the request's note and commit, for the audit
	it     *index.Item
	lease  index.Lease
	p      ops.VerifyPlan
}

// newResolving is a request's caller and words, before the task is read.
func newResolving(req VerifyRequest, root string) *resolving {
	r := &resolving{req: req, actor: queue.Person, who: req.By, action: "verify", dir: root,
		detail: strings.TrimSpace(req.Note + " " + req.Commit)}
	if req.Session != nil {
		r.s, r.agent = *req.Session, true
		r.actor, r.who, r.action = queue.Agent, r.s.Name, "resolve"
	}
	if r.who == "" {
		r.who = "a person"
	}
	if r.s.Root != "" {
		r.dir = r.s.Root
	}
	return r
}

// readResolving reads the task and its lease, and plans its check where
// its work is. e.mu must be held.
func (e *Engine) readResolving(ctx context.Context, r *resolving) error {
	err := e.p.DB.Read(ctx, func(tx *index.Tx) (err error) {
		if r.it, err = tx.Get(r.req.Ref); err != nil {
			return err
		}
		if l, err := tx.LeaseOf(r.it.ID); err == nil {
			r.lease = l
		}
		return nil
	})
	if err != nil {
		return err
	}
	if r.lease.Worktree != "" {
		r.dir = r.lease.Worktree // the task's own worktree: its work is there
	}
	r.p = e.verify.plan(r.it, r.dir)
	return nil
}

// holderRefusal says why an agent may not resolve the task: only its
// holder may, by its epoch. A person always may ask.
func (r *resolving) holderRefusal() *Error {
	if !r.agent {
		return nil
	}
	it, lease := r.it, r.lease
	switch {
	case r.req.Epoch != 0 && r.req.Epoch != lease.Epoch:
		// A lease the agent had has ended (released, taken back by a
		// person, or moved on): its epoch is stale.
		return refuse(ErrStale, "stale", "epoch %d of %s is stale (the task is %s now): claim the task again before you write to it", r.req.Epoch, it.Key, it.Status)
	case lease.SessionID != r.s.ID || lease.Epoch == 0:
		holder := "no one"
		if lease.Holder != "" {
			holder = lease.Holder
		}
		return refuse(ErrNotHeld, "not_held", "%s is %s and held by %s, not %s: claim it before you resolve it", it.Key, it.Status, holder, r.s.Name)
	}
	return nil
}

// statusRefusal says why the task's status cannot be resolved: only a
// claimed or verifying task can, and one in needs_review only by a person.
func (r *resolving) statusRefusal() *Error {
	it := r.it
	switch it.Status {
	case queue.StatusClaimed, queue.StatusVerifying:
		return nil
	case queue.StatusNeedsReview:
		if r.agent {
			return refuse(ErrTransition, "transition", "%s is needs_review: a person looks at it now; an agent cannot resolve it again", it.Key)
		}
		return nil
	}
	_, err := queue.Transition(it.Status, queue.ActResolve, r.actor)
	return &Error{Kind: ErrTransition, Code: "transition", Message: err.Error()}
}

// throughVerifying is the moves that take the task through verifying to
// where then takes it: the resolve first, unless it is verifying already.
func (r *resolving) throughVerifying(then Step) []Step {
	if r.it.Status == queue.StatusVerifying {
		return []Step{then}
	}
	return []Step{{Action: queue.ActResolve, Actor: r.actor}, then}
}

// refuseResolve audits a refused resolve and answers with its error.
func (e *Engine) refuseResolve(ctx context.Context, r *resolving, err *Error) (Resolution, error) {
	e.Audit(ctx, snag.AuditEntry{SessionID: r.s.ID, Actor: r.actor, Agent: r.who, Action: r.action, TaskID: r.it.ID,
		Outcome: "refused", Detail: err.Message})
	return Resolution{}, err
}

// alreadyVerifying answers a resolve of a task whose check runs now: the
// running check is the answer.
func (e *Engine) alreadyVerifying(ctx context.Context, it *index.Item) (Resolution, error) {
	st, _, err := e.verify.state(ctx, it)
	if err != nil {
		return Resolution{}, err
	}
	return Resolution{Key: it.Key, Status: it.Status, Code: ops.VerifyOK, Verify: &st,
		Message: fmt.Sprintf("verify of %s is already running: poll GET /verify/%s", it.Key, it.Key)}, nil
}

// resolveUnverified resolves a task the project does not verify: the
// lease ends and the task is resolved, not verified. e.mu must not be
// held.
func (e *Engine) resolveUnverified(ctx context.Context, r *resolving) (Resolution, error) {
	it, s, lease := r.it, r.s, r.lease
	steps := r.throughVerifying(Step{Action: queue.ActSkipVerify, Actor: queue.System})
	undo, err := e.teamEndFirst(ctx, it.ID, "resolved: "+r.detail)
	if err != nil {
		return e.refuseResolve(ctx, r, e.finishRefused(ctx, it, lease, err))
	}
	m, err := e.prepareMove(it, r.who, steps...)
	if err != nil {
		undo()
		return Resolution{}, err
	}
	err = e.commit(ctx, []*move{m}, func(tx *index.Tx) error {
		if r.agent {
			if err := holds(tx, it, s, lease.Epoch); err != nil {
				return err
			}
		}
		return m.swap()
	}, func(tx *index.Tx) error {
		if _, err := m.written(tx, e.p.Tasks); err != nil {
			return err
		}
		if _, _, err := tx.End(it.ID, "resolved: "+r.detail); err != nil {
			return err
		}
		return tx.Audit(snag.AuditEntry{SessionID: s.ID, Actor: r.actor, Agent: r.who, Action: "resolve", TaskID: it.ID,
			Outcome: "ok", Detail: strings.TrimSpace("verify disabled: resolved, not verified " + r.detail)})
	}, nil)
	if err != nil {
		undo()
		return Resolution{}, err
	}
	e.hub.Publish(snag.LeaseEvent{Task: it.Key, Action: queue.ActResolve, Status: queue.StatusResolved})
	e.writePlan(ctx)
	return Resolution{Key: it.Key, Status: queue.StatusResolved, Code: ops.VerifyDisabled, Message: r.p.Message}, nil
}

// startVerify sends the task to verifying, with a run queued when a
// verifier can take it now, and launches the run. e.mu must be held.
func (e *Engine) startVerify(ctx context.Context, r *resolving) (Resolution, error) {
	it, p := r.it, r.p
	var run snag.VerifyRun
	err := e.p.DB.Update(ctx, func(tx *index.Tx) error {
		if it.Status != queue.StatusVerifying {
			if _, err := e.moveFile(tx, it, queue.ActResolve, r.actor, r.who); err != nil {
				return err
			}
		}
		// The request starts a check; the check's own outcome (pass,
		// fail, needs_approval ...) is a later entry. "started" keeps a
		// reader from taking this one for a passed check or a dry run.
		outcome := "started"
		if p.Code == ops.VerifyUnavailable {
			outcome = ops.VerifyUnavailable
		} else {
			cmd := p.Command
			if p.Verifier == "browser" {
				cmd = p.URL
			}
			var err error
			if run, err = tx.QueueVerify(snag.VerifyRun{TaskID: it.ID, Verifier: p.Verifier, Command: cmd, Dir: p.Dir,
				SessionID: r.s.ID, Holder: r.lease.Holder}); err != nil {
				return err
			}
		}
		return tx.Audit(snag.AuditEntry{SessionID: r.s.ID, Actor: r.actor, Agent: r.who, Action: r.action, TaskID: it.ID,
			Outcome: outcome, Detail: strings.TrimSpace(p.Message + " " + r.detail)})
	})
	if err != nil {
		return Resolution{}, err
	}
	e.hub.Publish(snag.TaskEvent{Key: it.Key, Status: queue.StatusVerifying})
	e.writePlan(ctx)
	if p.Code == ops.VerifyUnavailable {
		return Resolution{Key: it.Key, Status: queue.StatusVerifying, Code: ops.VerifyUnavailable, Message: p.Message}, nil
	}
	e.verify.start(it, run)
	eta := e.verify.eta(ctx, it.ID, run)
	return Resolution{Key: it.Key, Status: queue.StatusVerifying, Code: ops.VerifyOK, Started: true, ETA: eta,
		Verify:  &snag.VerifyState{Key: it.Key, Status: queue.StatusVerifying, Running: true, Verifier: p.Verifier, History: []snag.VerifyRun{run}},
		Message: fmt.Sprintf("verify is running (%s): poll GET /verify/%s in about %d s", p.Verifier, it.Key, eta)}, nil
}

// needsApprovalReason is a verify run's reason when its command waits for
// a person's approval: it names the command and the commands that approve
// and check it.
func needsApprovalReason(command, from, key string) string {
	return fmt.Sprintf("verify.command `%s` (from %s) waits for a person's approval: run snag approve %s on this machine, then snag verify %s; nothing was run",
		command, fromName(from), approveArg(key, from), key)
}

// needsApproval answers a resolve or a person's verify whose command waits
// for approval. Nothing can run, and snagd knows it now: the task goes to
// needs_review at once (through verifying, as a run would take it), the
// lease ends, the run is recorded with outcome needs_approval, and the
// answer (200) says so, instead of a 202 that would promise a check. e.mu
// must be held.
func (e *Engine) needsApproval(ctx context.Context, r *resolving) (Resolution, error) {
	it, p := r.it, r.p
	reason := needsApprovalReason(p.Command, p.From, it.Key)
	undo, err := e.teamEndFirst(ctx, it.ID, "verify: "+snag.OutcomeNeedsApproval)
	if err != nil {
		return Resolution{}, e.finishRefusedLocked(ctx, it, r.lease, err)
	}
	err = e.p.DB.Update(ctx, func(tx *index.Tx) error {
		steps := r.throughVerifying(Step{Action: queue.ActInconclusive, Actor: queue.System})
		if _, err := e.moveSteps(tx, it, r.who, steps...); err != nil {
			return err
		}
		if _, _, err := tx.End(it.ID, "verify: "+snag.OutcomeNeedsApproval); err != nil {
			return err
		}
		run, err := tx.QueueVerify(snag.VerifyRun{TaskID: it.ID, Verifier: p.Verifier, Command: p.Command, Dir: p.Dir,
			SessionID: r.s.ID, Holder: r.lease.Holder})
		if err != nil {
			return err
		}
		if err := tx.EndVerify(run.ID, index.RunEnd{Outcome: snag.OutcomeNeedsApproval, Reason: reason}); err != nil {
			return err
		}
		return tx.Audit(snag.AuditEntry{SessionID: r.s.ID, Actor: r.actor, Agent: r.who, Action: r.action, TaskID: it.ID,
			Outcome: snag.OutcomeNeedsApproval, Detail: strings.TrimSpace(fmt.Sprintf("%s -> %s: %s %s", it.Status, queue.StatusNeedsReview, reason, r.detail))})
	})
	if err != nil {
		undo()
		return Resolution{}, err
	}
	e.hub.Publish(snag.TaskEvent{Key: it.Key, Status: queue.StatusNeedsReview})
	e.hub.Publish(snag.VerifyEvent{Task: it.Key, VerifyOutcome: &snag.VerifyOutcome{Outcome: snag.OutcomeNeedsApproval, Reason: reason,
		Status: queue.StatusNeedsReview, Applied: true}})
	e.writePlan(ctx)
	msg := fmt.Sprintf("verify.command `%s` (from %s) waits for a person's approval, so nothing was run: %s is needs_review and its lease ended. "+
		"A person approves the command with snag approve %s on this machine, then checks the task with snag verify %s",
		p.Command, fromName(p.From), it.Key, approveArg(it.Key, p.From), it.Key)
	return Resolution{Key: it.Key, Status: queue.StatusNeedsReview, Code: snag.OutcomeNeedsApproval, Message: msg,
		Reason: reason, Command: p.Command, From: p.From}, nil
}
