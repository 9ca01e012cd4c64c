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
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
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

// Plan is what would check a task: the dry run's answer.
type Plan struct {
	Key      string `json:"key"`
	Code     string `json:"code"`
	Error    string `json:"error,omitempty"`    // the code again, on a 503, as every error answer has it
	Verifier string `json:"verifier,omitempty"` // command | browser
	Command  string `json:"command,omitempty"`
	From     string `json:"from,omitempty"` // where the command comes from: task | config.json
	URL      string `json:"url,omitempty"`
	Dir      string `json:"dir,omitempty"`
	Approved *bool  `json:"approved,omitempty"`
	Message  string `json:"message"`
}

// VerifyState is where verify of a task stands: GET /verify/{ref}, and the
// verify part of a started run's answer.
type VerifyState struct {
	Key      string            `json:"key"`
	Status   queue.Status      `json:"status"`
	Running  bool              `json:"running"`
	Outcome  string            `json:"outcome,omitempty"`
	Reason   string            `json:"reason,omitempty"`
	LastAt   time.Time         `json:"last_at,omitzero"`
	Verifier string            `json:"verifier,omitempty"`
	Shot     string            `json:"shot,omitempty"`
	Visual   *index.Visual     `json:"visual,omitempty"`
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

// current reports whether run is its task's run in flight.
func (v *verifier) current(run index.VerifyRun) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	f := v.flight[run.TaskID]
	return f != nil && f.run == run.ID
}

// land ends the flight of run, if it is still its task's.
func (v *verifier) land(run index.VerifyRun) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if f := v.flight[run.TaskID]; f != nil && f.run == run.ID {
		delete(v.flight, run.TaskID)
	}
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
func (e *Engine) plan(it *index.Item, dir string) Plan {
	cfg := *e.cfg.Load()
	p := Plan{Key: it.Key, Code: VerifyOK}
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
		ok := e.approved(cmd, dir, cfg.Verify.Shell)
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
	Verify *VerifyState
	ETA    int
	// Of a command that waits for approval: the run's reason, the command
	// and where it comes from (task or config.json).
	Reason  string
	Command string
	From    string
}

// VerifyPlan says what would check a task for a caller working in dir
// ("" for the project's root): a dry run, which changes nothing.
func (e *Engine) VerifyPlan(ctx context.Context, ref queue.Ref, dir string) (Plan, error) {
	it, err := e.p.DB.Get(ctx, ref)
	if err != nil {
		return Plan{}, err
	}
	if l, err := e.p.DB.LeaseOf(ctx, it.ID); err == nil && l.Worktree != "" {
		dir = l.Worktree // the task's own worktree: verify runs there
	}
	if dir == "" {
		dir = e.root
	}
	return e.plan(it, dir), nil
}

// eta guesses how many seconds a run will take: as long as the last run
// of the same check took, else 30 s for a command and 10 s for a browser.
func (e *Engine) eta(ctx context.Context, taskID string, run index.VerifyRun) int {
	runs, _ := e.p.DB.VerifyRuns(ctx, taskID, 10)
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

// Verification is where verify of task ref stands, with its recent runs,
// and the task as the runs agree with.
func (e *Engine) Verification(ctx context.Context, ref queue.Ref) (VerifyState, *index.Item, error) {
	it, err := e.Get(ctx, ref)
	if err != nil {
		return VerifyState{}, nil, err
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
func (e *Engine) verifyState(ctx context.Context, it *index.Item) (VerifyState, *index.Item, error) {
	running := e.verify.inFlight(it.ID)
	runs, err := e.p.DB.VerifyRuns(ctx, it.ID, 20)
	if err != nil {
		return VerifyState{}, it, err
	}
	if it.Status == queue.StatusVerifying && len(runs) > 0 && !runs[0].Ended.IsZero() &&
		runs[0].Outcome != OutcomeUnavailable && runs[0].Outcome != OutcomeInterrupted {
		if fresh, err := e.Get(ctx, queue.Ref{ID: it.ID}); err == nil {
			it = fresh
		}
	}
	st := VerifyState{Key: it.Key, Status: it.Status, Running: running && runs != nil && runs[0].Ended.IsZero(), History: runs}
	if st.History == nil {
		st.History = []index.VerifyRun{}
	}
	if len(runs) > 0 {
		st.Verifier = runs[0].Verifier
	}
	for _, run := range runs {
		if !run.Ended.IsZero() && run.Outcome != OutcomeInterrupted {
			st.Outcome, st.Reason, st.LastAt, st.Shot, st.Visual = run.Outcome, run.Reason, run.Ended, run.Shot, run.Visual
			break
		}
	}
	return st, it, nil
}
