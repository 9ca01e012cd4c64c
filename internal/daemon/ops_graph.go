package daemon

import (
	"context"
	"net/http"
	"strconv"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/engine/graph"
	"github.com/snagdev/snag/internal/graphdraw"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// graphOps are the operations of plans, of the decision graph (notes,
// links, the graph, the activity by branch) and of the tasks' worktrees.
func (d *Daemon) graphOps(hs ops.Handlers) {
	ops.Handle(hs, ops.ListPlans, d.listPlans)
	ops.Handle(hs, ops.GetPlan, d.getPlan)
	ops.Handle(hs, ops.CreatePlan, d.createPlan)
	ops.Handle(hs, ops.UpdatePlan, d.updatePlan)
	ops.Handle(hs, ops.ListNotes, d.listNotes)
	ops.Handle(hs, ops.GetNote, d.getNote)
	ops.Handle(hs, ops.AddNote, d.addNote)
	ops.Handle(hs, ops.Link, d.addLink)
	ops.Handle(hs, ops.GetGraph, d.getGraph)
	ops.Handle(hs, ops.Branches, d.getActivity)
	ops.Handle(hs, ops.ListWorktrees, d.listWorktrees)
	ops.Handle(hs, ops.PruneWorktrees, d.pruneWorktrees)
}

func (d *Daemon) listPlans(ctx context.Context, _ ops.None) (ops.PlanList, error) {
	vs, err := d.w.Graph.Plans(ctx)
	if err != nil {
		return ops.PlanList{}, err
	}
	out := ops.PlanList{Plans: make([]snag.Plan, len(vs))}
	for i, v := range vs {
		out.Plans[i] = planWire(v)
	}
	return out, nil
}

func (d *Daemon) getPlan(ctx context.Context, req ops.PlanRef) (ops.PlanDetail, error) {
	v, err := d.w.Graph.Plan(ctx, req.Slug)
	if err != nil {
		return ops.PlanDetail{}, err
	}
	return planDetail(v), nil
}

func (d *Daemon) createPlan(ctx context.Context, req ops.PlanRequest) (ops.PlanDetail, error) {
	actor, who := actorOf(sessionIn(ctx), req.By)
	v, err := d.w.Graph.CreatePlanView(ctx, actor, who, deref(req.Title), deref(req.Body))
	if err != nil {
		return ops.PlanDetail{}, err
	}
	return planDetail(v), nil
}

func (d *Daemon) updatePlan(ctx context.Context, req ops.PlanRequest) (ops.PlanDetail, error) {
	actor, who := actorOf(sessionIn(ctx), req.By)
	v, err := d.w.Graph.UpdatePlanView(ctx, actor, who, req.Slug,
		graph.PlanEdit{Title: req.Title, Body: req.Body, Status: queue.PlanStatus(req.Status)})
	if err != nil {
		return ops.PlanDetail{}, err
	}
	return planDetail(v), nil
}

// The most notes one GET /notes or GET /graph answers, and how many GET
// /notes answers when its query names no limit. A larger limit is read as
// the most, not refused.
const (
	maxNotes     = 200
	defaultNotes = 20
)

// noteFilter is the engine's reading of the query of GET /notes and GET
// /graph.
func noteFilter(q ops.NoteQuery) engine.NoteFilter {
	return engine.NoteFilter{Query: q.Query, Type: q.Type, Branch: q.Branch, Task: q.Task, Limit: min(q.Limit, maxNotes)}
}

func (d *Daemon) listNotes(ctx context.Context, q ops.NoteQuery) (ops.NoteList, error) {
	if q.Limit == 0 {
		q.Limit = defaultNotes
	}
	ns, err := d.w.Graph.Notes(ctx, noteFilter(q))
	if err != nil {
		return ops.NoteList{}, err
	}
	return ops.NoteList{Notes: notesWire(ns)}, nil
}

func (d *Daemon) getNote(ctx context.Context, req ops.NoteRef) (ops.NoteDetail, error) {
	n, err := d.w.Graph.Note(ctx, req.Ref)
	if err != nil {
		return ops.NoteDetail{}, err
	}
	return nodeWire(n), nil
}

func (d *Daemon) addNote(ctx context.Context, req ops.NoteRequest) (ops.NoteDetail, error) {
	s := sessionIn(ctx)
	actor, who := actorOf(s, req.By)
	n, err := d.w.Graph.AddNote(ctx, actor, who, noteInput(s, req))
	if err != nil {
		return ops.NoteDetail{}, err
	}
	return ops.NoteDetail{Note: noteWire(n), Body: n.Body}, nil
}

func (d *Daemon) addLink(ctx context.Context, req ops.LinkRequest) (ops.NoteDetail, error) {
	s := sessionIn(ctx)
	actor, who := actorOf(s, req.By)
	n, err := d.w.Graph.Link(ctx, actor, who, linkInput(s, req))
	if err != nil {
		return ops.NoteDetail{}, err
	}
	node, err := d.w.Graph.Note(ctx, n.Key)
	if err != nil {
		return ops.NoteDetail{}, err
	}
	return nodeWire(node), nil
}

// getGraph answers the graph of the notes q picks (Limit 0: all of them,
// up to maxNotes). Its Format is HTTP's to draw (renderGraph); here it is
// only checked, so that every surface refuses a format there is none of.
func (d *Daemon) getGraph(ctx context.Context, q ops.NoteQuery) (ops.Graph, error) {
	if _, ok := graphdraw.Formats[q.Format]; !ok && q.Format != "" {
		return ops.Graph{}, &apiError{Status: http.StatusBadRequest, Code: "bad_format",
			Message: "format=" + strconv.Quote(q.Format) + ": want dot, mermaid or svg (or leave it out for JSON)"}
	}
	ns, ls, err := d.w.Graph.Graph(ctx, noteFilter(q))
	if err != nil {
		return ops.Graph{}, err
	}
	return graphWire(ns, ls), nil
}

// graphFormats are the drawings GET /graph?format= answers instead of
// JSON, with their content types.
// renderGraph writes the graph GET /graph answered as the drawing its
// query asks for (format=dot, mermaid or svg), titled as snag graph titles
// it; it leaves a query with no format to JSON.
func renderGraph(w http.ResponseWriter, status int, req, ans any) bool {
	q, _ := req.(ops.NoteQuery)
	g, ok := ans.(ops.Graph)
	f, drawn := graphdraw.Formats[q.Format]
	if !ok || !drawn {
		return false
	}
	w.Header().Set("Content-Type", f.ContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// The picture needs nothing but its own inline styles: a browser that
	// opens it runs nothing it might carry.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.WriteHeader(status)
	w.Write(f.Draw(graphdraw.Of(graphdraw.Title(q.Type, q.Branch, q.Task), g.Nodes, g.Links)))
	return true
}

func (d *Daemon) getActivity(ctx context.Context, q ops.BranchQuery) (ops.ActivityFeed, error) {
	n := q.Branches // from 1 to brief.MaxActivityBranches (ops.BranchQuery's max)
	if n == 0 {
		n = 20
	}
	a, err := d.w.Brief.Activity(ctx, n)
	if err != nil {
		return ops.ActivityFeed{}, err
	}
	return activityWire(a), nil
}

func (d *Daemon) listWorktrees(ctx context.Context, _ ops.None) (ops.Worktrees, error) {
	vs, err := d.w.Worktrees.List(ctx)
	if err != nil {
		return ops.Worktrees{}, err
	}
	return ops.Worktrees{Worktrees: worktreesWire(vs)}, nil
}

// pruneWorktrees is a person's (the service refuses an agent's).
func (d *Daemon) pruneWorktrees(ctx context.Context, req ops.MoveRequest) (ops.Pruned, error) {
	by := req.By
	if by == "" {
		by = "person"
	}
	removed, kept, why, err := d.w.Worktrees.Prune(ctx, by)
	if err != nil {
		return ops.Pruned{}, err
	}
	if why == nil {
		why = []string{}
	}
	return ops.Pruned{Removed: worktreesWire(removed), Kept: worktreesWire(kept), Why: why}, nil
}
