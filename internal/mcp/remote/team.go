package remote

import (
	"context"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/client"
)

// Context reads the agent's screen of the team, adopting name on the
// session's first call, and books the epochs of the leases it holds (a
// task handed to it, say) so it can release and resolve them.
func (d *Daemon) Context(ctx context.Context, name string) (api.Context, error) {
	var got api.Context
	err := d.call(ctx, "", func(k client.Caller) (err error) {
		got, err = k.Context(ctx, api.ContextRequest{Name: name})
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
func (d *Daemon) ClaimFiles(ctx context.Context, r api.FilesRequest) (api.FilesClaimed, error) {
	var got api.FilesClaimed
	err := d.call(ctx, r.Task, func(k client.Caller) (err error) { got, err = k.ClaimFiles(ctx, r); return err })
	return got, err
}

// ReleaseFiles releases the session's claims of paths, or all of them.
func (d *Daemon) ReleaseFiles(ctx context.Context, paths []string) (api.FilesReleased, error) {
	var got api.FilesReleased
	err := d.call(ctx, "", func(k client.Caller) (err error) {
		got, err = k.ReleaseFiles(ctx, api.FilesRequest{Paths: paths})
		return err
	})
	return got, err
}

// CheckFiles reports the live claims overlapping each path.
func (d *Daemon) CheckFiles(ctx context.Context, paths []string) (api.FilesChecked, error) {
	var got api.FilesChecked
	err := d.call(ctx, "", func(k client.Caller) (err error) {
		got, err = k.CheckFiles(ctx, api.FilesRequest{Paths: paths})
		return err
	})
	return got, err
}

// Report records progress.
func (d *Daemon) Report(ctx context.Context, r api.ReportRequest) (api.Message, error) {
	var got api.Message
	err := d.call(ctx, r.Task, func(k client.Caller) (err error) { got, err = k.Report(ctx, r); return err })
	return got, err
}

// Handoff leaves a note for an agent, with a task's lease when r.Task is
// set: the bridge no longer holds a task it handed off.
func (d *Daemon) Handoff(ctx context.Context, r api.HandoffRequest) (api.HandedOff, error) {
	var got api.HandedOff
	err := d.call(ctx, r.Task, func(k client.Caller) (err error) { got, err = k.Handoff(ctx, r); return err })
	if err == nil && got.Moved {
		d.leases.Forget(r.Task, got.Key)
	}
	return got, err
}

// Plans lists the plans.
func (d *Daemon) Plans(ctx context.Context) (api.PlanList, error) {
	var got api.PlanList
	err := d.call(ctx, "", func(k client.Caller) (err error) { got, err = k.Plans(ctx); return err })
	return got, err
}

// Plan reads one plan.
func (d *Daemon) Plan(ctx context.Context, slug string) (api.PlanDetail, error) {
	var got api.PlanDetail
	err := d.call(ctx, slug, func(k client.Caller) (err error) { got, err = k.Plan(ctx, slug); return err })
	return got, err
}

// CreatePlan writes a new draft plan, unvetted.
func (d *Daemon) CreatePlan(ctx context.Context, r api.PlanRequest) (api.PlanDetail, error) {
	var got api.PlanDetail
	err := d.call(ctx, "", func(k client.Caller) (err error) { got, err = k.CreatePlan(ctx, r); return err })
	return got, err
}

// UpdatePlan changes an unvetted plan.
func (d *Daemon) UpdatePlan(ctx context.Context, slug string, r api.PlanRequest) (api.PlanDetail, error) {
	var got api.PlanDetail
	err := d.call(ctx, slug, func(k client.Caller) (err error) { got, err = k.UpdatePlan(ctx, slug, r); return err })
	return got, err
}

// Notes lists notes, newest first, as q picks them.
func (d *Daemon) Notes(ctx context.Context, q api.NoteQuery) (api.NoteList, error) {
	var got api.NoteList
	err := d.call(ctx, "", func(k client.Caller) (err error) { got, err = k.Notes(ctx, q); return err })
	return got, err
}

// AddNote writes a note, unvetted.
func (d *Daemon) AddNote(ctx context.Context, r api.NoteRequest) (api.NoteDetail, error) {
	var got api.NoteDetail
	err := d.call(ctx, r.Task, func(k client.Caller) (err error) { got, err = k.AddNote(ctx, r); return err })
	return got, err
}

// Note reads one note with its edges both ways.
func (d *Daemon) Note(ctx context.Context, ref string) (api.NoteDetail, error) {
	var got api.NoteDetail
	err := d.call(ctx, "", func(k client.Caller) (err error) { got, err = k.Note(ctx, ref); return err })
	return got, err
}

// Link adds an edge to a note of the bridge's worktree.
func (d *Daemon) Link(ctx context.Context, r api.LinkRequest) (api.NoteDetail, error) {
	var got api.NoteDetail
	err := d.call(ctx, "", func(k client.Caller) (err error) { got, err = k.Link(ctx, r); return err })
	return got, err
}

// Activity reads what is live and the latest branches' activity.
func (d *Daemon) Activity(ctx context.Context, branches int) (api.ActivityFeed, error) {
	var got api.ActivityFeed
	err := d.call(ctx, "", func(k client.Caller) (err error) { got, err = k.Activity(ctx, branches); return err })
	return got, err
}
