package board

import (
	"context"
	"errors"
	"net/http"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// Backend is what the board reads that is not an operation of snagd's
// API: whether snagd is ready, the counts the tabs show, the problems, the
// other clones of a team, and the folder of the captures' screenshots.
// Everything else the board reads and changes through snagd's operations
// (an [ops.Service]), as a person, the way the CLI and the MCP tools do.
// snagd meets it; its methods are safe for concurrent use.
//
// A method that fails returns an [*ops.Error] when it is a refusal or a
// failure snagd words (a busy store, say); any other error is a fault,
// answered 500 and logged.
type Backend interface {
	// Ready reports whether the task files have been read once: until
	// then the board says it is starting and reads nothing.
	Ready() bool
	// Counts counts the tasks and the problems.
	Counts(ctx context.Context) (api.Counts, error)
	// Problems lists what is wrong with the task files: files snag cannot
	// use as they are, and dependencies that point at no task.
	Problems(ctx context.Context) ([]Problem, error)
	// Team is what the repository's other clones have in team mode: their
	// live agents with their tasks and file claims. Alone it is the zero
	// Team, and the pages show nothing of it.
	Team(ctx context.Context) (Team, error)
	// Shots is the folder of the captures' screenshots (.snag/shots).
	Shots() string
}

// statusOf is the HTTP status the board answers a failure with: a missing
// task, note, plan or session is 404, a store that is busy or changing
// 503 (the same request may work in a moment), any other refusal 409 (the
// move is not allowed as things are), and anything else 500.
func statusOf(err error) int {
	var e *ops.Error
	if !errors.As(err, &e) {
		return http.StatusInternalServerError
	}
	switch {
	case e.Status == http.StatusNotFound:
		return http.StatusNotFound
	case e.Status == http.StatusServiceUnavailable:
		return http.StatusServiceUnavailable
	case e.Status < http.StatusInternalServerError:
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// call runs op on the board's service for the person logged in: the
// board's requests name the person in By.
func call[Req, Ans any](ctx context.Context, s *Server, op ops.Op[Req, Ans], req Req) (Ans, error) {
	return ops.Call(ops.WithCaller(ctx, ops.Caller{Via: "board"}), s.svc, op, req)
}

// listed is the most tasks the board reads in one list: GET /tasks's
// most (ops.ListQuery.Limit).
const listed = 10000

// tasks lists the tasks of the given statuses in queue order; with none,
// every task, files that never parsed included.
func (s *Server) tasks(ctx context.Context, statuses ...queue.Status) ([]api.Task, error) {
	l, err := call(ctx, s, ops.ListTasks, ops.ListQuery{Statuses: statuses, All: len(statuses) == 0, Limit: listed})
	return l.Tasks, err
}

// task reads one task, by id or alias, with its data and body.
func (s *Server) task(ctx context.Context, ref string) (snag.TaskDetail, error) {
	return call(ctx, s, ops.GetTask, ops.TaskRef{Ref: ref})
}

// The audit log the board reads: its latest auditScan entries, in pages of
// the most one read answers.
const (
	auditScan = 2000
	auditPage = 1000 // GET /audit's most (ops.AuditQuery.Tail)
)

// audit returns the latest auditScan entries of the audit log, oldest
// first: the latest page, then the page before it (entries are numbered in
// order, so the page before the first entry read starts auditPage before
// it; a gap in the numbers leaves that page short).
func (s *Server) audit(ctx context.Context) ([]api.AuditEntry, error) {
	last, err := call(ctx, s, ops.Audit, ops.AuditQuery{Tail: auditPage})
	if err != nil || len(last.Entries) < auditPage {
		return last.Entries, err
	}
	first := last.Entries[0].ID
	out := last.Entries
	for range auditScan/auditPage - 1 {
		if first <= 1 {
			break
		}
		before, err := call(ctx, s, ops.Audit, ops.AuditQuery{After: max(first-1-auditPage, 0), Limit: auditPage})
		if err != nil {
			return nil, err
		}
		var page []api.AuditEntry
		for _, e := range before.Entries {
			if e.ID < first {
				page = append(page, e)
			}
		}
		if len(page) == 0 {
			break
		}
		out, first = append(page, out...), page[0].ID
	}
	return out, nil
}
