package board

import (
	"context"
	"errors"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/queue"
)

// Backend is what the board reads and changes: snagd meets it over its one
// writer. It speaks the API's types (package api) and queue's, never the
// index's, so the board draws the same tasks, sessions and audit entries
// the JSON API answers with. Its methods are safe for concurrent use.
//
// A method that fails returns an error that matches [ErrNotFound],
// [ErrRefused] or [ErrBusy] (errors.Is) when it is one of those, with a
// message a person reads; any other error is a fault, answered 500 and
// logged.
type Backend interface {
	// Ready reports whether the task files have been read once: until
	// then the board says it is starting and reads nothing.
	Ready() bool
	// Tasks lists the tasks of the given statuses in queue order; with
	// none, every task, files that never parsed included.
	Tasks(ctx context.Context, statuses ...queue.Status) ([]api.Task, error)
	// Task returns one task with its data and body (Verify left nil).
	Task(ctx context.Context, ref queue.Ref) (*api.TaskDetail, error)
	// Verify returns where verify of a task stands, with its recent runs.
	Verify(ctx context.Context, ref queue.Ref) (*api.VerifyState, error)
	// Counts counts the tasks and the problems.
	Counts(ctx context.Context) (api.Counts, error)
	// Problems lists what is wrong with the task files: files snag cannot
	// use as they are, and dependencies that point at no task.
	Problems(ctx context.Context) ([]Problem, error)
	// Audit returns the latest n entries of the audit log, oldest first.
	Audit(ctx context.Context, n int) ([]api.AuditEntry, error)
	// Sessions returns the live sessions with what they are doing, and
	// every live lease.
	Sessions(ctx context.Context) (api.Sessions, error)
	// Team is what the repository's other clones have in team mode: their
	// live agents with their tasks and file claims. Alone it is the zero
	// Team, and the pages show nothing of it.
	Team(ctx context.Context) (Team, error)
	// Shots is the folder of the captures' screenshots (.snag/shots).
	Shots() string
	// Files lists the live file claims.
	Files(ctx context.Context) ([]api.FileClaim, error)
	// Reports lists the latest n reports of agents, newest first.
	Reports(ctx context.Context, n int) ([]api.Message, error)
	// Plans lists the plans, newest first.
	Plans(ctx context.Context) ([]api.Plan, error)
	// Plan reads one plan, with its body.
	Plan(ctx context.Context, slug string) (*api.PlanDetail, error)
	// Notes lists the notes q picks (by type, branch, or a task they
	// name), newest first: at most q.Limit, 20 when it is 0.
	Notes(ctx context.Context, q api.NoteQuery) ([]api.Note, error)
	// Note reads one note by key or id, with its body and its edges both
	// ways.
	Note(ctx context.Context, ref string) (*api.NoteDetail, error)
	// Graph is the decision graph of the notes q picks (every one when
	// q.Limit is 0), newest first, with the edges whose both ends are
	// among them. q.Query is not read.
	Graph(ctx context.Context, q api.NoteQuery) (api.Graph, error)

	// Promote moves a task from the inbox to the queue for person by and,
	// in the same write, sets the severity and wave chosen (zero values
	// keep the file's).
	Promote(ctx context.Context, ref queue.Ref, sev queue.Severity, wave int, by string) (*queue.Task, error)
	// Move makes a person's move on a task: reject, cancel or reopen.
	Move(ctx context.Context, ref queue.Ref, act queue.Action, by string) (*queue.Task, error)
	// Accept resolves a task on a person's word (Mark done): open,
	// claimed, verifying or waiting for a person's review.
	Accept(ctx context.Context, ref queue.Ref, by string) (*queue.Task, error)
	// Add files a person's task (req.By): vetted and open. The answer's
	// warnings say what it names that is not there yet.
	Add(ctx context.Context, req api.AddRequest) (api.Added, error)
	// Edit changes a task's fields for person req.By: only the values
	// that change are rewritten in its file.
	Edit(ctx context.Context, ref queue.Ref, req api.EditRequest) (api.Edited, error)
	// EndSession ends an agent's session for person by: its tasks go
	// back to the queue. It returns the agent's name and how many tasks
	// were released.
	EndSession(ctx context.Context, id int64, by, reason string) (name string, released int, err error)
	// SetPlanStatus is person by's change of a plan's status: activating
	// an agent's draft vets it.
	SetPlanStatus(ctx context.Context, slug string, status queue.PlanStatus, by string) error
}

// The kinds of failure the board answers apart. A Backend marks an error
// with one through [Because].
var (
	// ErrNotFound: no such task or session (404).
	ErrNotFound = errors.New("board: not found")
	// ErrRefused: the move is not allowed as things are, or the reference
	// is ambiguous (409).
	ErrRefused = errors.New("board: refused")
	// ErrBusy: nothing was changed; the same request may work in a moment
	// (503).
	ErrBusy = errors.New("board: busy")
)

// Because returns err marked as a failure of kind (ErrNotFound, ErrRefused
// or ErrBusy): it matches kind and err with errors.Is, and says what err
// says.
func Because(kind, err error) error {
	if err == nil {
		return nil
	}
	return &marked{kind: kind, err: err}
}

type marked struct{ kind, err error }

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.kind, m.err} }
