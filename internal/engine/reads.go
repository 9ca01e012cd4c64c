package engine

import (
	"context"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// The reads below take no lock: the index serves each from one consistent
// snapshot, beside the writer.

// List pages through the tasks that match f.
func (e *Engine) List(ctx context.Context, f index.Filter) (index.Page, error) {
	page, err := e.p.DB.List(ctx, f)
	if err == nil {
		e.heldElsewhere(ctx, page.Rows...)
	}
	return page, err
}

// Get is one task, its row, its parsed file and its file's facts.
func (e *Engine) Get(ctx context.Context, ref queue.Ref) (*index.Item, error) {
	it, err := e.p.DB.Get(ctx, ref)
	if err == nil {
		e.heldElsewhere(ctx, &it.Row)
	}
	return it, err
}

// heldElsewhere shows the rows whose tasks a lease holds while their
// files say open as the lease says: claimed, by its holder. The lease is
// another worktree's of the repository (Row.HeldIn names it), or this
// worktree's own when git put the file back as it was before the claim.
func (e *Engine) heldElsewhere(ctx context.Context, rows ...*index.Row) {
	open := false
	for _, row := range rows {
		open = open || row.Status == queue.StatusOpen
	}
	if !open {
		return
	}
	own := e.leasedOpen(ctx)
	var held map[string]Holder
	if r := e.opts.Repository; r != nil {
		held = r.elsewhere(ctx, e)
	}
	clones := e.teamHeldElsewhere(ctx)
	for _, row := range rows {
		if row.Status != queue.StatusOpen {
			continue
		}
		if h, ok := own[row.ID]; ok {
			row.Status, row.Assignee = queue.StatusClaimed, h.Name
		} else if h, ok := held[row.ID]; ok && h.Name != "" {
			row.Status, row.Assignee, row.HeldIn = queue.StatusClaimed, h.Name, h.Worktree
		} else if l, ok := clones[row.ID]; ok {
			row.Status, row.Assignee, row.HeldOn = queue.StatusClaimed, l.Holder, l.Host
		}
	}
}

// Search runs a full-text query; a query that is a task's alias or id
// lists that task first.
func (e *Engine) Search(ctx context.Context, query string, limit int) ([]index.Hit, error) {
	return e.p.Search(ctx, query, limit)
}

// Counts are the tasks by status, and the files that are not tasks.
func (e *Engine) Counts(ctx context.Context) (snag.Counts, error) { return e.p.DB.Count(ctx) }

// Sessions are the live sessions.
func (e *Engine) Sessions(ctx context.Context) ([]index.Session, error) {
	return e.p.DB.LiveSessions(ctx)
}

// Leases are the live leases.
func (e *Engine) Leases(ctx context.Context) ([]index.Lease, error) { return e.p.DB.Leases(ctx) }

// LeasesOf are the leases session id holds.
func (e *Engine) LeasesOf(ctx context.Context, id int64) ([]index.Lease, error) {
	return e.p.DB.LeasesOf(ctx, id)
}

// AuditLog is up to limit entries (0: 100) of the audit log after id
// after: the repository's log of live actions (the team's, in team mode),
// which outlives any index (teamAudit).
func (e *Engine) AuditLog(ctx context.Context, after int64, limit int) ([]snag.AuditEntry, error) {
	if limit <= 0 {
		limit = 100
	}
	return e.teamAudit(ctx, func(ctx context.Context) ([]coord.Entry, error) { return e.team.s.AuditLog(ctx, after, limit) },
		func() ([]snag.AuditEntry, error) { return e.p.DB.AuditLog(ctx, after, limit) })
}

// Polling reports whether the watcher polls, having no filesystem watches.
func (e *Engine) Polling() bool { return e.polling.Load() }

// Problems are the rows of files that are not clean tasks: invalid,
// conflicted, missing while held, or sharing an id or alias.
func (e *Engine) Problems(ctx context.Context) ([]*index.Row, error) { return e.p.DB.Problems(ctx) }

// Snapshot is every task that reads cleanly, with its file, and the
// problems, from one consistent read.
func (e *Engine) Snapshot(ctx context.Context) ([]queue.Located, []queue.Problem, error) {
	return e.p.DB.Snapshot(ctx)
}

// DepKeys is a task's depends_on as people and agents read it: an entry
// written by id (as snag writes them) is named by its task's key.
func (e *Engine) DepKeys(ctx context.Context, deps []string) []string {
	return e.p.DB.DepKeys(ctx, deps)
}

// AuditTail is the latest n entries of the audit log (as AuditLog's),
// newest last.
func (e *Engine) AuditTail(ctx context.Context, n int) ([]snag.AuditEntry, error) {
	return e.teamAudit(ctx, func(ctx context.Context) ([]coord.Entry, error) { return e.team.s.AuditTail(ctx, n) },
		func() ([]snag.AuditEntry, error) { return e.p.DB.AuditTail(ctx, n) })
}
