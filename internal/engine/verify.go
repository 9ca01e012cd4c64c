package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/approval"
	"github.com/snagdev/snag/internal/browser"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// verifier runs the checks in the background, at most max at once.
type verifier struct {
	sem chan struct{}
	wg  sync.WaitGroup

	mu     sync.Mutex
	flight map[string]*flight // by task id: a run queued or running
}

type flight struct {
	run    int64
	cancel context.CancelFunc
}

func newVerifier(n int) *verifier {
	return &verifier{sem: make(chan struct{}, max(1, n)), flight: map[string]*flight{}}
}

// inFlight reports whether a run of the task is queued or running.
func (v *verifier) inFlight(taskID string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.flight[taskID] != nil
}

// stop cancels the task's run, if one is in flight: a person moved the task
// on, and its outcome would not be applied.
func (v *verifier) stop(taskID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if f := v.flight[taskID]; f != nil {
		f.cancel()
	}
}

// approvals is the per-user record of approved verify commands.
func (e *Engine) approvals() *approval.Store {
	home := e.opts.Home
	if home == "" {
		home = project.Home()
	}
	return approval.Open(filepath.Join(home, "approved"))
}

// sessionRoot is the root a session says it works in, when that is another
// worktree of the daemon's repository with a .snag/ folder; else "" (the
// daemon's own root).
func (e *Engine) sessionRoot(root string) string {
	return project.OtherWorktree(e.root, e.gitCommon, root)
}

// plan says what would check a task, verifying in dir.
func (e *Engine) plan(it *index.Item, dir string) ops.VerifyPlan {
	cfg := *e.cfg.Load()
	p := ops.VerifyPlan{Key: it.Key, Code: ops.VerifyOK}
	if !cfg.VerifyOnResolve() {
		p.Code = ops.VerifyDisabled
		p.Message = fmt.Sprintf(`this project resolves without verify ("plan": {"verify_on_resolve": false} in .snag/config.json): resolve makes %s resolved with verified: false`, it.Key)
		return p
	}
	t := it.Task
	cmd, from := "", ""
	if t.Verify != nil && strings.TrimSpace(t.Verify.Command) != "" {
		cmd, from = t.Verify.Command, "task"
	} else if strings.TrimSpace(cfg.Verify.Command) != "" {
		cmd, from = cfg.Verify.Command, project.ConfigFile
	}
	if cmd != "" {
		ok := e.approved(cmd, dir, cfg.Verify.Shell)
		p.Verifier, p.Command, p.From, p.Dir, p.Approved = "command", cmd, from, dir, &ok
		p.Message = fmt.Sprintf("verify runs `%s` (from %s) in %s; exit 0 passes", cmd, fromName(from), dir)
		if !ok {
			p.Message += fmt.Sprintf("; the command waits for a person's approval (snag approve %s): until then a resolve sends the task to needs_review, ends its lease, and runs nothing", approveArg(it.Key, from))
		}
		return p
	}
	if t.Capture == nil || t.Capture.URL == "" {
		p.Code = ops.VerifyNoCaptureURL
		p.Message = fmt.Sprintf("nothing can check %s: it has no verify.command, .snag/config.json has none, and it has no capture.url; it stays %s and a person resolves it (snag resolve %s)", it.Key, it.Status, it.Key)
		return p
	}
	p.Verifier, p.URL = "browser", t.Capture.URL
	if err := browser.CheckURL(t.Capture.URL, cfg.Browser.AllowedHosts); err != nil {
		p.Code = ops.VerifyNoCaptureURL
		p.Message = fmt.Sprintf("nothing can check %s: its capture.url is not opened (%v); it stays %s and a person resolves it (snag resolve %s)", it.Key, err, it.Status, it.Key)
		return p
	}
	if _, err := browser.Find(cfg.Browser.Chromium); err != nil {
		p.Code = ops.VerifyUnavailable
		p.Message = fmt.Sprintf("verify of %s needs a browser and none is available here (%v); %s stays verifying: call resolve again once one is", it.Key, err, it.Key)
		return p
	}
	p.Message = fmt.Sprintf("verify re-opens %s in headless Chromium and compares its console errors with the capture's", t.Capture.URL)
	return p
}

func fromName(from string) string {
	if from == "task" {
		return "the task's verify.command"
	}
	return ".snag/config.json"
}

func approveArg(key, from string) string {
	if from == "task" {
		return key
	}
	return "--project"
}

// approved reports whether a person approved a command for this project:
// for the daemon's root, or for the worktree the command runs in (snag
// approve records the scope of the root it runs in).
func (e *Engine) approved(command, dir string, shell bool) bool {
	store := e.approvals()
	for _, root := range []string{e.root, dir} {
		if root == "" {
			continue
		}
		scope, err := approval.Scope(root)
		if err != nil {
			continue
		}
		ok, err := store.Approved(scope, command, shell)
		if err != nil {
			e.log.Warn("approvals", "err", err)
		}
		if ok {
			return true
		}
	}
	return false
}

// VerifyRequest is a resolve by the holder of a task (Session set, fenced
// by Epoch when it is not 0), or a person's request to check it (Session
// nil, By names them).
type VerifyRequest struct {
	Ref     queue.Ref
	Session *index.Session
	By      string
	Epoch   int64
	Note    string
	Commit  string
}

// Resolution is what a resolve or a person's verify did. Code says which
// answer it is: VerifyOK with Started (a check was queued) or without (one
// was already running), VerifyDisabled (resolved, not verified),
// OutcomeNeedsApproval (needs_review: the command waits for a person's
// approval), or VerifyUnavailable (verifying, no browser here).
type Resolution struct {
	Key     string
	Status  queue.Status
	Code    string
	Message string
	Started bool
	// Verify is where the check stands, when one runs; ETA is how many
	// seconds it will likely take.
	Verify *snag.VerifyState
	ETA    int
	// Of a command that waits for approval: the run's reason, the command
	// and where it comes from (task or config.json).
	Reason  string
	Command string
	From    string
}

// VerifyPlan says what would check a task for a caller working in dir
// ("" for the project's root): a dry run, which changes nothing.
func (e *Engine) VerifyPlan(ctx context.Context, ref queue.Ref, dir string) (ops.VerifyPlan, error) {
	it, err := e.p.DB.Get(ctx, ref)
	if err != nil {
		return ops.VerifyPlan{}, err
	}
	if l, err := e.p.DB.LeaseOf(ctx, it.ID); err == nil && l.Worktree != "" {
		dir = l.Worktree // the task's own worktree: verify runs there
	}
	if dir == "" {
		dir = e.root
	}
	return e.plan(it, dir), nil
}

// Resolve sends a task to verify: never resolved by an agent's word
// alone. The holder's resolve and a person's verify both come here; the
// task goes to verifying with a check queued, or where the project's
// config and the approvals send it (see Resolution).
//
// In team mode a resolve that finishes the task (resolved, or sent to a
// person's review) is told to the store before its file is written
// (teamEndFirst): a clone killed after the answer, or cut off from the
// store, can never leave the lease to be swept and the finished work
// granted to another clone.
func (e *Engine) Resolve(ctx context.Context, req VerifyRequest) (Resolution, error) {
	var s index.Session
	agent := req.Session != nil
	if agent {
		s = *req.Session
	}
	actor, who, action := queue.Person, req.By, "verify"
	if agent {
		actor, who, action = queue.Agent, s.Name, "resolve"
	}
	if who == "" {
		who = "a person"
	}
	dir := e.root
	if s.Root != "" {
		dir = s.Root
	}
	if e.team != nil && agent {
		// The store must still have the lease: a clone cut off past the
		// grace gave it up, and another may hold the task now.
		if err := e.teamFence(ctx, req.Ref, s); err != nil {
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
	var it *index.Item
	var lease index.Lease
	err := e.p.DB.Read(ctx, func(tx *index.Tx) (err error) {
		if it, err = tx.Get(req.Ref); err != nil {
			return err
		}
		if l, err := tx.LeaseOf(it.ID); err == nil {
			lease = l
		}
		return nil
	})
	if err != nil {
		return Resolution{}, err
	}
	if lease.Worktree != "" {
		dir = lease.Worktree // the task's own worktree: its work is there
	}
	p := e.plan(it, dir)
	refused := func(err *Error) (Resolution, error) {
		e.Audit(ctx, snag.AuditEntry{SessionID: s.ID, Actor: actor, Agent: who, Action: action, TaskID: it.ID,
			Outcome: "refused", Detail: err.Message})
		return Resolution{}, err
	}
	// Who may ask: the holder (by its epoch), or a person.
	if agent {
		switch {
		case req.Epoch != 0 && req.Epoch != lease.Epoch:
			// A lease the agent had has ended (released, taken back by a
			// person, or moved on): its epoch is stale.
			return refused(refuse(ErrStale, "stale", "epoch %d of %s is stale (the task is %s now): claim the task again before you write to it", req.Epoch, it.Key, it.Status))
		case lease.SessionID != s.ID || lease.Epoch == 0:
			holder := "no one"
			if lease.Holder != "" {
				holder = lease.Holder
			}
			return refused(refuse(ErrNotHeld, "not_held", "%s is %s and held by %s, not %s: claim it before you resolve it", it.Key, it.Status, holder, s.Name))
		}
	}
	switch it.Status {
	case queue.StatusClaimed:
	case queue.StatusVerifying:
		if e.verify.inFlight(it.ID) {
			st, _, err := e.verifyState(ctx, it)
			if err != nil {
				return Resolution{}, err
			}
			return Resolution{Key: it.Key, Status: it.Status, Code: ops.VerifyOK, Verify: &st,
				Message: fmt.Sprintf("verify of %s is already running: poll GET /verify/%s", it.Key, it.Key)}, nil
		}
	case queue.StatusNeedsReview:
		if agent {
			return refused(refuse(ErrTransition, "transition", "%s is needs_review: a person looks at it now; an agent cannot resolve it again", it.Key))
		}
	default:
		_, err := queue.Transition(it.Status, queue.ActResolve, actor)
		return refused(&Error{Kind: ErrTransition, Code: "transition", Message: err.Error()})
	}
	detail := strings.TrimSpace(req.Note + " " + req.Commit)
	switch p.Code {
	case ops.VerifyNoCaptureURL:
		return refused(refuse(ErrCannotVerify, ops.VerifyNoCaptureURL, "%s", p.Message))
	case ops.VerifyDisabled:
		// Nothing waits on a check: the write is made as a claim is
		// (commit.go), its checks made again in its batch.
		e.mu.Unlock()
		locked = false
		steps := []Step{{Action: queue.ActSkipVerify, Actor: queue.System}}
		if it.Status != queue.StatusVerifying {
			steps = append([]Step{{Action: queue.ActResolve, Actor: actor}}, steps...)
		}
		undo, err := e.teamEndFirst(ctx, it.ID, "resolved: "+detail)
		if err != nil {
			return refused(e.finishRefused(ctx, it, lease, err))
		}
		m, err := e.prepareMove(it, who, steps...)
		if err != nil {
			undo()
			return Resolution{}, err
		}
		err = e.commit(ctx, []*move{m}, func(tx *index.Tx) error {
			if agent {
				if err := holds(tx, it, s, lease.Epoch); err != nil {
					return err
				}
			}
			return m.swap()
		}, func(tx *index.Tx) error {
			if _, err := m.written(tx, e.p.Tasks); err != nil {
				return err
			}
			if _, _, err := tx.End(it.ID, "resolved: "+detail); err != nil {
				return err
			}
			return tx.Audit(snag.AuditEntry{SessionID: s.ID, Actor: actor, Agent: who, Action: "resolve", TaskID: it.ID,
				Outcome: "ok", Detail: strings.TrimSpace("verify disabled: resolved, not verified " + detail)})
		}, nil)
		if err != nil {
			undo()
			return Resolution{}, err
		}
		e.hub.Publish("lease", map[string]any{"task": it.Key, "action": "resolve", "status": queue.StatusResolved})
		e.writePlan(ctx)
		return Resolution{Key: it.Key, Status: queue.StatusResolved, Code: ops.VerifyDisabled, Message: p.Message}, nil
	}
	if p.Verifier == "command" && p.Approved != nil && !*p.Approved {
		return e.needsApproval(ctx, it, p, lease, s, actor, who, action, detail)
	}
	// The task goes to verifying, with a run queued when a verifier can
	// take it now.
	var run snag.VerifyRun
	err = e.p.DB.Update(ctx, func(tx *index.Tx) error {
		if it.Status != queue.StatusVerifying {
			if _, err := e.moveFile(tx, it, queue.ActResolve, actor, who); err != nil {
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
			if run, err = tx.QueueVerify(snag.VerifyRun{TaskID: it.ID, Verifier: p.Verifier, Command: cmd, Dir: p.Dir,
				SessionID: s.ID, Holder: lease.Holder}); err != nil {
				return err
			}
		}
		return tx.Audit(snag.AuditEntry{SessionID: s.ID, Actor: actor, Agent: who, Action: action, TaskID: it.ID,
			Outcome: outcome, Detail: strings.TrimSpace(p.Message + " " + detail)})
	})
	if err != nil {
		return Resolution{}, err
	}
	e.hub.Publish("task", map[string]any{"key": it.Key, "status": queue.StatusVerifying})
	e.writePlan(ctx)
	if p.Code == ops.VerifyUnavailable {
		return Resolution{Key: it.Key, Status: queue.StatusVerifying, Code: ops.VerifyUnavailable, Message: p.Message}, nil
	}
	e.launch(it, run)
	eta := e.eta(ctx, it.ID, run)
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
func (e *Engine) needsApproval(ctx context.Context, it *index.Item, p ops.VerifyPlan, lease index.Lease,
	s index.Session, actor queue.Actor, who, action, detail string) (Resolution, error) {
	reason := needsApprovalReason(p.Command, p.From, it.Key)
	undo, err := e.teamEndFirst(ctx, it.ID, "verify: "+snag.OutcomeNeedsApproval)
	if err != nil {
		return Resolution{}, e.finishRefusedLocked(ctx, it, lease, err)
	}
	err = e.p.DB.Update(ctx, func(tx *index.Tx) error {
		steps := []Step{{Action: queue.ActInconclusive, Actor: queue.System}}
		if it.Status != queue.StatusVerifying {
			steps = append([]Step{{Action: queue.ActResolve, Actor: actor}}, steps...)
		}
		if _, err := e.moveSteps(tx, it, who, steps...); err != nil {
			return err
		}
		if _, _, err := tx.End(it.ID, "verify: "+snag.OutcomeNeedsApproval); err != nil {
			return err
		}
		run, err := tx.QueueVerify(snag.VerifyRun{TaskID: it.ID, Verifier: p.Verifier, Command: p.Command, Dir: p.Dir,
			SessionID: s.ID, Holder: lease.Holder})
		if err != nil {
			return err
		}
		if err := tx.EndVerify(run.ID, index.RunEnd{Outcome: snag.OutcomeNeedsApproval, Reason: reason}); err != nil {
			return err
		}
		return tx.Audit(snag.AuditEntry{SessionID: s.ID, Actor: actor, Agent: who, Action: action, TaskID: it.ID,
			Outcome: snag.OutcomeNeedsApproval, Detail: strings.TrimSpace(fmt.Sprintf("%s -> %s: %s %s", it.Status, queue.StatusNeedsReview, reason, detail))})
	})
	if err != nil {
		undo()
		return Resolution{}, err
	}
	e.hub.Publish("task", map[string]any{"key": it.Key, "status": queue.StatusNeedsReview})
	e.hub.Publish("verify", map[string]any{"task": it.Key, "outcome": snag.OutcomeNeedsApproval, "reason": reason,
		"status": queue.StatusNeedsReview, "applied": true})
	e.writePlan(ctx)
	msg := fmt.Sprintf("verify.command `%s` (from %s) waits for a person's approval, so nothing was run: %s is needs_review and its lease ended. "+
		"A person approves the command with snag approve %s on this machine, then checks the task with snag verify %s",
		p.Command, fromName(p.From), it.Key, approveArg(it.Key, p.From), it.Key)
	return Resolution{Key: it.Key, Status: queue.StatusNeedsReview, Code: snag.OutcomeNeedsApproval, Message: msg,
		Reason: reason, Command: p.Command, From: p.From}, nil
}

// eta guesses how many seconds a run will take: as long as the last run
// of the same check took, else 30 s for a command and 10 s for a browser.
func (e *Engine) eta(ctx context.Context, taskID string, run snag.VerifyRun) int {
	runs, _ := e.p.DB.VerifyRuns(ctx, taskID, 10)
	for _, r := range runs {
		if r.ID != run.ID && r.Command == run.Command && !r.Started.IsZero() && !r.Ended.IsZero() &&
			(r.Outcome == snag.OutcomePass || r.Outcome == snag.OutcomeFail) {
			return max(1, int(r.Ended.Sub(r.Started).Round(time.Second)/time.Second)+1)
		}
	}
	if run.Verifier == "browser" {
		return 10
	}
	return 30
}

// Verification is where verify of task ref stands, with its recent runs,
// and the task as the runs agree with.
func (e *Engine) Verification(ctx context.Context, ref queue.Ref) (snag.VerifyState, *index.Item, error) {
	it, err := e.Get(ctx, ref)
	if err != nil {
		return snag.VerifyState{}, nil, err
	}
	return e.verifyState(ctx, it)
}

// verifyState is where verify of a task stands, with its recent runs.
//
// The row is read before the runs. A run's outcome ends the run in the
// transaction that moves the task, so a task still verifying whose latest
// run has ended (and was not left verifying by it) was read just before
// that transaction: its row is read again, and the item returned agrees
// with the runs.
func (e *Engine) verifyState(ctx context.Context, it *index.Item) (snag.VerifyState, *index.Item, error) {
	running := e.verify.inFlight(it.ID)
	runs, err := e.p.DB.VerifyRuns(ctx, it.ID, 20)
	if err != nil {
		return snag.VerifyState{}, it, err
	}
	if it.Status == queue.StatusVerifying && len(runs) > 0 && !runs[0].Ended.IsZero() &&
		runs[0].Outcome != snag.OutcomeUnavailable && runs[0].Outcome != snag.OutcomeInterrupted {
		if fresh, err := e.Get(ctx, queue.Ref{ID: it.ID}); err == nil {
			it = fresh
		}
	}
	st := snag.VerifyState{Key: it.Key, Status: it.Status, Running: running && runs != nil && runs[0].Ended.IsZero(), History: runs}
	if st.History == nil {
		st.History = []snag.VerifyRun{}
	}
	if len(runs) > 0 {
		st.Verifier = runs[0].Verifier
	}
	for _, run := range runs {
		if !run.Ended.IsZero() && run.Outcome != snag.OutcomeInterrupted {
			st.Outcome, st.Reason, st.LastAt, st.Shot, st.Visual = run.Outcome, run.Reason, run.Ended, run.Shot, run.Visual
			break
		}
	}
	return st, it, nil
}
