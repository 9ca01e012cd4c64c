package client

import (
	"context"
	"errors"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/ops"
)

// Caller makes the API's calls (package api) for one caller: a person
// (the Client itself, whose methods these are too) or an agent's session
// (Client.As). Each method is one request; a non-2xx answer comes back as
// *Error. It is safe for concurrent use.
type Caller struct {
	c       *Client
	session int64
	tool    string
	handle  string
}

// As returns the calls of an agent's session: every request carries the
// session and the name of the tool call it serves, so snagd acts for the
// session and audits the call. A session of 0 is a person's calls.
func (c *Client) As(session int64, tool string) Caller {
	return Caller{c: c, session: session, tool: tool}
}

// WithHandle returns k's calls naming handle h (api.HandleHeader): a
// lease handle a claim answered, which the call acts on.
func (k Caller) WithHandle(h string) Caller {
	k.handle = h
	return k
}

func (k Caller) do(ctx context.Context, method, path string, in, out any) error {
	return k.c.send(ctx, k.session, k.tool, k.handle, method, path, in, out)
}

// NotFound reports whether err is snagd's answer that what was asked for
// (a task, most often) does not exist.
func NotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == statusNotFound
}

// SessionEnded reports whether err is snagd's answer that the agent's
// session has ended (its leases were released): the agent registers again.
func SessionEnded(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == statusGone
}

// List lists tasks (GET /tasks).
func (k Caller) List(ctx context.Context, q api.ListQuery) (api.TaskList, error) {
	return call(ctx, k, ops.ListTasks, q)
}

// Get reads one task by id or alias (GET /tasks/{ref}).
func (k Caller) Get(ctx context.Context, ref string) (api.TaskDetail, error) {
	return call(ctx, k, ops.GetTask, api.TaskRef{Ref: ref})
}

// Search runs a full-text query (GET /search).
func (k Caller) Search(ctx context.Context, q api.SearchQuery) (api.SearchResult, error) {
	return call(ctx, k, ops.Search, q)
}

// Add files a task (POST /tasks): a person's is open, an agent's goes to
// the inbox.
func (k Caller) Add(ctx context.Context, req api.AddRequest) (api.Added, error) {
	return call(ctx, k, ops.AddTask, req)
}

// Claim leases a task for the session (POST /tasks/{ref}/claim), or the
// next ready one when ref is "" (POST /claim).
func (k Caller) Claim(ctx context.Context, ref string, req api.ClaimRequest) (api.Claim, error) {
	req.Ref = ref
	return call(ctx, k, ops.ClaimTask, req)
}

// Release gives a task the session holds back to the queue, fenced by its
// epoch (POST /tasks/{ref}/release with the session).
func (k Caller) Release(ctx context.Context, ref string, req api.LeaseRequest) (api.Released, error) {
	req.Ref = ref
	return call(ctx, k, ops.Release, req)
}

// TakeBack is a person's release: the task goes back to the queue from
// whoever holds it (POST /tasks/{ref}/release without a session).
func (k Caller) TakeBack(ctx context.Context, ref string, req api.MoveRequest) (api.Released, error) {
	return call(ctx, k, ops.TakeBack, api.TaskMove{Ref: ref, MoveRequest: req})
}

// Resolve hands a task the session holds to verify (POST
// /tasks/{ref}/resolve), fenced by req.Epoch.
func (k Caller) Resolve(ctx context.Context, ref string, req api.VerifyRequest) (api.Resolved, error) {
	req.Ref, req.DryRun = ref, false
	return call(ctx, k, ops.Resolve, req)
}

// Move makes a person's move: action is promote, reject, cancel, reopen or
// accept (POST /tasks/{ref}/{action}).
func (k Caller) Move(ctx context.Context, ref, action string, req api.MoveRequest) (api.Moved, error) {
	m := api.TaskMove{Ref: ref, Action: action, MoveRequest: req}
	if action == "accept" {
		return call(ctx, k, ops.Accept, m)
	}
	return call(ctx, k, ops.Move, m)
}

// Edit changes a task's fields for a person (POST /tasks/{ref}/edit):
// only the values that change are rewritten in its file.
func (k Caller) Edit(ctx context.Context, ref string, req api.EditRequest) (api.Edited, error) {
	req.Ref = ref
	return call(ctx, k, ops.Edit, req)
}

// VerifyPlan says what would check a task, changing nothing (POST
// /verify/{ref} with dry_run). A check that needs a missing browser comes
// back as *Error with code verify_unavailable.
func (k Caller) VerifyPlan(ctx context.Context, ref string, req api.VerifyRequest) (api.VerifyPlan, error) {
	req.Ref, req.DryRun = ref, true
	return call(ctx, k, ops.PlanVerify, req)
}

// Verify checks a task now (POST /verify/{ref}).
func (k Caller) Verify(ctx context.Context, ref string, req api.VerifyRequest) (api.Resolved, error) {
	req.Ref, req.DryRun = ref, false
	return call(ctx, k, ops.Verify, req)
}

// VerifyState says where verify of a task stands (GET /verify/{ref}).
func (k Caller) VerifyState(ctx context.Context, ref string) (api.VerifyState, error) {
	return call(ctx, k, ops.VerifyStatus, api.TaskRef{Ref: ref})
}

// Sessions lists the live sessions and leases (GET /sessions).
func (k Caller) Sessions(ctx context.Context) (api.Sessions, error) {
	return call(ctx, k, ops.ListSessions, ops.None{})
}

// EndSession ends an agent's session for a person (POST
// /sessions/{id}/end).
func (k Caller) EndSession(ctx context.Context, id int64, req api.EndRequest) (api.Ended, error) {
	req.ID = id
	return call(ctx, k, ops.EndSession, req)
}

// Audit reads the audit log (GET /audit).
func (k Caller) Audit(ctx context.Context, q api.AuditQuery) (api.AuditLog, error) {
	return call(ctx, k, ops.Audit, q)
}

// Reindex rebuilds the index from the task files (POST /reindex).
func (k Caller) Reindex(ctx context.Context, req api.MoveRequest) (api.Reindexed, error) {
	return call(ctx, k, ops.Reindex, req)
}

// Rescan reads every task file again now (POST /rescan).
func (k Caller) Rescan(ctx context.Context) (api.Rescanned, error) {
	return call(ctx, k, ops.Rescan, ops.None{})
}

// LoginCode mints a one-time link to the board (POST /login-codes).
func (k Caller) LoginCode(ctx context.Context, req api.MoveRequest) (api.LoginCode, error) {
	var out api.LoginCode
	err := k.do(ctx, "POST", "/login-codes", req, &out)
	return out, err
}
