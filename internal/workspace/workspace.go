// Package workspace opens one worktree's project: the engine, snag's one
// writer (the write lock, the group commit and the moves), and the
// services that run beside it, each over the small seam of the engine it
// needs. snagd opens one workspace for each worktree it serves; tests open
// one in process.
//
// A service is a value with its own state and, when it has background
// work, a Run(ctx) that returns once ctx ends. The engine does not know
// its services: where it must tell one of something, it calls a hook the
// workspace installs when it opens them.
package workspace

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/engine/brief"
	"github.com/snagdev/snag/internal/engine/capture"
	"github.com/snagdev/snag/internal/engine/fileclaims"
	"github.com/snagdev/snag/internal/engine/filesync"
	"github.com/snagdev/snag/internal/engine/graph"
	"github.com/snagdev/snag/internal/engine/sessions"
	"github.com/snagdev/snag/internal/engine/team"
	"github.com/snagdev/snag/internal/engine/verifier"
	"github.com/snagdev/snag/internal/engine/worktrees"
)

// Workspace is one worktree's open project: its engine and its services.
type Workspace struct {
	// Engine is the one writer.
	Engine *engine.Engine
	// FileSync watches the task files, settles the files an editor is
	// rewriting and merges back the saves snag's writes displaced.
	FileSync *filesync.Service
	// Sessions keeps the sessions' streams, ends a session at the end of
	// its grace, and sweeps those whose processes are gone.
	Sessions *sessions.Service
	// Capture makes a person's captures tasks.
	Capture *capture.Service
	// Worktrees makes, lists and prunes the task worktrees.
	Worktrees *worktrees.Service
	// Graph is the decision graph: notes, links, plans and handoffs.
	Graph *graph.Service
	// Verifier runs the checks of resolved tasks.
	Verifier *verifier.Verifier
	// Team links the engine to the live state's other clones.
	Team *team.Service
	// FileClaims claims, checks and releases the files agents edit.
	FileClaims *fileclaims.Service
	// Brief tells agents and people what the team is doing: an agent's
	// context, the activity by branch, the board's other clones, reports.
	Brief *brief.Service
}

// The engine is each service's seam.
var (
	_ filesync.Engine   = (*engine.Engine)(nil)
	_ sessions.Engine   = (*engine.Engine)(nil)
	_ capture.Engine    = (*engine.Engine)(nil)
	_ worktrees.Engine  = (*engine.Engine)(nil)
	_ graph.Engine      = (*engine.Engine)(nil)
	_ verifier.Engine   = (*engine.Engine)(nil)
	_ team.Engine       = (*engine.Engine)(nil)
	_ brief.Engine      = (*engine.Engine)(nil)
	_ fileclaims.Engine = (*engine.Engine)(nil)
	// The verify service is the hook the engine starts its runs by.
	_ engine.Verifier = (*verifier.Verifier)(nil)
)

// runner is a service with background work.
type runner interface {
	Run(ctx context.Context) error
}

// Open opens the project at opts.Root (engine.Open) and the services
// beside its engine, with the hooks the engine calls them by. Run serves
// it; Close ends it.
func Open(ctx context.Context, opts engine.Options) (*Workspace, error) {
	e, err := engine.Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	w := &Workspace{Engine: e}
	w.FileSync = filesync.New(e, opts)
	e.OnSettle(w.FileSync)
	e.OnDisplaced(w.FileSync.Displaced)
	w.Sessions = sessions.New(afterResume{e}, sessionsOptions(opts))
	e.OnAdopt(w.Sessions.Adopt)
	w.Capture = capture.New(e, e.Project().Abs("shots"))
	w.Worktrees = worktrees.New(e)
	w.Graph = graph.New(e, e.Project().DB)
	w.Verifier = verifier.New(e, verifier.Options{Home: opts.Home, Log: opts.Log})
	e.UseVerifier(w.Verifier)
	w.Team = team.New(afterResume{e}, opts.Log)
	w.FileClaims = fileclaims.New(e, e.Project().DB)
	w.Brief = brief.New(e, e.Project().DB)
	return w, nil
}

// afterResume is the engine as the sessions and team services wait for
// it: ready once the first rescan is done and the verify service has
// queued again the runs a restart cut off (engine.WaitResumed). The first
// sweep, and the live state's first reconcile, then find a gone holder's
// task with its check in flight, and leave the check to decide where the
// task goes, as when the engine resumed the runs before either started.
type afterResume struct{ *engine.Engine }

// WaitReady waits for the engine's first rescan, then for the verify
// service's resume.
func (e afterResume) WaitReady(ctx context.Context) error {
	if err := e.Engine.WaitReady(ctx); err != nil {
		return err
	}
	return e.Engine.WaitResumed(ctx)
}

// sessionsOptions are the sessions service's options, the engine's
// defaults where opts has none.
func sessionsOptions(opts engine.Options) sessions.Options {
	o := sessions.Options{Grace: opts.Grace, Sweep: opts.Sweep}
	if o.Grace <= 0 {
		o.Grace = engine.DefaultGrace
	}
	if o.Sweep <= 0 {
		o.Sweep = engine.DefaultSweep
	}
	return o
}

// runners are the services with background work, in the order they start.
func (w *Workspace) runners() []runner {
	return []runner{w.FileSync, w.Sessions, w.Verifier, w.Team}
}

// Run runs the engine and every service until ctx ends, or until one of
// them fails (then the others are stopped, and its error returned).
func (w *Workspace) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, r := range w.runners() {
		g.Go(func() error { return r.Run(gctx) })
	}
	return g.Wait()
}

// Close stops the services, then the engine: no service touches the
// project once its index is closed. The verifier cancels its runs and
// waits for them first; the sessions end their timers; the file sync
// merges back the displaced saves it holds, through the
// engine, before the engine closes.
func (w *Workspace) Close() error {
	w.Verifier.Close() // its runs end before anything they write through is closed
	w.Sessions.Close()
	w.FileSync.Close()
	return w.Engine.Close()
}
