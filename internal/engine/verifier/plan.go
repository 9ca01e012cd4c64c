package verifier

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/approval"
	"github.com/snagdev/snag/internal/browser"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// approvals is the per-user record of approved verify commands.
func (v *Verifier) approvals() *approval.Store {
	home := v.home
	if home == "" {
		home = project.Home()
	}
	return approval.Open(filepath.Join(home, "approved"))
}

// Plan says what would check a task, verifying in dir.
func (v *Verifier) Plan(it *index.Item, dir string) ops.VerifyPlan {
	cfg := v.e.Config()
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
		ok := v.approved(cmd, dir, cfg.Verify.Shell)
		p.Verifier, p.Command, p.From, p.Dir, p.Approved = "command", cmd, from, dir, &ok
		p.Message = fmt.Sprintf("verify runs `%s` (from %s) in %s; exit 0 passes", cmd, engine.VerifyCommandFrom(from), dir)
		if !ok {
			p.Message += fmt.Sprintf("; the command waits for a person's approval (snag approve %s): until then a resolve sends the task to needs_review, ends its lease, and runs nothing", engine.ApproveArg(it.Key, from))
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

// approved reports whether a person approved a command for this project:
// for the daemon's root, or for the worktree the command runs in (snag
// approve records the scope of the root it runs in).
func (v *Verifier) approved(command, dir string, shell bool) bool {
	store := v.approvals()
	for _, root := range []string{v.e.Root(), dir} {
		if root == "" {
			continue
		}
		scope, err := approval.Scope(root)
		if err != nil {
			continue
		}
		ok, err := store.Approved(scope, command, shell)
		if err != nil {
			v.log.Warn("approvals", "err", err)
		}
		if ok {
			return true
		}
	}
	return false
}

// VerifyPlan says what would check a task for a caller working in dir
// ("" for the project's root): a dry run, which changes nothing.
func (v *Verifier) VerifyPlan(ctx context.Context, ref queue.Ref, dir string) (ops.VerifyPlan, error) {
	it, worktree, err := v.e.PlanTarget(ctx, ref)
	if err != nil {
		return ops.VerifyPlan{}, err
	}
	if worktree != "" {
		dir = worktree // the task's own worktree: verify runs there
	}
	if dir == "" {
		dir = v.e.Root()
	}
	return v.Plan(it, dir), nil
}

// ETA guesses how many seconds a run will take: as long as the last run
// of the same check took, else 30 s for a command and 10 s for a browser.
func (v *Verifier) ETA(ctx context.Context, taskID string, run snag.VerifyRun) int {
	runs, _ := v.e.VerifyRuns(ctx, taskID, 10)
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
func (v *Verifier) Verification(ctx context.Context, ref queue.Ref) (snag.VerifyState, *index.Item, error) {
	it, err := v.e.Get(ctx, ref)
	if err != nil {
		return snag.VerifyState{}, nil, err
	}
	return v.State(ctx, it)
}

// State is where verify of a task stands, with its recent runs.
//
// The row is read before the runs. A run's outcome ends the run in the
// transaction that moves the task, so a task still verifying whose latest
// run has ended (and was not left verifying by it) was read just before
// that transaction: its row is read again, and the item returned agrees
// with the runs.
func (v *Verifier) State(ctx context.Context, it *index.Item) (snag.VerifyState, *index.Item, error) {
	running := v.InFlight(it.ID)
	runs, err := v.e.VerifyRuns(ctx, it.ID, 20)
	if err != nil {
		return snag.VerifyState{}, it, err
	}
	if it.Status == queue.StatusVerifying && len(runs) > 0 && !runs[0].Ended.IsZero() &&
		runs[0].Outcome != snag.OutcomeUnavailable && runs[0].Outcome != snag.OutcomeInterrupted {
		if fresh, err := v.e.Get(ctx, queue.Ref{ID: it.ID}); err == nil {
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
