package daemon

import (
	"context"
	"net/http"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
)

// The team tools of an MCP session over /mcp: each is the engine call the
// API route named makes, audited as that route.

// Context reads the session's screen of the team, adopting name on its
// first call, and books the epochs of the leases it holds.
func (b *engineBackend) Context(ctx context.Context, name string) (api.Context, error) {
	var out api.Context
	err := b.call(ctx, http.MethodPost, "/context", false, func(s index.Session) error {
		got, now, err := b.d.contextOf(ctx, s, name)
		if err != nil {
			return err
		}
		out = got
		b.mu.Lock()
		if b.session.ID == now.ID {
			b.session = now
		}
		b.mu.Unlock()
		for _, t := range got.Tasks {
			b.leases.Hold(t.ID, t.Key, t.Epoch)
		}
		return nil
	})
	return out, err
}

// ClaimFiles claims paths, all or nothing.
func (b *engineBackend) ClaimFiles(ctx context.Context, r api.FilesRequest) (api.FilesClaimed, error) {
	var out api.FilesClaimed
	err := b.call(ctx, http.MethodPost, "/files/claim", false, func(s index.Session) (err error) {
		got, err := b.e.ClaimFiles(ctx, s, engine.FilesRequest{Paths: r.Paths, Task: r.Task,
			TTL: time.Duration(r.TTLSec) * time.Second, Shared: r.Shared})
		out, err = filesClaimed(got, err)
		return err
	})
	return out, err
}

// ReleaseFiles releases the session's claims of paths, or all of them.
func (b *engineBackend) ReleaseFiles(ctx context.Context, paths []string) (api.FilesReleased, error) {
	var out api.FilesReleased
	err := b.call(ctx, http.MethodPost, "/files/release", false, func(s index.Session) error {
		got, err := b.e.ReleaseFiles(ctx, s, paths)
		out = api.FilesReleased{Released: orEmpty(got)}
		return err
	})
	return out, err
}

// CheckFiles reports the live claims overlapping each path.
func (b *engineBackend) CheckFiles(ctx context.Context, paths []string) (api.FilesChecked, error) {
	var out api.FilesChecked
	err := b.call(ctx, http.MethodPost, "/files/check", false, func(s index.Session) error {
		got, err := b.e.CheckFiles(ctx, &s, paths)
		out = api.FilesChecked{Checks: wireChecks(got)}
		return err
	})
	return out, err
}

// Report records progress.
func (b *engineBackend) Report(ctx context.Context, r api.ReportRequest) (api.Message, error) {
	var out api.Message
	err := b.call(ctx, http.MethodPost, "/reports", false, func(s index.Session) error {
		m, err := b.e.Report(ctx, s, r.Message, r.Task, r.Detail)
		out = m.Wire()
		return err
	})
	return out, err
}

// Handoff leaves a note for an agent, with a task's lease when r.Task is
// set.
func (b *engineBackend) Handoff(ctx context.Context, r api.HandoffRequest) (api.HandedOff, error) {
	var out api.HandedOff
	err := b.call(ctx, http.MethodPost, "/handoffs", false, func(s index.Session) error {
		got, err := b.e.Handoff(ctx, &s, "", r)
		if err != nil {
			return err
		}
		out = api.HandedOff{Message: got.Message.Wire(), Moved: got.Moved, Key: got.Key, Epoch: got.Epoch, Live: got.Live, Host: got.Host}
		if got.Moved {
			b.leases.Forget(r.Task, got.Key)
		}
		return nil
	})
	return out, err
}

// Plans lists the plans.
func (b *engineBackend) Plans(ctx context.Context) (api.PlanList, error) {
	var out api.PlanList
	err := b.call(ctx, http.MethodGet, "/plans", false, func(index.Session) error {
		vs, err := b.e.Plans(ctx)
		out.Plans = make([]api.Plan, len(vs))
		for i, v := range vs {
			out.Plans[i] = planWire(v)
		}
		return err
	})
	return out, err
}

// Plan reads one plan.
func (b *engineBackend) Plan(ctx context.Context, slug string) (api.PlanDetail, error) {
	var out api.PlanDetail
	err := b.call(ctx, http.MethodGet, "/plans/"+slug, false, func(index.Session) error {
		v, err := b.e.Plan(ctx, slug)
		out = planDetail(v)
		return err
	})
	return out, err
}

// CreatePlan writes a new draft plan, unvetted.
func (b *engineBackend) CreatePlan(ctx context.Context, r api.PlanRequest) (api.PlanDetail, error) {
	var out api.PlanDetail
	err := b.call(ctx, http.MethodPost, "/plans", false, func(s index.Session) error {
		v, err := b.e.CreatePlanView(ctx, queue.Agent, s.Name, deref(r.Title), deref(r.Body))
		out = planDetail(v)
		return err
	})
	return out, err
}

// UpdatePlan changes an unvetted plan.
func (b *engineBackend) UpdatePlan(ctx context.Context, slug string, r api.PlanRequest) (api.PlanDetail, error) {
	var out api.PlanDetail
	err := b.call(ctx, http.MethodPost, "/plans/"+slug, false, func(s index.Session) error {
		v, err := b.e.UpdatePlanView(ctx, queue.Agent, s.Name, slug,
			engine.PlanEdit{Title: r.Title, Body: r.Body, Status: queue.PlanStatus(r.Status)})
		out = planDetail(v)
		return err
	})
	return out, err
}

// Notes lists notes, newest first, as q picks them.
func (b *engineBackend) Notes(ctx context.Context, q api.NoteQuery) (api.NoteList, error) {
	var out api.NoteList
	err := b.call(ctx, http.MethodGet, "/notes", false, func(index.Session) error {
		ns, err := b.e.Notes(ctx, engine.NoteFilter{Query: q.Query, Type: q.Type, Branch: q.Branch, Task: q.Task, Limit: q.Limit})
		out.Notes = notesWire(ns)
		return err
	})
	return out, err
}

// AddNote writes a note, unvetted.
func (b *engineBackend) AddNote(ctx context.Context, r api.NoteRequest) (api.NoteDetail, error) {
	var out api.NoteDetail
	err := b.call(ctx, http.MethodPost, "/notes", false, func(s index.Session) error {
		n, err := b.e.AddNote(ctx, queue.Agent, s.Name, noteInput(&s, r))
		out = api.NoteDetail{Note: noteWire(n), Body: n.Body}
		return err
	})
	return out, err
}

// Note reads one note with its edges both ways.
func (b *engineBackend) Note(ctx context.Context, ref string) (api.NoteDetail, error) {
	var out api.NoteDetail
	err := b.call(ctx, http.MethodGet, "/notes/{ref}", false, func(index.Session) error {
		n, err := b.e.Note(ctx, ref)
		out = nodeWire(n)
		return err
	})
	return out, err
}

// Link adds an edge to a note in snagd's worktree.
func (b *engineBackend) Link(ctx context.Context, r api.LinkRequest) (api.NoteDetail, error) {
	var out api.NoteDetail
	err := b.call(ctx, http.MethodPost, "/links", false, func(s index.Session) error {
		n, err := b.e.Link(ctx, queue.Agent, s.Name, linkInput(&s, r))
		if err != nil {
			return err
		}
		node, err := b.e.Note(ctx, n.Key)
		out = nodeWire(node)
		return err
	})
	return out, err
}

// Activity reads what is live and the latest branches' activity.
func (b *engineBackend) Activity(ctx context.Context, branches int) (api.ActivityFeed, error) {
	var out api.ActivityFeed
	err := b.call(ctx, http.MethodGet, "/branches", false, func(index.Session) error {
		a, err := b.e.Activity(ctx, branches)
		out = activityWire(a)
		return err
	})
	return out, err
}
