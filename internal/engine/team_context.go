package engine

import (
	"context"
	"os"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// teamAuditLog names this view's audit log for the store. An index that
// had entries before its log had a name sent them to a team's store
// already (snag before the log names): those count as sent there, while
// the embedded store takes them all, the earlier history of snag log.
func (e *Engine) teamAuditLog(ctx context.Context) error {
	id, from, err := e.p.DB.AuditLogID(ctx, e.team.s.Across())
	if err != nil {
		return err
	}
	e.team.auditLog, e.team.auditFrom, e.team.auditSent = id, from, -1
	return nil
}

// teamSendAudits sends snag.db's audit entries the store has not taken
// to its log, a thousand at a time, until none is left or the store
// cannot take them.
func (e *Engine) teamSendAudits(ctx context.Context) error {
	t := e.team
	t.auditMu.Lock()
	defer t.auditMu.Unlock()
	if t.auditSent < 0 {
		sent, err := t.s.AuditSent(ctx, t.auditLog)
		if err != nil {
			return err
		}
		t.auditSent = max(sent, t.auditFrom)
	}
	for {
		batch, err := e.p.DB.AuditLog(ctx, t.auditSent, 1000)
		if err != nil || len(batch) == 0 {
			return err
		}
		es := make([]coord.Entry, len(batch))
		for i, a := range batch {
			es[i] = coord.Entry{At: a.At, Session: a.SessionID, Actor: string(a.Actor), Agent: a.Agent, Action: a.Action,
				TaskID: a.TaskID, Outcome: a.Outcome, Detail: a.Detail, Branch: a.Branch, Log: t.auditLog, Local: a.ID}
		}
		if err := t.s.AuditBatch(ctx, es); err != nil {
			return err
		}
		t.auditSent = batch[len(batch)-1].ID
	}
}

// teamAudit reads the log of live actions with read, after this view's
// entries were sent to it, so that it has every one made so far. With
// the store out of reach (a team's, cut off) it is this view's own log,
// read with local.
func (e *Engine) teamAudit(ctx context.Context, read func(context.Context) ([]coord.Entry, error),
	local func() ([]snag.AuditEntry, error)) ([]snag.AuditEntry, error) {
	err := e.teamSendAudits(ctx)
	var shared []coord.Entry
	if err == nil {
		shared, err = read(ctx)
	}
	if err != nil {
		e.log.Warn("the log of live actions is out of reach: this worktree's own entries are shown", "err", err)
		return local()
	}
	host, _ := os.Hostname()
	out := make([]snag.AuditEntry, len(shared))
	for i, c := range shared {
		a := snag.AuditEntry{ID: c.ID, SessionID: c.Session, At: c.At, Actor: queue.Actor(c.Actor), Agent: c.Agent,
			Action: c.Action, TaskID: c.TaskID, Outcome: c.Outcome, Detail: c.Detail, Branch: c.Branch}
		if c.Log != e.team.auditLog {
			if c.Root != e.root {
				a.Worktree = c.Root
			}
			if e.across() && c.Host != host {
				a.Host = c.Host
			}
		}
		out[i] = a
	}
	return out, nil
}

// teamHeldElsewhere is the team's leases that other clones hold, by task
// id (team mode, the store in reach): a task claimed on another clone is
// shown claimed there, not free. A store slow to answer leaves the rows as
// the files say, after heldReadTimeout.
func (e *Engine) teamHeldElsewhere(ctx context.Context) map[string]coord.Lease {
	if !e.across() || e.team.cutOff() > 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, heldReadTimeout)
	defer cancel()
	ls, err := e.team.s.Leases(ctx)
	if err != nil {
		return nil
	}
	out := map[string]coord.Lease{}
	for _, l := range ls {
		if l.Clone != e.team.s.Clone() {
			out[l.TaskID] = l
		}
	}
	return out
}

// heldReadTimeout bounds the read of the other clones' leases that a list
// or a show makes.
const heldReadTimeout = 500 * time.Millisecond

// teamHostOf is the machine of the live agent name on another clone, or
// "" when none is (or snagd runs alone).
func (e *Engine) teamHostOf(ctx context.Context, name string) string {
	if !e.across() || e.team.cutOff() > 0 {
		return ""
	}
	agents, err := e.team.s.Agents(ctx)
	if err != nil {
		return ""
	}
	for _, a := range agents {
		if a.Name == name {
			return a.Host
		}
	}
	return ""
}
