package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/failpoint"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// The seam of the verify service (internal/engine/verifier): the service
// runs the checks; the engine keeps the moves a check makes, under its
// lock. The engine calls the service through Verifier, which the
// workspace installs (UseVerifier); the service calls the engine through
// the methods below.

// Verifier is the verify service as the engine calls it. Start, Stop,
// Current and Land are called with the engine's write lock held: they
// must not wait on the engine.
type Verifier interface {
	// Plan says what would check the task, verifying in dir.
	Plan(it *index.Item, dir string) ops.VerifyPlan
	// Start starts a queued run of the task in the background; its outcome
	// comes back through FinishVerify.
	Start(it *index.Item, run snag.VerifyRun)
	// ETA guesses how many seconds a run of the task will take.
	ETA(ctx context.Context, taskID string, run snag.VerifyRun) int
	// State is where verify of a task stands, with its recent runs, and
	// the task as the runs agree with.
	State(ctx context.Context, it *index.Item) (snag.VerifyState, *index.Item, error)
	// InFlight reports whether a run of the task is queued or running.
	InFlight(taskID string) bool
	// Current reports whether run is its task's run in flight.
	Current(run snag.VerifyRun) bool
	// Land ends the flight of run, if it is still its task's.
	Land(run snag.VerifyRun)
	// Stop cancels the task's run in flight, if any: a move took the task
	// on, and its outcome would not be applied.
	Stop(taskID string)
}

// UseVerifier installs the verify service that runs the checks a resolve
// starts. Set it before Run and before any request, and run its Run
// beside the engine's: the engine's live-state loop waits for its resume
// of the runs a restart cut off (WaitResumed). An engine without one answers a
// resolve that would start a check as if no verifier were available here.
func (e *Engine) UseVerifier(v Verifier) { e.verify.s = v }

// verifier is the engine's handle on its verify service (UseVerifier).
type verifier struct {
	s Verifier
	// resumed is closed once the runs a restart cut off are queued again
	// (ResumeVerify, which the service calls once the engine is ready).
	resumed    chan struct{}
	resumeOnce sync.Once
}

func newVerifier() *verifier { return &verifier{resumed: make(chan struct{})} }

// WaitResumed waits until the verify service has queued again the runs a
// restart cut off (ResumeVerify, once the engine is ready), or ctx ends;
// at once when there is no verify service. The engine's live-state loop
// and the sessions' sweep start after it, as they did when the engine
// resumed the runs itself: a holder found gone at the start then leaves
// its task's check to decide where the task goes, instead of the task
// being released before its run is queued again.
func (e *Engine) WaitResumed(ctx context.Context) error {
	v := e.verify
	if v.s == nil {
		return nil
	}
	select {
	case <-v.resumed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errNoVerifier answers a read of where a check stands on an engine
// opened without its verify service.
var errNoVerifier = errors.New("engine: no verify service: open the project with workspace.Open, which runs the engine with its services")

func (v *verifier) plan(it *index.Item, dir string) ops.VerifyPlan {
	if v.s == nil {
		return ops.VerifyPlan{Key: it.Key, Code: ops.VerifyUnavailable,
			Message: fmt.Sprintf("verify of %s needs the verify service and this engine runs without it; %s stays verifying: call resolve again on a snagd", it.Key, it.Key)}
	}
	return v.s.Plan(it, dir)
}

func (v *verifier) start(it *index.Item, run snag.VerifyRun) {
	if v.s != nil {
		v.s.Start(it, run)
	}
}

func (v *verifier) eta(ctx context.Context, taskID string, run snag.VerifyRun) int {
	if v.s == nil {
		return 0
	}
	return v.s.ETA(ctx, taskID, run)
}

func (v *verifier) state(ctx context.Context, it *index.Item) (snag.VerifyState, *index.Item, error) {
	if v.s == nil {
		return snag.VerifyState{}, it, errNoVerifier
	}
	return v.s.State(ctx, it)
}

func (v *verifier) inFlight(taskID string) bool { return v.s != nil && v.s.InFlight(taskID) }

func (v *verifier) current(run snag.VerifyRun) bool { return v.s != nil && v.s.Current(run) }

func (v *verifier) land(run snag.VerifyRun) {
	if v.s != nil {
		v.s.Land(run)
	}
}

func (v *verifier) stop(taskID string) {
	if v.s != nil {
		v.s.Stop(taskID)
	}
}

// PlanTarget is the task a dry run of verify plans for, as the index has
// it, and the worktree its lease names ("" when it has none).
func (e *Engine) PlanTarget(ctx context.Context, ref queue.Ref) (*index.Item, string, error) {
	it, err := e.p.DB.Get(ctx, ref)
	if err != nil {
		return nil, "", err
	}
	if l, err := e.p.DB.LeaseOf(ctx, it.ID); err == nil {
		return it, l.Worktree, nil
	}
	return it, "", nil
}

// VerifyRuns are the task's latest verify runs, up to limit, newest
// first.
func (e *Engine) VerifyRuns(ctx context.Context, taskID string, limit int) ([]snag.VerifyRun, error) {
	return e.p.DB.VerifyRuns(ctx, taskID, limit)
}

// MarkVerifyStarted records that a verifier took the queued run, and
// announces it.
func (e *Engine) MarkVerifyStarted(ctx context.Context, key string, run snag.VerifyRun) error {
	err := e.p.DB.StartVerify(ctx, run.ID)
	e.hub.Publish(snag.VerifyEvent{Task: key, Run: run.ID, Verifier: run.Verifier, Started: true})
	return err
}

// EndVerify ends a run without moving its task (a run stopped before its
// outcome).
func (e *Engine) EndVerify(ctx context.Context, runID int64, end index.RunEnd) error {
	return e.p.DB.Update(ctx, func(tx *index.Tx) error { return tx.EndVerify(runID, end) })
}

// FinishVerify applies a run's outcome to the task, if it is still the
// task's run (the verifier's Current) and the task is still verifying;
// else it records the outcome as not applied. Until then the run stays
// in flight: a reader never sees the check over and the task not yet
// moved. When stopping ends first (snagd stops) nothing is recorded: the
// run stays open, and the next start queues it again.
func (e *Engine) FinishVerify(stopping context.Context, key string, run snag.VerifyRun, res index.RunEnd) {
	stopping, cancelStopping := context.WithCancel(stopping)
	defer cancelStopping()
	defer context.AfterFunc(e.runCtx, cancelStopping)()
	undo, lost, ok := e.teamFinishFirst(stopping, run, res)
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
	if stopping.Err() != nil {
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
		e.log.Error("verify: apply the outcome", "task", key, "outcome", res.Outcome, "err", err)
		return
	}
	e.hub.Publish(snag.VerifyEvent{Task: key, Run: run.ID, VerifyOutcome: &snag.VerifyOutcome{Outcome: res.Outcome, Reason: res.Reason,
		Status: status, Applied: applied}})
	if applied {
		e.writePlan(ctx)
	}
}

// ResumeVerify queues again the runs a daemon's exit cut off, for tasks
// that are still verifying, and starts them on the verifier; the others
// end as interrupted. The verify service calls it once the engine is
// ready (WaitReady); WaitResumed returns once it has.
func (e *Engine) ResumeVerify(ctx context.Context) {
	defer e.verify.resumeOnce.Do(func() { close(e.verify.resumed) })
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
			e.verify.start(it, run)
		}
	}
}

// NeedsApprovalReason is a verify run's reason when its command waits
// for a person's approval: it names the command (from "task" or the
// config) and the commands that approve and check task key.
func NeedsApprovalReason(command, from, key string) string {
	return needsApprovalReason(command, from, key)
}

// VerifyCommandFrom names where a verify command comes from ("task": the
// task's verify.command; else .snag/config.json), for a message.
func VerifyCommandFrom(from string) string { return fromName(from) }

// ApproveArg is what snag approve takes to approve task key's command
// from "task" or the config: the task's key, or --project.
func ApproveArg(key, from string) string { return approveArg(key, from) }
