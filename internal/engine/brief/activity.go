package brief

import (
	"context"
	"slices"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// Activity is what is live now and what happened lately, by branch: the
// task leases, file claims and branch write leases live now, and each
// branch's recent notes, claims, resolves and last report, the latest
// branch first. Reading it takes no lease.
type Activity struct {
	Workspace string
	Tasks     []snag.TaskLease
	Files     []snag.FileClaim
	Branches  []index.BranchLease // live branch write leases
	Recent    []snag.BranchActivity
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
func (s *Service) Activity(ctx context.Context, branches int) (Activity, error) {
	branches = min(max(branches, 1), MaxActivityBranches)
	a := Activity{Workspace: s.e.Workspace(), Now: time.Now()}
	if err := s.e.SyncNotes(ctx, false); err != nil {
		return a, err
	}
	var err error
	if a.Tasks, err = s.activityTasks(ctx); err != nil {
		return a, err
	}
	if a.Files, err = s.e.FileClaims(ctx); err != nil {
		return a, err
	}
	if a.Branches, err = s.db.BranchLeases(ctx, a.Workspace); err != nil {
		return a, err
	}
	since := a.Now.Add(-ActivityWindow)
	own, _, err := s.db.Activity(ctx, since, 0)
	if err != nil {
		return a, err
	}
	// The repository's other worktrees, served by this snagd, keep their
	// own audit: their branches' claims, resolves and links are theirs.
	own = mergeWorktrees(own, s.e.WorktreesActivity(ctx, since))
	var team map[string]*coord.BranchActivity
	if live := s.team(); live != nil {
		team, _ = live.Activity(ctx, since)
	}
	a.Recent, a.BranchesTotal = mergeActivity(own, team, branches)
	return a, nil
}

// activityTasks lists the task leases live now, this worktree's live
// sessions' and (team mode, the store in reach) the other clones'
// agents', by their branch, the latest first.
func (s *Service) activityTasks(ctx context.Context) ([]snag.TaskLease, error) {
	sessions, err := s.db.LiveSessions(ctx)
	if err != nil {
		return nil, err
	}
	live := map[int64]index.Session{}
	for _, o := range sessions {
		live[o.ID] = o
	}
	leases, err := s.db.Leases(ctx)
	if err != nil {
		return nil, err
	}
	var tasks []snag.TaskLease
	for _, l := range leases {
		o, ok := live[l.SessionID]
		if !ok {
			continue
		}
		t := snag.TaskLease{Key: l.TaskID, Holder: l.Holder, Branch: o.Branch, Since: l.Acquired}
		if h := s.heldTask(ctx, l); h.Key != "" {
			t.Key, t.Title = h.Key, h.Title
		}
		tasks = append(tasks, t)
	}
	if team := s.team(); team != nil {
		// The other clones' agents and what they hold, by their branch.
		if agents, err := team.Agents(ctx); err == nil {
			for _, ag := range agents {
				for _, l := range ag.Leases {
					t := snag.TaskLease{Key: l.Key, Holder: ag.Name + " on " + ag.Host, Branch: ag.Branch, Since: l.Updated}
					if it, err := s.db.Get(ctx, queue.Ref{ID: l.TaskID}); err == nil {
						t.Title = it.Title
					}
					tasks = append(tasks, t)
				}
			}
		}
	}
	slices.SortFunc(tasks, func(x, y snag.TaskLease) int { return y.Since.Compare(x.Since) })
	return tasks, nil
}

// addKeys adds keys to a branch's list of one kind, newest first, at most
// five, each once.
func addKeys(list []string, keys ...string) []string {
	for _, k := range keys {
		if len(list) < 5 && !slices.Contains(list, k) {
			list = append(list, k)
		}
	}
	return list
}

// mergeWorktrees adds the activity by branch that the repository's other
// worktrees recorded to this one's: a branch's latest time, and its keys
// of each kind, newest first, at most five (its notes are in every
// worktree's reads already).
func mergeWorktrees(own []snag.BranchActivity, others [][]snag.BranchActivity) []snag.BranchActivity {
	by := map[string]int{}
	for i := range own {
		by[own[i].Branch] = i
	}
	for _, list := range others {
		for _, o := range list {
			i, ok := by[o.Branch]
			if !ok {
				own = append(own, snag.BranchActivity{Branch: o.Branch})
				i = len(own) - 1
				by[o.Branch] = i
			}
			a := &own[i]
			if o.Last.After(a.Last) {
				a.Last = o.Last
			}
			a.Nodes, a.Claimed, a.Resolved = addKeys(a.Nodes, o.Nodes...), addKeys(a.Claimed, o.Claimed...), addKeys(a.Resolved, o.Resolved...)
			if o.Report != nil && (a.Report == nil || o.Report.At.After(a.Report.At)) {
				a.Report = o.Report
			}
		}
	}
	return own
}

// mergeActivity adds the other clones' activity by branch to this
// clone's, keeps the latest branches first, at most limit, and returns
// how many branches there were.
func mergeActivity(own []snag.BranchActivity, team map[string]*coord.BranchActivity, limit int) ([]snag.BranchActivity, int) {
	by := map[string]*snag.BranchActivity{}
	for i := range own {
		by[own[i].Branch] = &own[i]
	}
	var added []snag.BranchActivity
	for b, t := range team {
		a := by[b]
		if a == nil {
			a = &snag.BranchActivity{Branch: b}
		}
		if t.Last.After(a.Last) {
			a.Last = t.Last
		}
		a.Nodes, a.Claimed, a.Resolved = addKeys(a.Nodes, t.Nodes...), addKeys(a.Claimed, t.Claimed...), addKeys(a.Resolved, t.Resolved...)
		if r := t.Report; r != nil && (a.Report == nil || r.Created.After(a.Report.At)) {
			a.Report = &snag.ActivityReport{Agent: r.From + " on " + r.Host, Message: r.Body, At: r.Created}
		}
		if by[b] == nil {
			added = append(added, *a)
		}
	}
	return snag.LatestBranches(append(own, added...), limit)
}
