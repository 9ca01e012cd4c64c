package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/browser"
	"github.com/snagdev/snag/internal/failpoint"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/verify"
)

// launch starts a queued run in the background. e.mu must be held.
func (e *Engine) launch(it *index.Item, run snag.VerifyRun) {
	ctx, cancel := context.WithCancel(e.runCtx)
	v := e.verify
	v.mu.Lock()
	v.flight[run.TaskID] = &flight{run: run.ID, cancel: cancel}
	v.mu.Unlock()
	t := *it.Task
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		defer cancel()
		e.runVerify(ctx, &t, run)
	}()
}

// result is what a verifier found.
type result struct {
	outcome, reason, shot string
	visual                *snag.Visual
}

func (e *Engine) runVerify(ctx context.Context, t *queue.Task, run snag.VerifyRun) {
	v := e.verify
	select {
	case v.sem <- struct{}{}:
	case <-ctx.Done():
		e.settleCancelled(run)
		return
	}
	defer func() { <-v.sem }()
	if err := e.p.DB.StartVerify(ctx, run.ID); err != nil && ctx.Err() == nil {
		e.log.Warn("verify: mark started", "task", t.Key, "err", err)
	}
	e.hub.Publish(snag.VerifyEvent{Task: t.Key, Run: run.ID, Verifier: run.Verifier, Started: true})
	failpoint.Hit("verify", StepVerifyStarted)
	res := e.check(ctx, t, run)
	if ctx.Err() != nil {
		e.settleCancelled(run)
		return
	}
	e.finishVerify(t, run, res)
}

// settleCancelled handles a run whose context ended before its outcome: at
// a daemon's exit it stays open, for the next start to queue again; when a
// person moved the task on, it ends as interrupted.
func (e *Engine) settleCancelled(run snag.VerifyRun) {
	e.verify.land(run)
	if e.runCtx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := e.p.DB.Update(ctx, func(tx *index.Tx) error {
		return tx.EndVerify(run.ID, index.RunEnd{Outcome: snag.OutcomeInterrupted, Reason: "stopped: the task was moved on before the check ended"})
	})
	if err != nil {
		e.log.Warn("verify: end a stopped run", "err", err)
	}
}

// check runs the verifier of a run and says what it found.
func (e *Engine) check(ctx context.Context, t *queue.Task, run snag.VerifyRun) result {
	cfg := *e.cfg.Load()
	timeout := time.Duration(cfg.Verify.TimeoutSeconds) * time.Second
	switch run.Verifier {
	case "command":
		from := project.ConfigFile
		if t.Verify != nil && t.Verify.Command == run.Command {
			from = "task"
		}
		if !e.approved(run.Command, run.Dir, cfg.Verify.Shell) {
			return result{outcome: snag.OutcomeNeedsApproval, reason: needsApprovalReason(run.Command, from, t.Key)}
		}
		res, err := verify.RunCommand(ctx, verify.Command{Dir: run.Dir, Line: run.Command, Shell: cfg.Verify.Shell, Timeout: timeout})
		switch {
		case err != nil:
			return result{outcome: snag.OutcomeInconclusive, reason: "the command could not run: " + strings.TrimPrefix(err.Error(), "verify: ")}
		case res.TimedOut:
			return result{outcome: snag.OutcomeFail, reason: failReason(fmt.Sprintf("`%s` timed out after %s", run.Command, timeout), res)}
		case res.ExitCode == 0:
			return result{outcome: snag.OutcomePass, reason: fmt.Sprintf("`%s` passed (exit 0) in %s", run.Command, res.Took.Round(time.Millisecond))}
		default:
			return result{outcome: snag.OutcomeFail, reason: failReason(fmt.Sprintf("`%s` failed with exit %d", run.Command, res.ExitCode), res)}
		}
	case "browser":
		c := t.Capture
		if c == nil {
			c = &queue.Capture{URL: run.Command}
		}
		shots := e.p.Abs("shots")
		if err := os.MkdirAll(shots, 0o755); err != nil {
			return result{outcome: snag.OutcomeInconclusive, reason: fmt.Sprintf("cannot make .snag/shots for the screenshot: %v", err)}
		}
		name := fmt.Sprintf("%s-verify-%d.png", t.Key, run.ID)
		check := browser.Check{Chromium: cfg.Browser.Chromium, URL: run.Command, Anchor: c.Anchor, AnchorText: c.AnchorText,
			CapturedErrors: c.ConsoleErrors, AllowedHosts: cfg.Browser.AllowedHosts, Shot: filepath.Join(shots, name),
			Settle: time.Duration(cfg.Browser.SettleMS) * time.Millisecond, Timeout: min(timeout, browser.DefaultTimeout)}
		vis := visualOf(e.p.Abs, t, run.ID)
		if vis.on {
			check.Crop, check.Viewport = e.p.Abs(vis.after), vis.viewport
		}
		res, err := browser.Run(ctx, check)
		if errors.Is(err, browser.ErrUnavailable) {
			return result{outcome: snag.OutcomeUnavailable, reason: err.Error() + "; the task stays verifying: resolve it again once a browser is available"}
		}
		if err != nil {
			return result{outcome: snag.OutcomeInconclusive, reason: capReason(fmt.Sprintf("the browser check could not run: %v", err))}
		}
		shot := ""
		if res.Shot != "" {
			shot = "shots/" + name
		}
		r := result{outcome: res.Outcome, reason: res.Reason, shot: shot}
		if vis.on {
			r = vis.judge(e.p.Abs, t, res, r)
		} else if vis.why != "" {
			r.reason += "; " + vis.why
		}
		r.reason = capReason(r.reason)
		return r
	}
	return result{outcome: snag.OutcomeInconclusive, reason: "unknown verifier " + run.Verifier}
}

// failReason words a failed command's run: what happened, the lines of
// its output that name the failure (wherever they were), then its last
// output, cut from the front so that the whole fits maxReason.
func failReason(what string, res verify.CommandResult) string {
	head := what + "; last output:\n"
	if len(res.Failing) > 0 {
		head = what + "; failing:\n" + strings.Join(res.Failing, "\n") + "\nlast output:\n"
	}
	return head + keepEnd(res.Tail, maxReason-len(head))
}

// maxReason bounds a verify reason: what a person and a model read at a
// glance.
const maxReason = 2000

// capReason keeps a reason to maxReason bytes, its end.
func capReason(s string) string { return keepEnd(s, maxReason) }

// keepEnd is s, or its last bytes within n with "…" before them, starting
// on a whole character.
func keepEnd(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= len("…") {
		return ""
	}
	cut := s[len(s)-(n-len("…")):]
	for len(cut) > 0 && cut[0]&0xC0 == 0x80 {
		cut = cut[1:]
	}
	return "…" + cut
}

// finishVerify applies a run's outcome to the task, if it is still the
// task's run and the task is still verifying.
func (e *Engine) finishVerify(t *queue.Task, run snag.VerifyRun, res result) {
	undo, lost, ok := e.teamFinishFirst(run, res)
	if !ok {
		return // the run stays open; the next start queues it again
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.mu.Lock()
	defer e.mu.Unlock()
	current := e.verify.current(run)
	if current {
		// In flight until the outcome is committed: a reader never sees
		// the check over and the task not yet moved.
		defer e.verify.land(run)
	}
	if e.runCtx.Err() != nil {
		return // the run stays open; the next start queues it again
	}
	failpoint.Hit("verify", StepVerifyChecked)
	if lost != nil {
		if l, err := e.p.DB.LeaseOf(ctx, run.TaskID); err == nil {
			e.releaseLocked(ctx, run.TaskID, queue.System, l.Holder, "the shared lease ended: "+lost.Error())
		}
	}
	it, err := e.p.DB.Get(ctx, queue.Ref{ID: run.TaskID})
	applied := current && err == nil && it.Status == queue.StatusVerifying
	var status queue.Status
	err = e.p.DB.Update(ctx, func(tx *index.Tx) (err error) {
		if !applied {
			return recordUnapplied(tx, run, res, it, lost)
		}
		status, err = e.applyOutcome(ctx, tx, it, run, res)
		return err
	})
	if err != nil || !applied {
		undo()
	}
	if err != nil {
		e.log.Error("verify: apply the outcome", "task", t.Key, "outcome", res.outcome, "err", err)
		return
	}
	e.hub.Publish(snag.VerifyEvent{Task: t.Key, Run: run.ID, VerifyOutcome: &snag.VerifyOutcome{Outcome: res.outcome, Reason: res.reason,
		Status: status, Applied: applied}})
	if applied {
		e.writePlan(ctx)
	}
}

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
// meanwhile.
func (e *Engine) teamFinishFirst(run snag.VerifyRun, res result) (undo func(), lost error, ok bool) {
	undo = func() {}
	if _, finishes := outcomeMoves[res.outcome]; !finishes {
		return undo, nil, true
	}
	undo, err := e.teamEndFirstRetry(e.runCtx, run.TaskID, "verify: "+res.outcome)
	if e.runCtx.Err() != nil {
		return undo, nil, false
	}
	return undo, err, true
}

// recordUnapplied ends a run whose outcome was not applied (the task is
// no longer verifying, or another run is its own), saying why.
func recordUnapplied(tx *index.Tx, run snag.VerifyRun, res result, it *index.Item, lost error) error {
	now := "gone"
	if it != nil {
		now = string(it.Status)
	}
	reason := res.reason + fmt.Sprintf(" (not applied: the task is %s now)", now)
	if lost != nil {
		reason += " (" + lost.Error() + ")"
	}
	if err := tx.EndVerify(run.ID, index.RunEnd{Outcome: res.outcome, Reason: reason, Shot: res.shot, Visual: res.visual}); err != nil {
		return err
	}
	return tx.Audit(snag.AuditEntry{SessionID: run.SessionID, Actor: queue.System, Agent: run.Holder, Action: "verify",
		TaskID: run.TaskID, Outcome: res.outcome, Detail: reason})
}

// applyOutcome moves the verifying task as its run's outcome says, ends
// its lease when the outcome does, and ends the run. It returns where the
// task is now.
func (e *Engine) applyOutcome(ctx context.Context, tx *index.Tx, it *index.Item, run snag.VerifyRun, res result) (queue.Status, error) {
	action, endLease := outcomeMoves[res.outcome], true
	switch {
	case res.outcome == snag.OutcomeFail:
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
		if _, _, err := tx.End(it.ID, "verify: "+res.outcome); err != nil {
			return status, err
		}
	}
	if err := tx.EndVerify(run.ID, index.RunEnd{Outcome: res.outcome, Reason: res.reason, Shot: res.shot, Visual: res.visual}); err != nil {
		return status, err
	}
	return status, tx.Audit(snag.AuditEntry{SessionID: run.SessionID, Actor: queue.System, Agent: run.Holder, Action: "verify",
		TaskID: it.ID, Outcome: res.outcome, Detail: fmt.Sprintf("%s -> %s: %s", queue.StatusVerifying, status, res.reason)})
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

// resumeVerify queues again the runs a daemon's exit cut off, for tasks
// that are still verifying.
func (e *Engine) resumeVerify(ctx context.Context) {
	runs, err := e.p.DB.OpenVerifyRuns(ctx)
	if err != nil || len(runs) == 0 {
		if err != nil {
			e.log.Error("verify: find runs to resume", "err", err)
		}
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, old := range runs {
		it, err := e.p.DB.Get(ctx, queue.Ref{ID: old.TaskID})
		again := err == nil && it.Status == queue.StatusVerifying && !e.verify.inFlight(old.TaskID)
		var run snag.VerifyRun
		err = e.p.DB.Update(ctx, func(tx *index.Tx) error {
			reason := "snagd stopped during the run"
			if again {
				reason += "; queued again"
			}
			if err := tx.EndVerify(old.ID, index.RunEnd{Outcome: snag.OutcomeInterrupted, Reason: reason}); err != nil {
				return err
			}
			if !again {
				return nil
			}
			run, err = tx.QueueVerify(snag.VerifyRun{TaskID: old.TaskID, Verifier: old.Verifier, Command: old.Command,
				Dir: old.Dir, SessionID: old.SessionID, Holder: old.Holder})
			if err != nil {
				return err
			}
			return tx.Audit(snag.AuditEntry{SessionID: old.SessionID, Actor: queue.System, Agent: old.Holder, Action: "verify",
				TaskID: old.TaskID, Outcome: "requeued", Detail: fmt.Sprintf("run %d was cut off by snagd's exit: run %d queued", old.ID, run.ID)})
		})
		if err != nil {
			e.log.Error("verify: resume", "task", old.TaskID, "err", err)
			continue
		}
		if again {
			e.log.Info("verify: queued a run again that snagd's exit cut off", "task", it.Key, "run", run.ID)
			e.launch(it, run)
		}
	}
}
