package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/approval"
	"github.com/snagdev/snag/browser"
	"github.com/snagdev/snag/gitdir"
	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/internal/failpoint"
	"github.com/snagdev/snag/project"
	"github.com/snagdev/snag/queue"
	"github.com/snagdev/snag/verify"
)

// The answers of a verify dry run (DESIGN section 11).
const (
	// VerifyOK: a verifier can check the task; Verifier says which.
	VerifyOK = "ok"
	// VerifyNoCaptureURL: nothing can check the task (no command, no
	// captured page): it stays where it is and a person resolves it.
	VerifyNoCaptureURL = "no_capture_url"
	// VerifyDisabled: the project resolves without verify; resolve makes
	// the task resolved with verified: false.
	VerifyDisabled = "verify_disabled"
	// VerifyUnavailable: the verifier needs a browser and none is here; the
	// task stays verifying and asking again later is right (HTTP 503).
	VerifyUnavailable = "verify_unavailable"
)

// The outcomes of a verify run.
const (
	OutcomePass          = "pass"           // -> resolved, verified: true
	OutcomeFail          = "fail"           // -> claimed by the same holder, or open when it is gone
	OutcomeInconclusive  = "inconclusive"   // -> needs_review
	OutcomeNeedsApproval = "needs_approval" // -> needs_review; no process was started
	OutcomeUnavailable   = "unavailable"    // the browser went missing: the task stays verifying
	OutcomeInterrupted   = "interrupted"    // snagd stopped during the run; it was queued again
)

// verifyState is GET /verify/{ref}, and the verify part of a started run's answer.
type verifyState struct {
	Key      string            `json:"key"`
	Status   queue.Status      `json:"status"`
	Running  bool              `json:"running"`
	Outcome  string            `json:"outcome,omitempty"`
	Reason   string            `json:"reason,omitempty"`
	LastAt   time.Time         `json:"last_at,omitzero"`
	Verifier string            `json:"verifier,omitempty"`
	Shot     string            `json:"shot,omitempty"`
	History  []index.VerifyRun `json:"history,omitempty"`
}

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
func (d *Daemon) approvals() *approval.Store {
	home := d.opts.Home
	if home == "" {
		home = project.Home()
	}
	return approval.Open(filepath.Join(home, "approved"))
}

// sessionRoot is the root a session says it works in, when that is another
// worktree of the daemon's repository with a .snag/ folder; else "" (the
// daemon's own root).
func (d *Daemon) sessionRoot(root string) string {
	if root == "" || !filepath.IsAbs(root) || d.gitCommon == "" {
		return ""
	}
	r, err := filepath.EvalSymlinks(root)
	if err != nil || r == d.root {
		return ""
	}
	if fi, err := os.Stat(filepath.Join(r, project.Folder)); err != nil || !fi.IsDir() {
		return ""
	}
	if gitdir.Common(r) != d.gitCommon {
		return ""
	}
	return r
}

// plan says what would check a task, verifying in dir.
func (d *Daemon) plan(it *index.Item, dir string) verifyPlan {
	cfg := *d.cfg.Load()
	p := verifyPlan{Key: it.Key, Code: VerifyOK}
	if !cfg.VerifyOnResolve() {
		p.Code = VerifyDisabled
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
		ok := d.approved(cmd, dir, cfg.Verify.Shell)
		p.Verifier, p.Command, p.From, p.Dir, p.Approved = "command", cmd, from, dir, &ok
		p.Message = fmt.Sprintf("verify runs `%s` (from %s) in %s; exit 0 passes", cmd, fromName(from), dir)
		if !ok {
			p.Message += fmt.Sprintf("; the command waits for a person's approval (snag approve %s): until then a resolve sends the task to needs_review, ends its lease, and runs nothing", approveArg(it.Key, from))
		}
		return p
	}
	if t.Capture == nil || t.Capture.URL == "" {
		p.Code = VerifyNoCaptureURL
		p.Message = fmt.Sprintf("nothing can check %s: it has no verify.command, .snag/config.json has none, and it has no capture.url; it stays %s and a person resolves it (snag resolve %s)", it.Key, it.Status, it.Key)
		return p
	}
	p.Verifier, p.URL = "browser", t.Capture.URL
	if err := browser.CheckURL(t.Capture.URL, cfg.Browser.AllowedHosts); err != nil {
		p.Code = VerifyNoCaptureURL
		p.Message = fmt.Sprintf("nothing can check %s: its capture.url is not opened (%v); it stays %s and a person resolves it (snag resolve %s)", it.Key, err, it.Status, it.Key)
		return p
	}
	if _, err := browser.Find(cfg.Browser.Chromium); err != nil {
		p.Code = VerifyUnavailable
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
func (d *Daemon) approved(command, dir string, shell bool) bool {
	store := d.approvals()
	for _, root := range []string{d.root, dir} {
		if root == "" {
			continue
		}
		scope, err := approval.Scope(root)
		if err != nil {
			continue
		}
		ok, err := store.Approved(scope, command, shell)
		if err != nil {
			d.log.Warn("approvals", "err", err)
		}
		if ok {
			return true
		}
	}
	return false
}

// postVerify is POST /verify/{ref}: a dry run, or a run now (202). An
// agent's request is the holder's resolve; a person's (no session) checks a
// task that is claimed, verifying or needs_review.
func (d *Daemon) postVerify(w http.ResponseWriter, r *http.Request) { d.startVerify(w, r) }

// resolve is a holder's POST /tasks/{ref}/resolve: verify, never resolved
// by the agent's word alone.
func (d *Daemon) resolve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(SessionHeader) == "" {
		writeError(w, &apiError{http.StatusBadRequest, "no_session", "resolve is an agent's move: a person resolves with POST /tasks/{ref}/accept (snag resolve ID), or checks with POST /verify/{ref} (snag verify ID)"})
		return
	}
	d.startVerify(w, r)
}

func (d *Daemon) startVerify(w http.ResponseWriter, r *http.Request) {
	var s index.Session
	agent := r.Header.Get(SessionHeader) != ""
	if agent {
		var e *apiError
		if s, e = d.sessionOf(r); e != nil {
			writeError(w, e)
			return
		}
	}
	var req verifyRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	ref, ok := pathRef(w, r)
	if !ok {
		return
	}
	actor, who, action := queue.Person, req.By, "verify"
	if agent {
		actor, who, action = queue.Agent, s.Name, "resolve"
	}
	if who == "" {
		who = "a person"
	}
	ctx := r.Context()
	dir := d.root
	if s.Root != "" {
		dir = s.Root
	}
	if req.DryRun { // a read: it waits for no write
		markDryRun(r)
		it, err := d.p.DB.Get(ctx, ref)
		if err != nil {
			d.fail(w, err)
			return
		}
		p := d.plan(it, dir)
		status := http.StatusOK
		if p.Code == VerifyUnavailable {
			status = http.StatusServiceUnavailable // no Retry-After: this is not a moment's wait
			p.Error = p.Code
		}
		writeJSON(w, status, p)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	it, err := d.p.DB.Get(ctx, ref)
	if err != nil {
		d.fail(w, err)
		return
	}
	p := d.plan(it, dir)
	refuse := func(e *apiError) {
		d.audit(ctx, index.AuditEntry{SessionID: s.ID, Actor: actor, Agent: who, Action: action, TaskID: it.ID,
			Outcome: "refused", Detail: e.Message})
		writeError(w, e)
	}
	// Who may ask: the holder (by its epoch), or a person.
	var lease index.Lease
	if l, err := d.p.DB.LeaseOf(ctx, it.ID); err == nil {
		lease = l
	}
	if agent {
		switch {
		case req.Epoch != 0 && req.Epoch != lease.Epoch:
			// A lease the agent had has ended (released, taken back by a
			// person, or moved on): its epoch is stale.
			refuse(&apiError{http.StatusConflict, "stale", fmt.Sprintf("epoch %d of %s is stale (the task is %s now): claim the task again before you write to it", req.Epoch, it.Key, it.Status)})
			return
		case lease.SessionID != s.ID || lease.Epoch == 0:
			holder := "no one"
			if lease.Holder != "" {
				holder = lease.Holder
			}
			refuse(&apiError{http.StatusConflict, "not_held", fmt.Sprintf("%s is %s and held by %s, not %s: claim it before you resolve it", it.Key, it.Status, holder, s.Name)})
			return
		}
	}
	switch it.Status {
	case queue.StatusClaimed:
	case queue.StatusVerifying:
		if d.verify.inFlight(it.ID) {
			st, _, err := d.verifyState(ctx, it)
			if err != nil {
				d.fail(w, err)
				return
			}
			writeJSON(w, http.StatusAccepted, api.Resolved{Key: it.Key, Status: it.Status, Verify: st.wire(),
				Message: fmt.Sprintf("verify of %s is already running: poll GET /verify/%s", it.Key, it.Key)})
			return
		}
	case queue.StatusNeedsReview:
		if agent {
			refuse(&apiError{http.StatusConflict, "transition", fmt.Sprintf("%s is needs_review: a person looks at it now; an agent cannot resolve it again", it.Key)})
			return
		}
	default:
		_, err := queue.Transition(it.Status, queue.ActResolve, actor)
		refuse(&apiError{http.StatusConflict, "transition", err.Error()})
		return
	}
	detail := strings.TrimSpace(req.Note + " " + req.Commit)
	switch p.Code {
	case VerifyNoCaptureURL:
		refuse(&apiError{http.StatusConflict, VerifyNoCaptureURL, p.Message})
		return
	case VerifyDisabled:
		err = d.p.DB.Update(ctx, func(tx *index.Tx) error {
			steps := []project.Step{{Action: queue.ActSkipVerify, Actor: queue.System}}
			if it.Status != queue.StatusVerifying {
				steps = append([]project.Step{{Action: queue.ActResolve, Actor: actor}}, steps...)
			}
			if _, err := d.p.MoveFileSteps(it, who, steps...); err != nil {
				return err
			}
			if _, _, err := tx.End(it.ID, "resolved: "+detail); err != nil {
				return err
			}
			if err := tx.SyncFile(d.p.Tasks, project.Name(it)); err != nil {
				return err
			}
			return tx.Audit(index.AuditEntry{SessionID: s.ID, Actor: actor, Agent: who, Action: "resolve", TaskID: it.ID,
				Outcome: "ok", Detail: strings.TrimSpace("verify disabled: resolved, not verified " + detail)})
		})
		if err != nil {
			d.fail(w, err)
			return
		}
		d.hub.publish("lease", map[string]any{"task": it.Key, "action": "resolve", "status": queue.StatusResolved})
		d.writePlan(ctx)
		writeJSON(w, http.StatusOK, api.Resolved{Key: it.Key, Status: queue.StatusResolved, Verified: new(bool),
			Code: VerifyDisabled, Message: p.Message})
		return
	}
	if p.Verifier == "command" && p.Approved != nil && !*p.Approved {
		d.needsApproval(ctx, w, it, p, lease, s, actor, who, action, detail)
		return
	}
	// The task goes to verifying, with a run queued when a verifier can
	// take it now.
	var run index.VerifyRun
	err = d.p.DB.Update(ctx, func(tx *index.Tx) error {
		if it.Status != queue.StatusVerifying {
			if _, err := d.p.MoveFile(it, queue.ActResolve, actor, who); err != nil {
				return err
			}
			if err := tx.SyncFile(d.p.Tasks, project.Name(it)); err != nil {
				return err
			}
		}
		// The request starts a check; the check's own outcome (pass,
		// fail, needs_approval ...) is a later entry. "started" keeps a
		// reader from taking this one for a passed check or a dry run.
		outcome := "started"
		if p.Code == VerifyUnavailable {
			outcome = VerifyUnavailable
		} else {
			cmd := p.Command
			if p.Verifier == "browser" {
				cmd = p.URL
			}
			if run, err = tx.QueueVerify(index.VerifyRun{TaskID: it.ID, Verifier: p.Verifier, Command: cmd, Dir: p.Dir,
				SessionID: s.ID, Holder: lease.Holder}); err != nil {
				return err
			}
		}
		return tx.Audit(index.AuditEntry{SessionID: s.ID, Actor: actor, Agent: who, Action: action, TaskID: it.ID,
			Outcome: outcome, Detail: strings.TrimSpace(p.Message + " " + detail)})
	})
	if err != nil {
		d.fail(w, err)
		return
	}
	d.hub.publish("task", map[string]any{"key": it.Key, "status": queue.StatusVerifying})
	d.writePlan(ctx)
	if p.Code == VerifyUnavailable {
		writeJSON(w, http.StatusServiceUnavailable, api.Resolved{Key: it.Key, Status: queue.StatusVerifying,
			Error: VerifyUnavailable, Code: VerifyUnavailable, Message: p.Message})
		return
	}
	d.launch(it, run)
	eta := d.eta(ctx, it.ID, run)
	writeJSON(w, http.StatusAccepted, api.Resolved{Key: it.Key, Status: queue.StatusVerifying,
		Verify:     verifyState{Key: it.Key, Status: queue.StatusVerifying, Running: true, Verifier: p.Verifier, History: []index.VerifyRun{run}}.wire(),
		ETASeconds: eta, Code: VerifyOK,
		Message: fmt.Sprintf("verify is running (%s): poll GET /verify/%s in about %d s", p.Verifier, it.Key, eta)})
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
// answer (200) says so, instead of a 202 that would promise a check. d.mu
// must be held.
func (d *Daemon) needsApproval(ctx context.Context, w http.ResponseWriter, it *index.Item, p verifyPlan, lease index.Lease,
	s index.Session, actor queue.Actor, who, action, detail string) {
	reason := needsApprovalReason(p.Command, p.From, it.Key)
	err := d.p.DB.Update(ctx, func(tx *index.Tx) error {
		steps := []project.Step{{Action: queue.ActInconclusive, Actor: queue.System}}
		if it.Status != queue.StatusVerifying {
			steps = append([]project.Step{{Action: queue.ActResolve, Actor: actor}}, steps...)
		}
		if _, err := d.p.MoveFileSteps(it, who, steps...); err != nil {
			return err
		}
		if _, _, err := tx.End(it.ID, "verify: "+OutcomeNeedsApproval); err != nil {
			return err
		}
		if err := tx.SyncFile(d.p.Tasks, project.Name(it)); err != nil {
			return err
		}
		run, err := tx.QueueVerify(index.VerifyRun{TaskID: it.ID, Verifier: p.Verifier, Command: p.Command, Dir: p.Dir,
			SessionID: s.ID, Holder: lease.Holder})
		if err != nil {
			return err
		}
		if err := tx.EndVerify(run.ID, OutcomeNeedsApproval, reason, ""); err != nil {
			return err
		}
		return tx.Audit(index.AuditEntry{SessionID: s.ID, Actor: actor, Agent: who, Action: action, TaskID: it.ID,
			Outcome: OutcomeNeedsApproval, Detail: strings.TrimSpace(fmt.Sprintf("%s -> %s: %s %s", it.Status, queue.StatusNeedsReview, reason, detail))})
	})
	if err != nil {
		d.fail(w, err)
		return
	}
	d.hub.publish("task", map[string]any{"key": it.Key, "status": queue.StatusNeedsReview})
	d.hub.publish("verify", map[string]any{"task": it.Key, "outcome": OutcomeNeedsApproval, "reason": reason,
		"status": queue.StatusNeedsReview, "applied": true})
	d.writePlan(ctx)
	msg := fmt.Sprintf("verify.command `%s` (from %s) waits for a person's approval, so nothing was run: %s is needs_review and its lease ended. "+
		"A person approves the command with snag approve %s on this machine, then checks the task with snag verify %s",
		p.Command, fromName(p.From), it.Key, approveArg(it.Key, p.From), it.Key)
	writeJSON(w, http.StatusOK, api.Resolved{Key: it.Key, Status: queue.StatusNeedsReview, Code: OutcomeNeedsApproval,
		Outcome: OutcomeNeedsApproval, Reason: reason, Command: p.Command, From: p.From, Message: msg})
}

// eta guesses how many seconds a run will take: as long as the last run
// of the same check took, else 30 s for a command and 10 s for a browser.
func (d *Daemon) eta(ctx context.Context, taskID string, run index.VerifyRun) int {
	runs, _ := d.p.DB.VerifyRuns(ctx, taskID, 10)
	for _, r := range runs {
		if r.ID != run.ID && r.Command == run.Command && !r.Started.IsZero() && !r.Ended.IsZero() &&
			(r.Outcome == OutcomePass || r.Outcome == OutcomeFail) {
			return max(1, int(r.Ended.Sub(r.Started).Round(time.Second)/time.Second)+1)
		}
	}
	if run.Verifier == "browser" {
		return 10
	}
	return 30
}

// getVerify is GET /verify/{ref}: the latest outcome and the history.
func (d *Daemon) getVerify(w http.ResponseWriter, r *http.Request) {
	ref, ok := pathRef(w, r)
	if !ok {
		return
	}
	it, err := d.p.DB.Get(r.Context(), ref)
	if err != nil {
		d.fail(w, err)
		return
	}
	st, _, err := d.verifyState(r.Context(), it)
	if err != nil {
		d.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st.wire())
}

// verifyState is where verify of a task stands, with its recent runs.
//
// The row is read before the runs. A run's outcome ends the run in the
// transaction that moves the task, so a task still verifying whose latest
// run has ended (and was not left verifying by it) was read just before
// that transaction: its row is read again, and the item returned agrees
// with the runs.
func (d *Daemon) verifyState(ctx context.Context, it *index.Item) (verifyState, *index.Item, error) {
	running := d.verify.inFlight(it.ID)
	runs, err := d.p.DB.VerifyRuns(ctx, it.ID, 20)
	if err != nil {
		return verifyState{}, it, err
	}
	if it.Status == queue.StatusVerifying && len(runs) > 0 && !runs[0].Ended.IsZero() &&
		runs[0].Outcome != OutcomeUnavailable && runs[0].Outcome != OutcomeInterrupted {
		if fresh, err := d.p.DB.Get(ctx, queue.Ref{ID: it.ID}); err == nil {
			it = fresh
		}
	}
	st := verifyState{Key: it.Key, Status: it.Status, Running: running && runs != nil && runs[0].Ended.IsZero(), History: runs}
	if st.History == nil {
		st.History = []index.VerifyRun{}
	}
	if len(runs) > 0 {
		st.Verifier = runs[0].Verifier
	}
	for _, run := range runs {
		if !run.Ended.IsZero() && run.Outcome != OutcomeInterrupted {
			st.Outcome, st.Reason, st.LastAt, st.Shot = run.Outcome, run.Reason, run.Ended, run.Shot
			break
		}
	}
	return st, it, nil
}

// launch starts a queued run in the background. d.mu must be held.
func (d *Daemon) launch(it *index.Item, run index.VerifyRun) {
	ctx, cancel := context.WithCancel(d.runCtx)
	v := d.verify
	v.mu.Lock()
	v.flight[run.TaskID] = &flight{run: run.ID, cancel: cancel}
	v.mu.Unlock()
	t := *it.Task
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		defer cancel()
		d.runVerify(ctx, &t, run)
	}()
}

// result is what a verifier found.
type result struct {
	outcome, reason, shot string
}

func (d *Daemon) runVerify(ctx context.Context, t *queue.Task, run index.VerifyRun) {
	v := d.verify
	select {
	case v.sem <- struct{}{}:
	case <-ctx.Done():
		d.settleCancelled(run)
		return
	}
	defer func() { <-v.sem }()
	if err := d.p.DB.StartVerify(ctx, run.ID); err != nil && ctx.Err() == nil {
		d.log.Warn("verify: mark started", "task", t.Key, "err", err)
	}
	d.hub.publish("verify", map[string]any{"task": t.Key, "run": run.ID, "verifier": run.Verifier, "started": true})
	failpoint.Hit("verify", stepVerifyStarted)
	res := d.check(ctx, t, run)
	if ctx.Err() != nil {
		d.settleCancelled(run)
		return
	}
	d.finishVerify(t, run, res)
}

// settleCancelled handles a run whose context ended before its outcome: at
// a daemon's exit it stays open, for the next start to queue again; when a
// person moved the task on, it ends as interrupted.
func (d *Daemon) settleCancelled(run index.VerifyRun) {
	d.verify.mu.Lock()
	if f := d.verify.flight[run.TaskID]; f != nil && f.run == run.ID {
		delete(d.verify.flight, run.TaskID)
	}
	d.verify.mu.Unlock()
	if d.runCtx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := d.p.DB.Update(ctx, func(tx *index.Tx) error {
		return tx.EndVerify(run.ID, OutcomeInterrupted, "stopped: the task was moved on before the check ended", "")
	})
	if err != nil {
		d.log.Warn("verify: end a stopped run", "err", err)
	}
}

// check runs the verifier of a run and says what it found.
func (d *Daemon) check(ctx context.Context, t *queue.Task, run index.VerifyRun) result {
	cfg := *d.cfg.Load()
	timeout := time.Duration(cfg.Verify.TimeoutSeconds) * time.Second
	switch run.Verifier {
	case "command":
		from := project.ConfigFile
		if t.Verify != nil && t.Verify.Command == run.Command {
			from = "task"
		}
		if !d.approved(run.Command, run.Dir, cfg.Verify.Shell) {
			return result{outcome: OutcomeNeedsApproval, reason: needsApprovalReason(run.Command, from, t.Key)}
		}
		res, err := verify.RunCommand(ctx, verify.Command{Dir: run.Dir, Line: run.Command, Shell: cfg.Verify.Shell, Timeout: timeout})
		switch {
		case err != nil:
			return result{outcome: OutcomeInconclusive, reason: "the command could not run: " + strings.TrimPrefix(err.Error(), "verify: ")}
		case res.TimedOut:
			return result{outcome: OutcomeFail, reason: capReason(fmt.Sprintf("`%s` timed out after %s; last output:\n%s", run.Command, timeout, res.Tail))}
		case res.ExitCode == 0:
			return result{outcome: OutcomePass, reason: fmt.Sprintf("`%s` passed (exit 0) in %s", run.Command, res.Took.Round(time.Millisecond))}
		default:
			return result{outcome: OutcomeFail, reason: capReason(fmt.Sprintf("`%s` failed with exit %d; last output:\n%s", run.Command, res.ExitCode, res.Tail))}
		}
	case "browser":
		c := t.Capture
		if c == nil {
			c = &queue.Capture{URL: run.Command}
		}
		shots := d.p.Abs("shots")
		if err := os.MkdirAll(shots, 0o755); err != nil {
			return result{outcome: OutcomeInconclusive, reason: fmt.Sprintf("cannot make .snag/shots for the screenshot: %v", err)}
		}
		name := fmt.Sprintf("%s-verify-%d.png", t.Key, run.ID)
		res, err := browser.Run(ctx, browser.Check{Chromium: cfg.Browser.Chromium, URL: run.Command, Anchor: c.Anchor,
			CapturedErrors: c.ConsoleErrors, AllowedHosts: cfg.Browser.AllowedHosts, Shot: filepath.Join(shots, name),
			Settle: time.Duration(cfg.Browser.SettleMS) * time.Millisecond, Timeout: min(timeout, browser.DefaultTimeout)})
		if errors.Is(err, browser.ErrUnavailable) {
			return result{outcome: OutcomeUnavailable, reason: err.Error() + "; the task stays verifying: resolve it again once a browser is available"}
		}
		if err != nil {
			return result{outcome: OutcomeInconclusive, reason: capReason(fmt.Sprintf("the browser check could not run: %v", err))}
		}
		shot := ""
		if res.Shot != "" {
			shot = "shots/" + name
		}
		return result{outcome: res.Outcome, reason: capReason(res.Reason), shot: shot}
	}
	return result{outcome: OutcomeInconclusive, reason: "unknown verifier " + run.Verifier}
}

// capReason keeps a reason to what a person and a model read at a glance.
func capReason(s string) string {
	const max = 2000
	if len(s) <= max {
		return s
	}
	cut := s[len(s)-max:]
	for i := 0; i < 4 && i < len(cut); i++ { // start on a whole character
		if cut[i]&0xC0 != 0x80 {
			cut = cut[i:]
			break
		}
	}
	return "…" + cut
}

// finishVerify applies a run's outcome to the task, if it is still the
// task's run and the task is still verifying.
func (d *Daemon) finishVerify(t *queue.Task, run index.VerifyRun, res result) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d.mu.Lock()
	defer d.mu.Unlock()
	v := d.verify
	v.mu.Lock()
	current := v.flight[run.TaskID] != nil && v.flight[run.TaskID].run == run.ID
	v.mu.Unlock()
	if current {
		// In flight until the outcome is committed: a reader never sees
		// the check over and the task not yet moved.
		defer func() {
			v.mu.Lock()
			if f := v.flight[run.TaskID]; f != nil && f.run == run.ID {
				delete(v.flight, run.TaskID)
			}
			v.mu.Unlock()
		}()
	}
	if d.runCtx.Err() != nil {
		return // the run stays open; the next start queues it again
	}
	failpoint.Hit("verify", stepVerifyChecked)
	it, err := d.p.DB.Get(ctx, queue.Ref{ID: run.TaskID})
	applied := current && err == nil && it.Status == queue.StatusVerifying
	var status queue.Status
	err = d.p.DB.Update(ctx, func(tx *index.Tx) error {
		reason := res.reason
		if !applied {
			now := "gone"
			if it != nil {
				now = string(it.Status)
			}
			reason += fmt.Sprintf(" (not applied: the task is %s now)", now)
			if err := tx.EndVerify(run.ID, res.outcome, reason, res.shot); err != nil {
				return err
			}
			return tx.Audit(index.AuditEntry{SessionID: run.SessionID, Actor: queue.System, Agent: run.Holder, Action: "verify",
				TaskID: run.TaskID, Outcome: res.outcome, Detail: reason})
		}
		action, endLease := queue.Action(""), false
		switch res.outcome {
		case OutcomePass:
			action, endLease = queue.ActPass, true
		case OutcomeFail:
			// Back to its holder when the holder is still here; else open.
			l, lerr := tx.Check(it.ID, 0)
			s, serr := d.p.DB.SessionByID(ctx, l.SessionID)
			if lerr == nil && !l.Detached && serr == nil && s.Ended.IsZero() {
				action = queue.ActFail
			} else {
				action, endLease = queue.ActRelease, true
			}
		case OutcomeInconclusive, OutcomeNeedsApproval:
			action, endLease = queue.ActInconclusive, true
		}
		status = it.Status
		if action != "" {
			moved, err := d.p.MoveFile(it, action, queue.System, run.Holder)
			if err != nil {
				return err
			}
			status = moved.Status
			if err := tx.SyncFile(d.p.Tasks, project.Name(it)); err != nil {
				return err
			}
		}
		if endLease {
			if _, _, err := tx.End(it.ID, "verify: "+res.outcome); err != nil {
				return err
			}
		}
		if err := tx.EndVerify(run.ID, res.outcome, reason, res.shot); err != nil {
			return err
		}
		return tx.Audit(index.AuditEntry{SessionID: run.SessionID, Actor: queue.System, Agent: run.Holder, Action: "verify",
			TaskID: it.ID, Outcome: res.outcome, Detail: fmt.Sprintf("%s -> %s: %s", queue.StatusVerifying, status, reason)})
	})
	if err != nil {
		d.log.Error("verify: apply the outcome", "task", t.Key, "outcome", res.outcome, "err", err)
		return
	}
	d.hub.publish("verify", map[string]any{"task": t.Key, "run": run.ID, "outcome": res.outcome, "reason": res.reason,
		"status": status, "applied": applied})
	if applied {
		d.writePlan(ctx)
	}
}

// resumeVerify queues again the runs a daemon's exit cut off, for tasks
// that are still verifying.
func (d *Daemon) resumeVerify(ctx context.Context) {
	runs, err := d.p.DB.OpenVerifyRuns(ctx)
	if err != nil || len(runs) == 0 {
		if err != nil {
			d.log.Error("verify: find runs to resume", "err", err)
		}
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, old := range runs {
		it, err := d.p.DB.Get(ctx, queue.Ref{ID: old.TaskID})
		again := err == nil && it.Status == queue.StatusVerifying && !d.verify.inFlight(old.TaskID)
		var run index.VerifyRun
		err = d.p.DB.Update(ctx, func(tx *index.Tx) error {
			reason := "snagd stopped during the run"
			if again {
				reason += "; queued again"
			}
			if err := tx.EndVerify(old.ID, OutcomeInterrupted, reason, ""); err != nil {
				return err
			}
			if !again {
				return nil
			}
			run, err = tx.QueueVerify(index.VerifyRun{TaskID: old.TaskID, Verifier: old.Verifier, Command: old.Command,
				Dir: old.Dir, SessionID: old.SessionID, Holder: old.Holder})
			if err != nil {
				return err
			}
			return tx.Audit(index.AuditEntry{SessionID: old.SessionID, Actor: queue.System, Agent: old.Holder, Action: "verify",
				TaskID: old.TaskID, Outcome: "requeued", Detail: fmt.Sprintf("run %d was cut off by snagd's exit: run %d queued", old.ID, run.ID)})
		})
		if err != nil {
			d.log.Error("verify: resume", "task", old.TaskID, "err", err)
			continue
		}
		if again {
			d.log.Info("verify: queued a run again that snagd's exit cut off", "task", it.Key, "run", run.ID)
			d.launch(it, run)
		}
	}
}

// personAccept is POST /tasks/{ref}/accept: a person resolves a task that
// is claimed (nothing could verify it), verifying or needs_review. The
// lease ends and a run in flight is stopped; verified stays false.
func (d *Daemon) personAccept(w http.ResponseWriter, r *http.Request) {
	var req moveRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	ref, ok := pathRef(w, r)
	if !ok {
		return
	}
	if r.Header.Get(SessionHeader) != "" {
		writeError(w, &apiError{http.StatusForbidden, "person_only", "only a person resolves a task without verify: resolve it, and verify checks it"})
		return
	}
	t, err := d.accept(r.Context(), ref, req.By)
	if err != nil {
		d.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, moved(t))
}

// accept is a person's resolve without verify: the API's and the board's.
// The lease ends and a check in flight is stopped.
func (d *Daemon) accept(ctx context.Context, ref queue.Ref, by string) (*queue.Task, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	it, err := d.p.DB.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	var moved *queue.Task
	err = d.p.DB.Update(ctx, func(tx *index.Tx) error {
		if moved, err = d.p.MoveFile(it, queue.ActAccept, queue.Person, by); err != nil {
			return err
		}
		if _, _, err := tx.End(it.ID, "resolved by "+by); err != nil {
			return err
		}
		if err := tx.SyncFile(d.p.Tasks, project.Name(it)); err != nil {
			return err
		}
		return tx.Audit(index.AuditEntry{Actor: queue.Person, Agent: by, Action: "accept", TaskID: it.ID, Outcome: "ok",
			Detail: fmt.Sprintf("%s -> %s by a person", it.Status, moved.Status)})
	})
	if err != nil {
		return nil, err
	}
	d.verify.stop(it.ID)
	d.hub.publish("task", map[string]any{"key": it.Key, "status": moved.Status})
	d.writePlan(ctx)
	return moved, nil
}
