package brief

import (
	"context"
	"slices"
	"time"

	"github.com/snagdev/snag/internal/engine"
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
	Reports      []index.Message   // the others' latest, newest first
	Detached     []index.Lease     // leases no live session holds
	Plans        []engine.PlanView // the active plans, newest first (at most contextPlans)
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

// Context reads session me's screen of the team. The handoffs it shows
// are marked seen: the next context shows them no more.
func (s *Service) Context(ctx context.Context, me index.Session) (TeamContext, error) {
	tc := TeamContext{Me: me, Now: time.Now()}
	if err := s.contextAgents(ctx, &tc); err != nil {
		return tc, err
	}
	if err := s.contextReadyTasks(ctx, &tc); err != nil {
		return tc, err
	}
	if err := s.contextActivePlans(ctx, &tc); err != nil {
		return tc, err
	}
	var err error
	if tc.Decisions, err = s.e.Notes(ctx, engine.NoteFilter{Type: "decision", Limit: contextReports}); err != nil {
		return tc, err
	}
	if err := s.contextHandoffs(ctx, &tc); err != nil {
		return tc, err
	}
	if s.e.Coord().Across() {
		s.teamContext(ctx, &tc, me)
	}
	return tc, nil
}

// contextAgents fills in a context the agents: its own tasks and file
// claims, the other live agents with what each holds and last said, the
// others' latest reports, and the detached leases.
func (s *Service) contextAgents(ctx context.Context, tc *TeamContext) error {
	me := tc.Me
	sessions, err := s.db.LiveSessions(ctx)
	if err != nil {
		return err
	}
	leases, err := s.db.Leases(ctx)
	if err != nil {
		return err
	}
	claims, err := s.db.FileClaims(ctx, tc.Now)
	if err != nil {
		return err
	}
	tc.Files, err = s.db.FileClaimsOf(ctx, me.ID)
	if err != nil {
		return err
	}
	views := map[int64]*AgentView{}
	for _, o := range sessions {
		if o.ID != me.ID {
			views[o.ID] = &AgentView{Session: o}
		}
	}
	s.contextLeases(ctx, tc, views, leases)
	for _, c := range claims {
		if v := views[c.SessionID]; v != nil {
			v.Files = append(v.Files, c)
		}
	}
	if err := s.contextReports(ctx, tc, views); err != nil {
		return err
	}
	for _, o := range sessions {
		if v := views[o.ID]; v != nil {
			tc.Others = append(tc.Others, *v)
		}
	}
	return nil
}

// contextLeases gives a context's agent its tasks, and the other live
// agents (views) theirs. Only the live agents' tasks are read: a rebuilt
// index of a big project may hold thousands of detached leases, which are
// counted.
func (s *Service) contextLeases(ctx context.Context, tc *TeamContext, views map[int64]*AgentView, leases []index.Lease) {
	for _, l := range leases {
		switch {
		case l.SessionID == tc.Me.ID:
			tc.Tasks = append(tc.Tasks, s.heldTask(ctx, l))
		case views[l.SessionID] != nil:
			views[l.SessionID].Tasks = append(views[l.SessionID].Tasks, s.heldTask(ctx, l))
		case l.Detached || l.SessionID == 0:
			tc.Detached = append(tc.Detached, l)
		}
	}
}

// contextReports gives each other live agent (views) its latest report,
// and a context the others' latest reports.
func (s *Service) contextReports(ctx context.Context, tc *TeamContext, views map[int64]*AgentView) error {
	reports, err := s.db.Messages(ctx, index.MessageReport, "", false, 50)
	if err != nil {
		return err
	}
	for _, m := range reports {
		if v := views[m.FromSession]; v != nil && v.LastReport == nil {
			v.LastReport = &m
		}
		if m.From != tc.Me.Name && len(tc.Reports) < contextReports {
			tc.Reports = append(tc.Reports, m)
		}
	}
	return nil
}

// contextReadyTasks fills in a context the first ready tasks, in queue
// order, and whether more are ready.
func (s *Service) contextReadyTasks(ctx context.Context, tc *TeamContext) error {
	page, err := s.e.List(ctx, index.Filter{Statuses: []queue.Status{queue.StatusOpen}, Limit: 4 * contextReady})
	if err != nil {
		return err
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
	return nil
}

// contextActivePlans fills in a context the newest active plans.
func (s *Service) contextActivePlans(ctx context.Context, tc *TeamContext) error {
	plans, err := s.e.Plans(ctx)
	if err != nil {
		return err
	}
	for _, p := range plans {
		if p.Plan != nil && p.Plan.Status == queue.PlanActive && len(tc.Plans) < contextPlans {
			tc.Plans = append(tc.Plans, p)
		}
	}
	return nil
}

// contextHandoffs fills in a context the oldest handoffs to its agent it
// has not seen, and marks them seen; the rest are counted, and wait for
// the next read.
func (s *Service) contextHandoffs(ctx context.Context, tc *TeamContext) error {
	hs, err := s.db.Messages(ctx, index.MessageHandoff, tc.Me.Name, true, contextHandoffsRead)
	if err != nil {
		return err
	}
	slices.Reverse(hs) // oldest first: in the order they were left
	// Only what is shown is marked seen: the rest waits for the next read.
	shown := hs[:min(len(hs), contextHandoffs)]
	tc.Handoffs, tc.HandoffsMore = shown, len(hs)-len(shown)
	var ids []int64
	for _, m := range shown {
		ids = append(ids, m.ID)
	}
	return s.db.MarkSeen(ctx, ids)
}

// heldTask is the task of lease l as a context names it.
func (s *Service) heldTask(ctx context.Context, l index.Lease) HeldTask {
	h := HeldTask{ID: l.TaskID, Key: l.TaskID, Epoch: l.Epoch}
	if it, err := s.db.Get(ctx, queue.Ref{ID: l.TaskID}); err == nil {
		h.Key, h.Title, h.Status, h.Trust = it.Key, it.Title, it.Status, it.Trust
	}
	return h
}
