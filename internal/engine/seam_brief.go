package engine

import (
	"context"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// The seam of the briefing service (internal/engine/brief): what an
// agent's context, the activity by branch, the board's view of the other
// clones and the reports read of the engine. Most of it is reads the
// engine had (List, Plans, Notes, SyncNotes, FileClaims, Coord, TeamLink,
// TaskOf); the two below are the engine's own helpers, exported.

// TeamClaims words the live state's file claims as the index's, each
// holder named with its machine when it is another clone's.
func (e *Engine) TeamClaims(cs []coord.FileClaim) []snag.FileClaim { return e.teamClaims(cs) }

// WorktreesActivity is the activity by branch since since that the
// repository's other worktrees (served by this snagd) recorded, one list
// each; nil when snagd serves this worktree alone.
func (e *Engine) WorktreesActivity(ctx context.Context, since time.Time) [][]snag.BranchActivity {
	if r := e.opts.Repository; r != nil {
		return r.activity(ctx, e, since)
	}
	return nil
}

// taskOf reads the task ref names, or refuses naming the fix (TaskOf, of
// the graph's and the briefing's seams).
func (e *Engine) taskOf(ctx context.Context, ref string) (*index.Item, error) {
	r, err := queue.ParseRef(ref)
	if err != nil {
		return nil, refuse(ErrInvalid, "bad_ref", "%v", err)
	}
	it, err := e.p.DB.Get(ctx, r)
	if err != nil {
		return nil, refuse(ErrNotFound, "not_found", "no task %s: snag_list or snag_search finds a task's key", ref)
	}
	return it, nil
}
