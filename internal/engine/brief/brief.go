// Package brief is the briefing service: what agents and people are
// told of the team. It reads an agent's one-call context (snag_context:
// its work, what is ready, the other agents and what each holds, the
// handoffs left for it, the latest reports, plans and decisions, and in
// team mode what the other clones have), the activity by branch, the
// board's view of the other clones, and the reports; it records a
// report, a message row of the index and its event.
//
// Everything it does is a read but two small writes that are no move of
// the engine's: a report's message, and the handoffs a context shows,
// marked seen. It works over Engine, the small read seam of the engine
// it needs, and Index, the few reads of the project's index it makes.
//
// It must not import a transport (net/http, the daemon, mcp, the client,
// the board, the CLI) nor another service.
package brief

import (
	"context"
	"fmt"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// Engine is what the service needs of the engine (*engine.Engine
// satisfies it).
type Engine interface {
	// Workspace names the worktree's workspace (its branch leases').
	Workspace() string
	// Events is the hub the service publishes a report's event on.
	Events() *engine.Hub
	// Audit records an entry in the audit log.
	Audit(ctx context.Context, a snag.AuditEntry)
	// TaskOf reads the task a ref names, or refuses.
	TaskOf(ctx context.Context, ref string) (*index.Item, error)

	// List reads a page of tasks as the engine lists them (a task
	// another worktree or clone holds reads as claimed).
	List(ctx context.Context, f index.Filter) (index.Page, error)
	// Plans lists the plan files.
	Plans(ctx context.Context) ([]engine.PlanView, error)
	// Notes lists notes newest first.
	Notes(ctx context.Context, f engine.NoteFilter) ([]index.NoteRow, error)
	// SyncNotes brings the notes index in step with the notes folders.
	SyncNotes(ctx context.Context, force bool) error
	// FileClaims lists every live file claim, the other members' too.
	FileClaims(ctx context.Context) ([]snag.FileClaim, error)
	// WorktreesActivity is the activity by branch the repository's other
	// worktrees recorded since since, one list each.
	WorktreesActivity(ctx context.Context, since time.Time) [][]snag.BranchActivity

	// Coord is the live state the engine was opened with.
	Coord() coord.Live
	// TeamLink is the state of this clone's link to the store (how long
	// it has been cut off).
	TeamLink() engine.TeamLink
	// TeamClaims words the store's file claims as the index's.
	TeamClaims(cs []coord.FileClaim) []snag.FileClaim
}

// Index is what the service reads of the project's index (*index.DB
// satisfies it). Its writes there are a report's message and the seen
// mark of the handoffs a context shows: a message alone is no move of
// the engine's.
type Index interface {
	LiveSessions(ctx context.Context) ([]index.Session, error)
	Leases(ctx context.Context) ([]index.Lease, error)
	Get(ctx context.Context, ref queue.Ref) (*index.Item, error)
	Note(ctx context.Context, ref string) (index.NoteRow, error)
	FileClaims(ctx context.Context, now time.Time) ([]snag.FileClaim, error)
	FileClaimsOf(ctx context.Context, sessionID int64) ([]snag.FileClaim, error)
	BranchLeases(ctx context.Context, workspace string) ([]index.BranchLease, error)
	Activity(ctx context.Context, since time.Time, limit int) ([]snag.BranchActivity, int, error)
	Messages(ctx context.Context, kind, to string, unseen bool, limit int) ([]index.Message, error)
	MarkSeen(ctx context.Context, ids []int64) error
	AddMessage(ctx context.Context, m index.Message) (index.Message, error)
}

// Service tells agents and people what the team is doing. It is safe
// for concurrent use.
type Service struct {
	e  Engine
	db Index
}

// New is the briefing service over e and its project's index db.
func New(e Engine, db Index) *Service { return &Service{e: e, db: db} }

// refuse makes a refusal of kind with code and a formatted message.
func refuse(kind error, code, format string, args ...any) *engine.Error {
	return &engine.Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// team is the live state's other clones when snagd shares it with them
// (team mode) and the store is in reach; else nil.
func (s *Service) team() coord.Live {
	if live := s.e.Coord(); live.Across() && s.e.TeamLink().CutOff == 0 {
		return live
	}
	return nil
}
