package engine

import (
	"context"
	"time"

	"github.com/snagdev/snag/internal/index"
)

// The seam of the sessions service (internal/engine/sessions): the
// session rows and the moves on them stay the engine's; the service says
// when a session ends.

// OnAdopt sets f, which the first rescan calls for each session live in
// the index from before the start: the sessions service gives it the
// grace to reconnect. Set it before Run.
func (e *Engine) OnAdopt(f func(id int64, expires time.Time)) { e.adopt = f }

// LiveSessions returns the sessions that have not ended.
func (e *Engine) LiveSessions(ctx context.Context) ([]index.Session, error) {
	return e.p.DB.LiveSessions(ctx)
}

// FollowBranch records the branch checked out where live session s works
// (for the activity by branch), when it is not the one s has.
func (e *Engine) FollowBranch(ctx context.Context, s index.Session) {
	if b := e.sessionBranch(s); b != s.Branch {
		e.p.DB.SetSessionBranch(ctx, s.ID, b)
	}
}

// RestoreIndex writes snag.db again when it was deleted or moved away
// while snagd ran, from what snagd holds (restoreIndex): the sweep looks
// every few seconds, as a watcher that polls sees no removal.
func (e *Engine) RestoreIndex(ctx context.Context) { e.restoreIndex(ctx) }

// CountSweep counts a sweep of the sessions done, in Progress.Sweeps.
func (e *Engine) CountSweep() { e.progress.sweeps.Add(1) }
