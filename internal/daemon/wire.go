package daemon

import (
	"context"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// This file turns what the handlers hold (index rows, sessions, runs) into
// the API's answers (package api): a handler writes one of these, never an
// index type or a map.

// Health is what GET /health answers, without auth.
type Health = api.Health

// The request bodies, as the API declares them.
type (
	addRequest      = api.AddRequest
	moveRequest     = api.MoveRequest
	editRequest     = api.EditRequest
	claimRequest    = api.ClaimRequest
	leaseRequest    = api.LeaseRequest
	verifyRequest   = api.VerifyRequest
	registerRequest = api.Registration
	endRequest      = api.EndRequest
)

func taskList(page index.Page) api.TaskList {
	return api.TaskList{Tasks: index.WireRows(page.Rows), Next: page.Next}
}

// taskDetail is GET /tasks/{ref}, with its depends_on by key; st is the
// task's verify state, given when a check runs or has run.
func taskDetail(ctx context.Context, e *engine.Engine, it *index.Item, st *snag.VerifyState) api.TaskDetail {
	out := it.Wire(project.Rel(it.Path))
	if st != nil {
		out.Verify = st
	}
	if it.Task != nil {
		out.DependsOn = e.DepKeys(ctx, it.Task.DependsOn)
	}
	return out
}

func claimed(row *index.Row, epoch int64) api.Claim {
	t := row.Wire()
	return api.Claim{Task: &t, Epoch: epoch}
}

func added(t *queue.Task, path string) api.Added {
	return api.Added{ID: t.ID, Key: t.Key, Path: path, Status: t.Status, Trust: t.Trust}
}

func moved(t *queue.Task) api.Moved { return api.Moved{ID: t.ID, Key: t.Key, Status: t.Status} }

func released(key string, status queue.Status) api.Released {
	return api.Released{Key: key, Status: status}
}

func searchResult(hits []index.Hit) api.SearchResult {
	return api.SearchResult{Hits: index.WireHits(hits)}
}

func sessionsAnswer(views []sessionView, leases []index.Lease) api.Sessions {
	out := api.Sessions{Leases: index.WireLeases(leases), Sessions: make([]api.LiveSession, len(views))}
	for i, v := range views {
		out.Sessions[i] = api.LiveSession{Session: v.Session.Wire(), Activity: v.Activity}
	}
	return out
}

func auditLog(es []snag.AuditEntry) api.AuditLog { return api.AuditLog{Entries: orEmpty(es)} }

// dryRun is a verify dry run's answer; on a 503 (no browser) it carries
// the code as its error too, as every error answer does.
func dryRun(p ops.VerifyPlan) api.VerifyPlan {
	if p.Code == ops.VerifyUnavailable {
		p.Error = p.Code
	}
	return p
}

// resolved is the answer of a resolve or a person's verify (api.Resolved
// says which fields each case has).
func resolved(res engine.Resolution) api.Resolved {
	out := api.Resolved{Key: res.Key, Status: res.Status, Message: res.Message}
	switch {
	case res.Code == ops.VerifyUnavailable:
		out.Error, out.Code = res.Code, res.Code
	case res.Code == ops.VerifyDisabled:
		out.Code, out.Verified = res.Code, new(bool)
	case res.Code == snag.OutcomeNeedsApproval:
		out.Code, out.Outcome, out.Reason, out.Command, out.From = res.Code, res.Code, res.Reason, res.Command, res.From
	case res.Started:
		out.Code, out.ETASeconds = res.Code, res.ETA
	}
	if res.Verify != nil {
		out.Verify = res.Verify
	}
	return out
}

// edited is the answer of a person's edit: the task's row as the index
// now has it.
func edited(ctx context.Context, e *engine.Engine, ed engine.Edited) api.Edited {
	out := api.Edited{Changed: ed.Changed, Warnings: ed.Warnings}
	if out.Changed == nil {
		out.Changed = []string{}
	}
	if it, err := e.Get(ctx, queue.Ref{ID: ed.Task.ID}); err == nil {
		out.Task = it.Row.Wire()
	} else {
		out.Task = api.Task{ID: ed.Task.ID, Key: ed.Task.Key, Title: ed.Task.Title, Status: ed.Task.Status}
	}
	return out
}

// orEmpty is s, or [] for nil: the answers' lists are [] when empty,
// never null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
