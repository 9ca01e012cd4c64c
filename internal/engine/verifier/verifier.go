// Package verifier is the verify service: it runs the checks that decide
// whether a resolved task is done. It owns the runs in flight and their
// limit (verify.max_concurrent in .snag/config.json), runs each run's
// check (a command, or a browser with the visual compare of the
// captured element), resumes the runs a daemon's exit cut off, answers
// the dry run (VerifyPlan, with the approvals it reads) and says where a
// check stands (Verification).
//
// The engine keeps the moves: a resolve sends the task to verifying and
// records the run, then starts it here (the engine's Verifier hook, which
// the workspace installs); the outcome goes back through the engine's
// FinishVerify, under its lock. The service reaches the engine only
// through Engine, and must not import a transport (net/http, the daemon,
// mcp, client, board, cli) or another service.
package verifier

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/failpoint"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// Engine is what the verifier needs of the engine: *engine.Engine
// satisfies it.
type Engine interface {
	// Config is the project's configuration as snag last read it.
	Config() queue.Config
	// Root is the project root.
	Root() string
	// WaitReady returns once the first full rescan is done.
	WaitReady(ctx context.Context) error
	// Get is one task, as readers see it.
	Get(ctx context.Context, ref queue.Ref) (*index.Item, error)
	// PlanTarget is the task a dry run plans for and its lease's worktree.
	PlanTarget(ctx context.Context, ref queue.Ref) (*index.Item, string, error)
	// VerifyRuns are the task's latest runs, newest first.
	VerifyRuns(ctx context.Context, taskID string, limit int) ([]snag.VerifyRun, error)
	// MarkVerifyStarted records and announces that a run was taken.
	MarkVerifyStarted(ctx context.Context, key string, run snag.VerifyRun) error
	// EndVerify ends a run without moving its task.
	EndVerify(ctx context.Context, runID int64, end index.RunEnd) error
	// FinishVerify applies a run's outcome, under the engine's lock.
	FinishVerify(stopping context.Context, key string, run snag.VerifyRun, res index.RunEnd)
	// ResumeVerify queues again the runs a daemon's exit cut off, and
	// starts them here.
	ResumeVerify(ctx context.Context)
}

// Options configure a verifier.
type Options struct {
	// Home is the per-user folder with the approvals; "" for
	// project.Home().
	Home string
	// Log is where runs that go wrong are told; nil discards.
	Log *slog.Logger
}

// Verifier runs the checks of resolved tasks in the background, at most
// verify.max_concurrent at once. Its methods are safe for concurrent use.
// Close cancels the runs and waits for them.
type Verifier struct {
	e    Engine
	home string
	log  *slog.Logger
	sem  chan struct{}
	wg   sync.WaitGroup
	// runCtx ends every run when the verifier closes: a run cut off so
	// stays open, for the next start to queue again.
	runCtx context.Context
	stop   context.CancelFunc

	mu     sync.Mutex
	flight map[string]*flight // by task id: a run queued or running
}

type flight struct {
	run    int64
	cancel context.CancelFunc
}

// New makes the verifier of engine e, its limit of runs at once read from
// e's config now. Install it on the engine (UseVerifier) before the
// engine serves.
func New(e Engine, opts Options) *Verifier {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	v := &Verifier{e: e, home: opts.Home, log: opts.Log, sem: make(chan struct{}, max(1, e.Config().Verify.MaxConcurrent)),
		flight: map[string]*flight{}}
	v.runCtx, v.stop = context.WithCancel(context.Background())
	return v
}

// Run resumes the runs a daemon's exit cut off, once the engine is ready,
// and returns when ctx ends. The runs themselves end at Close.
func (v *Verifier) Run(ctx context.Context) error {
	if v.e.WaitReady(ctx) != nil {
		return nil
	}
	v.e.ResumeVerify(ctx)
	<-ctx.Done()
	return nil
}

// Close cancels the runs in flight (commands are killed, browsers closed)
// and waits for them, so none touches the engine after it. Close the
// verifier before its engine.
func (v *Verifier) Close() error {
	v.stop()
	v.wg.Wait()
	return nil
}

// InFlight reports whether a run of the task is queued or running.
func (v *Verifier) InFlight(taskID string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.flight[taskID] != nil
}

// Current reports whether run is its task's run in flight.
func (v *Verifier) Current(run snag.VerifyRun) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	f := v.flight[run.TaskID]
	return f != nil && f.run == run.ID
}

// Land ends the flight of run, if it is still its task's.
func (v *Verifier) Land(run snag.VerifyRun) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if f := v.flight[run.TaskID]; f != nil && f.run == run.ID {
		delete(v.flight, run.TaskID)
	}
}

// Stop cancels the task's run, if one is in flight: a person moved the
// task on, and its outcome would not be applied.
func (v *Verifier) Stop(taskID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if f := v.flight[taskID]; f != nil {
		f.cancel()
	}
}

// Start starts a queued run in the background: it waits for a place among
// the runs at once, checks, and hands the outcome to the engine. The
// engine calls it with its write lock held.
func (v *Verifier) Start(it *index.Item, run snag.VerifyRun) {
	ctx, cancel := context.WithCancel(v.runCtx)
	v.mu.Lock()
	v.flight[run.TaskID] = &flight{run: run.ID, cancel: cancel}
	v.mu.Unlock()
	t := *it.Task
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		defer cancel()
		v.runVerify(ctx, &t, run)
	}()
}

func (v *Verifier) runVerify(ctx context.Context, t *queue.Task, run snag.VerifyRun) {
	select {
	case v.sem <- struct{}{}:
	case <-ctx.Done():
		v.settleCancelled(run)
		return
	}
	defer func() { <-v.sem }()
	if err := v.e.MarkVerifyStarted(ctx, t.Key, run); err != nil && ctx.Err() == nil {
		v.log.Warn("verify: mark started", "task", t.Key, "err", err)
	}
	failpoint.Hit("verify", engine.StepVerifyStarted)
	res := v.check(ctx, t, run)
	if ctx.Err() != nil {
		v.settleCancelled(run)
		return
	}
	v.e.FinishVerify(v.runCtx, t.Key, run, res)
}

// settleCancelled handles a run whose context ended before its outcome: at
// a daemon's exit it stays open, for the next start to queue again; when a
// person moved the task on, it ends as interrupted.
func (v *Verifier) settleCancelled(run snag.VerifyRun) {
	v.Land(run)
	if v.runCtx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := v.e.EndVerify(ctx, run.ID, index.RunEnd{Outcome: snag.OutcomeInterrupted, Reason: "stopped: the task was moved on before the check ended"})
	if err != nil {
		v.log.Warn("verify: end a stopped run", "err", err)
	}
}
