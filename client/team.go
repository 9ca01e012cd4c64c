package client

import (
	"context"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/ops"
)

// Context reads the agent's screen of the team, adopting req.Name on the
// session's first call (POST /context).
func (k Caller) Context(ctx context.Context, req api.ContextRequest) (api.Context, error) {
	return call(ctx, k, ops.TeamContext, req)
}

// Files lists every live file claim (GET /files).
func (k Caller) Files(ctx context.Context) (api.FileClaims, error) {
	return call(ctx, k, ops.ListFiles, ops.None{})
}

// ClaimFiles claims paths for the session, all or nothing (POST
// /files/claim); a claim in the way is an answer with Granted false.
func (k Caller) ClaimFiles(ctx context.Context, req api.FilesRequest) (api.FilesClaimed, error) {
	return call(ctx, k, ops.ClaimFiles, req)
}

// ReleaseFiles releases the session's claims of req.Paths, or all of them
// (POST /files/release).
func (k Caller) ReleaseFiles(ctx context.Context, req api.FilesRequest) (api.FilesReleased, error) {
	return call(ctx, k, ops.ReleaseFiles, req)
}

// CheckFiles reports the live claims that overlap each path (POST
// /files/check).
func (k Caller) CheckFiles(ctx context.Context, req api.FilesRequest) (api.FilesChecked, error) {
	return call(ctx, k, ops.CheckFiles, req)
}

// ForceReleaseFile frees a claimed path for a person (POST
// /files/force-release).
func (k Caller) ForceReleaseFile(ctx context.Context, req api.ForceReleaseRequest) (api.FilesReleased, error) {
	return call(ctx, k, ops.ForceReleaseFiles, req)
}

// Guard checks a commit's staged paths against other agents' exclusive
// claims (POST /guard).
func (k Caller) Guard(ctx context.Context, req api.GuardRequest) (api.Guarded, error) {
	return call(ctx, k, ops.Guard, req)
}

// Report records the agent's progress (POST /reports).
func (k Caller) Report(ctx context.Context, req api.ReportRequest) (api.Message, error) {
	return call(ctx, k, ops.Report, req)
}

// Reports lists the latest reports (GET /reports).
func (k Caller) Reports(ctx context.Context, q api.MessageQuery) (api.Messages, error) {
	return call(ctx, k, ops.Reports, q)
}

// Handoffs lists the latest handoffs (GET /handoffs).
func (k Caller) Handoffs(ctx context.Context, q api.MessageQuery) (api.Messages, error) {
	return call(ctx, k, ops.Handoffs, q)
}

// Handoff leaves a note for an agent, moving req.Task's lease to it when
// set (POST /handoffs).
func (k Caller) Handoff(ctx context.Context, req api.HandoffRequest) (api.HandedOff, error) {
	return call(ctx, k, ops.Handoff, req)
}

// Plans lists the plans (GET /plans).
func (k Caller) Plans(ctx context.Context) (api.PlanList, error) {
	return call(ctx, k, ops.ListPlans, ops.None{})
}

// Plan reads one plan (GET /plans/{slug}).
func (k Caller) Plan(ctx context.Context, slug string) (api.PlanDetail, error) {
	return call(ctx, k, ops.GetPlan, api.PlanRef{Slug: slug})
}

// CreatePlan writes a new draft plan (POST /plans).
func (k Caller) CreatePlan(ctx context.Context, req api.PlanRequest) (api.PlanDetail, error) {
	return call(ctx, k, ops.CreatePlan, req)
}

// UpdatePlan changes a plan (POST /plans/{slug}).
func (k Caller) UpdatePlan(ctx context.Context, slug string, req api.PlanRequest) (api.PlanDetail, error) {
	req.Slug = slug
	return call(ctx, k, ops.UpdatePlan, req)
}

// Notes lists notes, newest first (GET /notes).
func (k Caller) Notes(ctx context.Context, q api.NoteQuery) (api.NoteList, error) {
	return call(ctx, k, ops.ListNotes, q)
}

// Note reads one note (GET /notes/{ref}).
func (k Caller) Note(ctx context.Context, ref string) (api.NoteDetail, error) {
	return call(ctx, k, ops.GetNote, api.NoteRef{Ref: ref})
}

// AddNote writes a note (POST /notes).
func (k Caller) AddNote(ctx context.Context, req api.NoteRequest) (api.NoteDetail, error) {
	return call(ctx, k, ops.AddNote, req)
}

// Link adds an edge between notes (POST /links).
func (k Caller) Link(ctx context.Context, req api.LinkRequest) (api.NoteDetail, error) {
	return call(ctx, k, ops.Link, req)
}

// Graph reads the decision graph, or the part q picks (GET /graph).
func (k Caller) Graph(ctx context.Context, q api.NoteQuery) (api.Graph, error) {
	return call(ctx, k, ops.GetGraph, q)
}

// Activity reads what is live and the activity of the latest branches
// (GET /branches).
func (k Caller) Activity(ctx context.Context, branches int) (api.ActivityFeed, error) {
	return call(ctx, k, ops.Branches, api.BranchQuery{Branches: branches})
}

// Worktrees lists the tasks' worktrees (GET /worktrees).
func (k Caller) Worktrees(ctx context.Context) (api.Worktrees, error) {
	return call(ctx, k, ops.ListWorktrees, ops.None{})
}

// PruneWorktrees removes the worktrees of finished tasks that are clean
// and merged (POST /worktrees/prune).
func (k Caller) PruneWorktrees(ctx context.Context, req api.MoveRequest) (api.Pruned, error) {
	return call(ctx, k, ops.PruneWorktrees, req)
}
