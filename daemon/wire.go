package daemon

import (
	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/queue"
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
	claimRequest    = api.ClaimRequest
	leaseRequest    = api.LeaseRequest
	verifyRequest   = api.VerifyRequest
	registerRequest = api.Registration
	endRequest      = api.EndRequest
)

// verifyPlan is what would check a task: the dry run's answer.
type verifyPlan = api.VerifyPlan

func taskList(page index.Page) api.TaskList {
	return api.TaskList{Tasks: index.WireRows(page.Rows), Next: page.Next}
}

// taskDetail is GET /tasks/{ref}; st is the task's verify state, given
// when a check runs or has run.
func taskDetail(it *index.Item, taskFile string, st *verifyState) api.TaskDetail {
	out := it.Wire(taskFile)
	if st != nil {
		out.Verify = st.wire()
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
		out.Sessions[i] = api.LiveSession{Session: v.Session.Wire(), Activity: v.Activity.Wire()}
	}
	return out
}

func auditLog(es []index.AuditEntry) api.AuditLog { return api.AuditLog{Entries: index.WireAudit(es)} }

func (st verifyState) wire() *api.VerifyState {
	return &api.VerifyState{Key: st.Key, Status: st.Status, Running: st.Running, Outcome: st.Outcome, Reason: st.Reason,
		LastAt: st.LastAt, Verifier: st.Verifier, Shot: st.Shot, History: index.WireRuns(st.History)}
}
