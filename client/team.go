package client

import (
	"context"
	"net/url"
	"strconv"

	"github.com/snagdev/snag/api"
)

// Context reads the agent's screen of the team, adopting req.Name on the
// session's first call (POST /context).
func (k Caller) Context(ctx context.Context, req api.ContextRequest) (api.Context, error) {
	var out api.Context
	err := k.do(ctx, "POST", "/context", req, &out)
	return out, err
}

// Files lists every live file claim (GET /files).
func (k Caller) Files(ctx context.Context) (api.FileClaims, error) {
	var out api.FileClaims
	err := k.do(ctx, "GET", "/files", nil, &out)
	return out, err
}

// ClaimFiles claims paths for the session, all or nothing (POST
// /files/claim); a claim in the way is an answer with Granted false.
func (k Caller) ClaimFiles(ctx context.Context, req api.FilesRequest) (api.FilesClaimed, error) {
	var out api.FilesClaimed
	err := k.do(ctx, "POST", "/files/claim", req, &out)
	return out, err
}

// ReleaseFiles releases the session's claims of req.Paths, or all of them
// (POST /files/release).
func (k Caller) ReleaseFiles(ctx context.Context, req api.FilesRequest) (api.FilesReleased, error) {
	var out api.FilesReleased
	err := k.do(ctx, "POST", "/files/release", req, &out)
	return out, err
}

// CheckFiles reports the live claims that overlap each path (POST
// /files/check).
func (k Caller) CheckFiles(ctx context.Context, req api.FilesRequest) (api.FilesChecked, error) {
	var out api.FilesChecked
	err := k.do(ctx, "POST", "/files/check", req, &out)
	return out, err
}

// ForceReleaseFile frees a claimed path for a person (POST
// /files/force-release).
func (k Caller) ForceReleaseFile(ctx context.Context, req api.ForceReleaseRequest) (api.FilesReleased, error) {
	var out api.FilesReleased
	err := k.do(ctx, "POST", "/files/force-release", req, &out)
	return out, err
}

// Guard checks a commit's staged paths against other agents' exclusive
// claims (POST /guard).
func (k Caller) Guard(ctx context.Context, req api.GuardRequest) (api.Guarded, error) {
	var out api.Guarded
	err := k.do(ctx, "POST", "/guard", req, &out)
	return out, err
}

// Report records the agent's progress (POST /reports).
func (k Caller) Report(ctx context.Context, req api.ReportRequest) (api.Message, error) {
	var out api.Message
	err := k.do(ctx, "POST", "/reports", req, &out)
	return out, err
}

// Reports lists the latest reports (GET /reports).
func (k Caller) Reports(ctx context.Context, q api.MessageQuery) (api.Messages, error) {
	return k.messages(ctx, "/reports", q)
}

// Handoffs lists the latest handoffs (GET /handoffs).
func (k Caller) Handoffs(ctx context.Context, q api.MessageQuery) (api.Messages, error) {
	return k.messages(ctx, "/handoffs", q)
}

func (k Caller) messages(ctx context.Context, path string, q api.MessageQuery) (api.Messages, error) {
	var out api.Messages
	if s := q.Encode(); s != "" {
		path += "?" + s
	}
	err := k.do(ctx, "GET", path, nil, &out)
	return out, err
}

// Handoff leaves a note for an agent, moving req.Task's lease to it when
// set (POST /handoffs).
func (k Caller) Handoff(ctx context.Context, req api.HandoffRequest) (api.HandedOff, error) {
	var out api.HandedOff
	err := k.do(ctx, "POST", "/handoffs", req, &out)
	return out, err
}

// Plans lists the plans (GET /plans).
func (k Caller) Plans(ctx context.Context) (api.PlanList, error) {
	var out api.PlanList
	err := k.do(ctx, "GET", "/plans", nil, &out)
	return out, err
}

// Plan reads one plan (GET /plans/{slug}).
func (k Caller) Plan(ctx context.Context, slug string) (api.PlanDetail, error) {
	var out api.PlanDetail
	err := k.do(ctx, "GET", "/plans/"+url.PathEscape(slug), nil, &out)
	return out, err
}

// CreatePlan writes a new draft plan (POST /plans).
func (k Caller) CreatePlan(ctx context.Context, req api.PlanRequest) (api.PlanDetail, error) {
	var out api.PlanDetail
	err := k.do(ctx, "POST", "/plans", req, &out)
	return out, err
}

// UpdatePlan changes a plan (POST /plans/{slug}).
func (k Caller) UpdatePlan(ctx context.Context, slug string, req api.PlanRequest) (api.PlanDetail, error) {
	var out api.PlanDetail
	err := k.do(ctx, "POST", "/plans/"+url.PathEscape(slug), req, &out)
	return out, err
}

// Notes lists notes, newest first (GET /notes).
func (k Caller) Notes(ctx context.Context, q api.NoteQuery) (api.NoteList, error) {
	var out api.NoteList
	path := "/notes"
	if s := q.Encode(); s != "" {
		path += "?" + s
	}
	err := k.do(ctx, "GET", path, nil, &out)
	return out, err
}

// Note reads one note (GET /notes/{ref}).
func (k Caller) Note(ctx context.Context, ref string) (api.NoteDetail, error) {
	var out api.NoteDetail
	err := k.do(ctx, "GET", "/notes/"+url.PathEscape(ref), nil, &out)
	return out, err
}

// AddNote writes a note (POST /notes).
func (k Caller) AddNote(ctx context.Context, req api.NoteRequest) (api.NoteDetail, error) {
	var out api.NoteDetail
	err := k.do(ctx, "POST", "/notes", req, &out)
	return out, err
}

// Link adds an edge between notes (POST /links).
func (k Caller) Link(ctx context.Context, req api.LinkRequest) (api.NoteDetail, error) {
	var out api.NoteDetail
	err := k.do(ctx, "POST", "/links", req, &out)
	return out, err
}

// Graph reads the decision graph, or the part q picks (GET /graph).
func (k Caller) Graph(ctx context.Context, q api.NoteQuery) (api.Graph, error) {
	var out api.Graph
	path := "/graph"
	if s := q.Encode(); s != "" {
		path += "?" + s
	}
	err := k.do(ctx, "GET", path, nil, &out)
	return out, err
}

// Activity reads what is live and the activity of the latest branches
// (GET /branches).
func (k Caller) Activity(ctx context.Context, branches int) (api.ActivityFeed, error) {
	var out api.ActivityFeed
	path := "/branches"
	if branches > 0 {
		path += "?branches=" + strconv.Itoa(branches)
	}
	err := k.do(ctx, "GET", path, nil, &out)
	return out, err
}

// Worktrees lists the tasks' worktrees (GET /worktrees).
func (k Caller) Worktrees(ctx context.Context) (api.Worktrees, error) {
	var out api.Worktrees
	err := k.do(ctx, "GET", "/worktrees", nil, &out)
	return out, err
}

// PruneWorktrees removes the worktrees of finished tasks that are clean
// and merged (POST /worktrees/prune).
func (k Caller) PruneWorktrees(ctx context.Context, req api.MoveRequest) (api.Pruned, error) {
	var out api.Pruned
	err := k.do(ctx, "POST", "/worktrees/prune", req, &out)
	return out, err
}
