package remote

import (
	"context"

	"github.com/snagdev/snag/client"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/snag"
)

// Context reads the agent's screen of the team, adopting name on the
// session's first call, and books the epochs of the leases it holds (a
// task handed to it, say) so it can release and resolve them.
func (d *Daemon) Context(ctx context.Context, name string) (ops.Context, error) {
	var got ops.Context
	err := d.call(ctx, "", func(k client.Caller) (err error) {
		got, err = k.Context(ctx, ops.ContextRequest{Name: name})
		return err
	})
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
	var got ops.FilesClaimed
	err := d.call(ctx, r.Task, func(k client.Caller) (err error) { got, err = k.ClaimFiles(ctx, r); return err })
	return got, err
}

// ReleaseFiles releases the session's claims of paths, or all of them.
func (d *Daemon) ReleaseFiles(ctx context.Context, paths []string) (ops.FilesReleased, error) {
	var got ops.FilesReleased
	err := d.call(ctx, "", func(k client.Caller) (err error) {
		got, err = k.ReleaseFiles(ctx, ops.FilesRequest{Paths: paths})
		return err
	})
	return got, err
}

// CheckFiles reports the live claims overlapping each path.
func (d *Daemon) CheckFiles(ctx context.Context, paths []string) (ops.FilesChecked, error) {
	var got ops.FilesChecked
	err := d.call(ctx, "", func(k client.Caller) (err error) {
		got, err = k.CheckFiles(ctx, ops.FilesRequest{Paths: paths})
		return err
	})
	return got, err
}

// Report records progress.
func (d *Daemon) Report(ctx context.Context, r ops.ReportRequest) (snag.Message, error) {
	var got snag.Message
	err := d.call(ctx, r.Task, func(k client.Caller) (err error) { got, err = k.Report(ctx, r); return err })
	return got, err
}

// Handoff leaves a note for an agent, with a task's lease when r.Task is
// set: the bridge no longer holds a task it handed off.
func (d *Daemon) Handoff(ctx context.Context, r ops.HandoffRequest) (ops.HandedOff, error) {
	var got ops.HandedOff
	err := d.call(ctx, r.Task, func(k client.Caller) (err error) { got, err = k.Handoff(ctx, r); return err })
	if err == nil && got.Moved {
		d.leases.Forget(r.Task, got.Key)
	}
	return got, err
}

// Plans lists the plans.
func (d *Daemon) Plans(ctx context.Context) (ops.PlanList, error) {
	var got ops.PlanList
	err := d.call(ctx, "", func(k client.Caller) (err error) { got, err = k.Plans(ctx); return err })
	return got, err
}

// Plan reads one plan.
func (d *Daemon) Plan(ctx context.Context, slug string) (ops.PlanDetail, error) {
	var got ops.PlanDetail
	err := d.call(ctx, slug, func(k client.Caller) (err error) { got, err = k.Plan(ctx, slug); return err })
	return got, err
}

// CreatePlan writes a new draft plan, unvetted.
func (d *Daemon) CreatePlan(ctx context.Context, r ops.PlanRequest) (ops.PlanDetail, error) {
	var got ops.PlanDetail
	err := d.call(ctx, "", func(k client.Caller) (err error) { got, err = k.CreatePlan(ctx, r); return err })
	return got, err
}

// UpdatePlan changes an unvetted plan.
func (d *Daemon) UpdatePlan(ctx context.Context, slug string, r ops.PlanRequest) (ops.PlanDetail, error) {
	var got ops.PlanDetail
	err := d.call(ctx, slug, func(k client.Caller) (err error) { got, err = k.UpdatePlan(ctx, slug, r); return err })
	return got, err
}

// Notes lists notes, newest first, as q picks them.
func (d *Daemon) Notes(ctx context.Context, q ops.NoteQuery) (ops.NoteList, error) {
	var got ops.NoteList
	err := d.call(ctx, "", func(k client.Caller) (err error) { got, err = k.Notes(ctx, q); return err })
	return got, err
}

// AddNote writes a note, unvetted.
func (d *Daemon) AddNote(ctx context.Context, r ops.NoteRequest) (ops.NoteDetail, error) {
	var got ops.NoteDetail
	err := d.call(ctx, r.Task, func(k client.Caller) (err error) { got, err = k.AddNote(ctx, r); return err })
	return got, err
}

// Note reads one note with its edges both ways.
func (d *Daemon) Note(ctx context.Context, ref string) (ops.NoteDetail, error) {
	var got ops.NoteDetail
	err := d.call(ctx, "", func(k client.Caller) (err error) { got, err = k.Note(ctx, ref); return err })
	return got, err
}

// Link adds an edge to a note of the bridge's worktree.
func (d *Daemon) Link(ctx context.Context, r ops.LinkRequest) (ops.NoteDetail, error) {
	var got ops.NoteDetail
	err := d.call(ctx, "", func(k client.Caller) (err error) { got, err = k.Link(ctx, r); return err })
	return got, err
}

// Activity reads what is live and the latest branches' activity.
func (d *Daemon) Activity(ctx context.Context, branches int) (ops.ActivityFeed, error) {
	var got ops.ActivityFeed
	err := d.call(ctx, "", func(k client.Caller) (err error) { got, err = k.Activity(ctx, branches); return err })
	return got, err
}
