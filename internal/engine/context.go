package engine

import (
	"context"
	"slices"
	"time"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// HeldTask is a task a session holds, with its lease's epoch.
type HeldTask struct {
	Key    string
	ID     string
	Title  string
	Status queue.Status
	Epoch  int64
	Trust  queue.Trust
}

// AgentView is one live agent as the others see it: what it holds and
// what it last said.
type AgentView struct {
	Session index.Session
	Tasks   []HeldTask
	Files   []snag.FileClaim
	// LastReport is its latest report, or nil.
	LastReport *index.Message
}

// TeamContext is one agent's screen of the team (snag_context): who it
// is, its work, what is ready, the other agents and what each holds, the
// handoffs to it that it has not seen (marked seen by this read), and the
// latest reports of others.
type TeamContext struct {
	Me    index.Session
	Tasks []HeldTask
	Files []snag.FileClaim // its own, expired ones included
	Ready []*index.Row     // at most contextReady, unblocked, in queue order
	// ReadyMore: more tasks are ready than Ready lists.
	ReadyMore bool
	Others    []AgentView
	// Handoffs are the oldest of those to it it had not seen, at most
	// contextHandoffs, marked seen by this read; HandoffsMore counts the
	// others (at least), which the next context shows.
	Handoffs     []index.Message
	HandoffsMore int
	Reports      []index.Message // the others' latest, newest first
	Detached     []index.Lease   // leases no live session holds
	Plans        []PlanView      // the active plans, newest first (at most contextPlans)
	// Decisions are the latest decision notes.
	Decisions []index.NoteRow
	// Team, in team mode, are the decisions and inbox items other clones
	// added that this clone's files do not have yet (source: team).
	Team []TeamItem
	Now  time.Time
}

// How much a context holds.
const (
	contextReady    = 5
	contextReports  = 3
	contextPlans    = 2
	contextHandoffs = 3 // what snag_context's budget holds whole
)

// contextHandoffsRead bounds the unseen handoffs a context reads, to show
// the oldest and count the rest.
const contextHandoffsRead = 100

// Context reads session s's screen of the team. The handoffs it shows
// are marked seen: the next context shows them no more.
func (e *Engine) Context(ctx context.Context, s index.Session) (TeamContext, error) {
	tc := TeamContext{Me: s, Now: time.Now()}
	sessions, err := e.p.DB.LiveSessions(ctx)
	if err != nil {
		return tc, err
	}
	leases, err := e.p.DB.Leases(ctx)
	if err != nil {
		return tc, err
	}
	claims, err := e.p.DB.FileClaims(ctx, tc.Now)
	if err != nil {
		return tc, err
	}
	tc.Files, err = e.p.DB.FileClaimsOf(ctx, s.ID)
	if err != nil {
		return tc, err
	}
	views := map[int64]*AgentView{}
	for _, o := range sessions {
		if o.ID != s.ID {
			views[o.ID] = &AgentView{Session: o}
		}
	}
	for _, l := range leases {
		// Only the live agents' tasks are read: a rebuilt index of a big
		// project may hold thousands of detached leases, which are counted.
		switch {
		case l.SessionID == s.ID:
			tc.Tasks = append(tc.Tasks, e.heldTask(ctx, l))
		case views[l.SessionID] != nil:
			views[l.SessionID].Tasks = append(views[l.SessionID].Tasks, e.heldTask(ctx, l))
		case l.Detached || l.SessionID == 0:
			tc.Detached = append(tc.Detached, l)
		}
	}
	for _, c := range claims {
		if v := views[c.SessionID]; v != nil {
			v.Files = append(v.Files, c)
		}
	}
	reports, err := e.p.DB.Messages(ctx, index.MessageReport, "", false, 50)
	if err != nil {
		return tc, err
	}
	for _, m := range reports {
		if v := views[m.FromSession]; v != nil && v.LastReport == nil {
			v.LastReport = &m
		}
		if m.From != s.Name && len(tc.Reports) < contextReports {
			tc.Reports = append(tc.Reports, m)
		}
	}
	for _, o := range sessions {
		if v := views[o.ID]; v != nil {
			tc.Others = append(tc.Others, *v)
		}
	}
	page, err := e.List(ctx, index.Filter{Statuses: []queue.Status{queue.StatusOpen}, Limit: 4 * contextReady})
	if err != nil {
		return tc, err
	}
	for _, r := range page.Rows {
		// (A task another worktree holds reads as claimed there: not ready.)
		if len(r.BlockedBy) == 0 && r.State == snag.StateOK && r.Status == queue.StatusOpen {
			if len(tc.Ready) == contextReady {
				tc.ReadyMore = true
				break
			}
			tc.Ready = append(tc.Ready, r)
		}
	}
	plans, err := e.Plans(ctx)
	if err != nil {
		return tc, err
	}
	for _, p := range plans {
		if p.Plan != nil && p.Plan.Status == queue.PlanActive && len(tc.Plans) < contextPlans {
			tc.Plans = append(tc.Plans, p)
		}
	}
	if tc.Decisions, err = e.Notes(ctx, NoteFilter{Type: "decision", Limit: contextReports}); err != nil {
		return tc, err
	}
	hs, err := e.p.DB.Messages(ctx, index.MessageHandoff, s.Name, true, contextHandoffsRead)
	if err != nil {
		return tc, err
	}
	slices.Reverse(hs) // oldest first: in the order they were left
	// Only what is shown is marked seen: the rest waits for the next read.
	shown := hs[:min(len(hs), contextHandoffs)]
	tc.Handoffs, tc.HandoffsMore = shown, len(hs)-len(shown)
	var ids []int64
	for _, m := range shown {
		ids = append(ids, m.ID)
	}
	if err := e.p.DB.MarkSeen(ctx, ids); err != nil {
		return tc, err
	}
	if e.across() {
		e.teamContext(ctx, &tc, s)
	}
	return tc, nil
}

// heldTask is the task of lease l as a context names it.
func (e *Engine) heldTask(ctx context.Context, l index.Lease) HeldTask {
	h := HeldTask{ID: l.TaskID, Key: l.TaskID, Epoch: l.Epoch}
	if it, err := e.p.DB.Get(ctx, queue.Ref{ID: l.TaskID}); err == nil {
		h.Key, h.Title, h.Status, h.Trust = it.Key, it.Title, it.Status, it.Trust
	}
	return h
}
