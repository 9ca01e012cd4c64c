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
	"github.com/snagdev/snag/internal/engine/team"
)

// Workspace is one worktree's open project: its engine and its services.
type Workspace struct {
	// Engine is the one writer.
	Engine *engine.Engine
	// Team links the engine to the live state's other clones.
	Team *team.Service
}

var _ team.Engine = (*engine.Engine)(nil)

// runner is a service with background work.
type runner interface {
	Run(ctx context.Context) error
}

// Open opens the project at opts.Root (engine.Open) and the services
// beside its engine. Run serves it; Close ends it.
func Open(ctx context.Context, opts engine.Options) (*Workspace, error) {
	e, err := engine.Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	w := &Workspace{Engine: e}
	w.Team = team.New(e, opts.Log)
	return w, nil
}

// runners are the services with background work, in the order they start.
func (w *Workspace) runners() []runner {
	return []runner{w.Engine, w.Team}
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
// project once its index is closed.
func (w *Workspace) Close() error {
	return w.Engine.Close()
}
