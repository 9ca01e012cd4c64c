// Package graph is the decision graph's service: notes and the links
// between them, the branch write leases that graph writes take, the
// plans, and the handoffs that leave a message (and with it, a task's
// lease) for another agent.
//
// It owns their policy: what a note, a link, a plan or a handoff may be,
// and the words of each refusal. It works over Engine, the small seam of
// the engine it needs; the one move it makes, a handoff's transfer of a
// lease, is the engine's (Engine.HandOver), under its write lock. Notes
// and plans are files of their own, written here with atomicfile (a
// complete file or none, synced before it is renamed into place).
//
// It must not import a transport (net/http, the daemon, mcp, the client,
// the board, the CLI) nor another service.
package graph

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/snag"
)

// Engine is what the service needs of the engine (*engine.Engine
// satisfies it).
type Engine interface {
	// Root is the project root of the worktree snagd serves.
	Root() string
	// Events is the hub the service publishes its events on.
	Events() *engine.Hub
	// Audit records an entry in the audit log.
	Audit(ctx context.Context, a snag.AuditEntry)

	// SyncNotes brings the notes index in step with the notes folders.
	SyncNotes(ctx context.Context, force bool) error
	// Notes lists notes newest first (the engine's own reads use it too).
	Notes(ctx context.Context, f engine.NoteFilter) ([]index.NoteRow, error)
	// NextNoteKey is the first note key to try.
	NextNoteKey(ctx context.Context) (int, error)
	// TakeBranch takes or renews a session's write lease on a branch.
	TakeBranch(ctx context.Context, session int64, who, branch string, ttl time.Duration) (engine.BranchHolder, bool, *engine.Error)
	// TeamPost publishes a note added here to the team.
	TeamPost(m coord.Message)

	// Plans lists the plan files (the engine's own reads use it too).
	Plans(ctx context.Context) ([]engine.PlanView, error)
	// PlanView reads one plan and counts its tasks.
	PlanView(ctx context.Context, slug string) engine.PlanView

	// SessionRoot is another worktree's root, or "".
	SessionRoot(tree string) string
	// TaskOf reads the task a ref names, or refuses.
	TaskOf(ctx context.Context, ref string) (*index.Item, error)
	// TeamHostOf is the machine of the other clone where an agent is
	// connected, or "".
	TeamHostOf(ctx context.Context, name string) string
	// HandoffLease reads a task and its live lease under the write lock.
	HandoffLease(ctx context.Context, id string, from *index.Session) (*index.Item, index.Lease, error)
	// HandOver moves a task's lease to another session, with a message.
	HandOver(ctx context.Context, h engine.Handover) (index.Message, index.Lease, error)
}

// Index is what the service reads of the project's index (*index.DB
// satisfies it). Its one write there is the message of a handoff that
// moves no task: a message alone is no move of the engine's.
type Index interface {
	Note(ctx context.Context, ref string) (index.NoteRow, error)
	Notes(ctx context.Context, f index.NoteFilter) ([]index.NoteRow, error)
	NoteCopies(ctx context.Context, ref string) ([]index.NoteRow, error)
	Links(ctx context.Context) ([]index.LinkRow, error)
	LinksTo(ctx context.Context, key, id string) ([]index.LinkRow, error)
	SearchNotes(ctx context.Context, query string, limit int) ([]index.NoteRow, error)
	LiveSessions(ctx context.Context) ([]index.Session, error)
	AddMessage(ctx context.Context, m index.Message) (index.Message, error)
}

// Service is the decision graph of one workspace. It is safe for
// concurrent use.
type Service struct {
	e  Engine
	db Index
	// rewrite is held while a note's file is read, changed and written
	// back (a link added), so two links to the same note both land.
	rewrite sync.Mutex
}

// New is the graph service over e and its project's index db.
func New(e Engine, db Index) *Service { return &Service{e: e, db: db} }

// refuse makes a refusal of kind with code and a formatted message.
func refuse(kind error, code, format string, args ...any) *engine.Error {
	return &engine.Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// orNone shows an empty string as (none).
func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// root is the worktree snagd serves.
func (s *Service) root() string { return s.e.Root() }

// publish announces ev on the engine's hub.
func (s *Service) publish(ev snag.Event) { s.e.Events().Publish(ev) }
