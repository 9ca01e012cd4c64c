package engine

import (
	"context"
	"slices"
	"time"

	"github.com/snagdev/snag/index"
)

// TaskLease is a live task lease as the activity shows it.
type TaskLease struct {
	Key, Title string
	Holder     string
	Branch     string // the holder's, when known
	Since      time.Time
}

// Activity is what is live now and what happened lately, by branch: the
// task leases, file claims and branch write leases live now, and each
// branch's recent notes, claims, resolves and last report, the latest
// branch first. Reading it takes no lease.
type Activity struct {
	Workspace string
	Tasks     []TaskLease
	Files     []index.FileClaim
	Branches  []index.BranchLease // live branch write leases
	Recent    []index.BranchActivity
	// BranchesTotal is how many branches had any activity in the window.
	BranchesTotal int
	Now           time.Time
}

// ActivityWindow is how far back the activity by branch looks.
const ActivityWindow = 7 * 24 * time.Hour

// MaxActivityBranches bounds the branches one activity read lists.
const MaxActivityBranches = 200

// Activity reads the activity of at most branches branches (1 to
// MaxActivityBranches).
func (e *Engine) Activity(ctx context.Context, branches int) (Activity, error) {
	branches = min(max(branches, 1), MaxActivityBranches)
	a := Activity{Workspace: e.Workspace(), Now: time.Now()}
	if err := e.syncNotes(ctx, false); err != nil {
		return a, err
	}
	sessions, err := e.p.DB.LiveSessions(ctx)
	if err != nil {
		return a, err
	}
	live := map[int64]index.Session{}
	for _, s := range sessions {
		live[s.ID] = s
	}
	leases, err := e.p.DB.Leases(ctx)
	if err != nil {
		return a, err
	}
	for _, l := range leases {
		s, ok := live[l.SessionID]
		if !ok {
			continue
		}
		t := TaskLease{Key: l.TaskID, Holder: l.Holder, Branch: s.Branch, Since: l.Acquired}
		if h := e.heldTask(ctx, l); h.Key != "" {
			t.Key, t.Title = h.Key, h.Title
		}
		a.Tasks = append(a.Tasks, t)
	}
	slices.SortFunc(a.Tasks, func(x, y TaskLease) int { return y.Since.Compare(x.Since) })
	if a.Files, err = e.p.DB.FileClaims(ctx, a.Now); err != nil {
		return a, err
	}
	if a.Branches, err = e.p.DB.BranchLeases(ctx, a.Workspace); err != nil {
		return a, err
	}
	a.Recent, a.BranchesTotal, err = e.p.DB.Activity(ctx, a.Now.Add(-ActivityWindow), branches)
	return a, err
}
