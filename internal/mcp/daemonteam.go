package mcp

import (
	"context"

	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/snag"
)

// The team and graph toolsets' calls of the live backend, each one
// operation.

// Context reads the agent's screen of the team, adopting name on the
// session's first call, and books the epochs of the leases it holds (a
// task handed to it, say) so it can release and resolve them.
func (d *Daemon) Context(ctx context.Context, name string) (ops.Context, error) {
	got, err := call(ctx, d, ops.TeamContext, "", ops.ContextRequest{Name: name})
	if err != nil {
		return got, err
	}
	for _, t := range got.Tasks {
		d.leases.Hold(t.ID, t.Key, t.Epoch)
	}
	return got, nil
}

// ClaimFiles claims paths, all or nothing.
func (d *Daemon) ClaimFiles(ctx context.Context, r ops.FilesRequest) (ops.FilesClaimed, error) {
	return call(ctx, d, ops.ClaimFiles, r.Task, r)
}

// ReleaseFiles releases the session's claims of paths, or all of them.
func (d *Daemon) ReleaseFiles(ctx context.Context, paths []string) (ops.FilesReleased, error) {
	return call(ctx, d, ops.ReleaseFiles, "", ops.FilesRequest{Paths: paths})
}

// CheckFiles reports the live claims overlapping each path.
func (d *Daemon) CheckFiles(ctx context.Context, paths []string) (ops.FilesChecked, error) {
	return call(ctx, d, ops.CheckFiles, "", ops.FilesRequest{Paths: paths})
}

// Report records progress.
func (d *Daemon) Report(ctx context.Context, r ops.ReportRequest) (snag.Message, error) {
	return call(ctx, d, ops.Report, r.Task, r)
}

// Handoff leaves a note for an agent, with a task's lease when r.Task is
// set: the session no longer holds a task it handed off.
func (d *Daemon) Handoff(ctx context.Context, r ops.HandoffRequest) (ops.HandedOff, error) {
	got, err := call(ctx, d, ops.Handoff, r.Task, r)
	if err == nil && got.Moved {
		d.leases.Forget(r.Task, got.Key)
	}
	return got, err
}

// Plans lists the plans.
func (d *Daemon) Plans(ctx context.Context) (ops.PlanList, error) {
	return call(ctx, d, ops.ListPlans, "", ops.None{})
}

// Plan reads one plan.
func (d *Daemon) Plan(ctx context.Context, slug string) (ops.PlanDetail, error) {
	return call(ctx, d, ops.GetPlan, slug, ops.PlanRef{Slug: slug})
}

// CreatePlan writes a new draft plan, unvetted.
func (d *Daemon) CreatePlan(ctx context.Context, r ops.PlanRequest) (ops.PlanDetail, error) {
	return call(ctx, d, ops.CreatePlan, "", r)
}

// UpdatePlan changes an unvetted plan.
func (d *Daemon) UpdatePlan(ctx context.Context, slug string, r ops.PlanRequest) (ops.PlanDetail, error) {
	r.Slug = slug
	return call(ctx, d, ops.UpdatePlan, slug, r)
}

// Notes lists notes, newest first, as q picks them.
func (d *Daemon) Notes(ctx context.Context, q ops.NoteQuery) (ops.NoteList, error) {
	return call(ctx, d, ops.ListNotes, "", q)
}

// AddNote writes a note, unvetted.
func (d *Daemon) AddNote(ctx context.Context, r ops.NoteRequest) (ops.NoteDetail, error) {
	return call(ctx, d, ops.AddNote, r.Task, r)
}

// Note reads one note with its edges both ways.
func (d *Daemon) Note(ctx context.Context, ref string) (ops.NoteDetail, error) {
	return call(ctx, d, ops.GetNote, "", ops.NoteRef{Ref: ref})
}

// Link adds an edge to a note of the session's worktree.
func (d *Daemon) Link(ctx context.Context, r ops.LinkRequest) (ops.NoteDetail, error) {
	return call(ctx, d, ops.Link, "", r)
}

// Activity reads what is live and the latest branches' activity.
func (d *Daemon) Activity(ctx context.Context, branches int) (ops.ActivityFeed, error) {
	return call(ctx, d, ops.Branches, "", ops.BranchQuery{Branches: branches})
}
