package engine

import (
	"context"
	"os"
	"slices"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/index"
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

// TeamItem is what another clone published that this clone's files do not
// have yet: a decision or an inbox item, by whom, on which branch.
type TeamItem struct {
	Kind, Key, Type, Title, Branch, From, Host string
	Created                                    time.Time
}

// teamContext adds to tc what the other clones have: their agents with
// what they hold and claim, their reports, the handoffs they left for s,
// and the notes and inbox items they added that this clone's files do not
// have yet. With the store out of reach, tc stays this clone's alone.
func (e *Engine) teamContext(ctx context.Context, tc *TeamContext, s index.Session) {
	t := e.team
	if t.cutOff() > 0 {
		return
	}
	agents, err := t.s.Agents(ctx)
	if err != nil {
		return
	}
	byName := map[string]int{}
	for _, a := range agents {
		v := AgentView{Session: index.Session{Name: a.Name + " on " + a.Host, Client: a.Client, Branch: a.Branch, Host: a.Host},
			Files: e.teamClaims(a.Files)}
		for _, l := range a.Leases {
			h := HeldTask{Key: l.Key, ID: l.TaskID, Status: queue.StatusClaimed, Epoch: l.Epoch}
			if it, err := e.p.DB.Get(ctx, queue.Ref{ID: l.TaskID}); err == nil {
				h.Title, h.Trust = it.Title, it.Trust
			}
			v.Tasks = append(v.Tasks, h)
		}
		byName[a.Name+"@"+a.Host] = len(tc.Others)
		tc.Others = append(tc.Others, v)
	}
	asMessage := func(m coord.Message) index.Message {
		return index.Message{Created: m.Created, Kind: m.Kind, From: m.From + " on " + m.Host, To: m.To, Title: m.Title, Body: m.Body}
	}
	if reports, err := t.s.Messages(ctx, coord.Report, "", false, 20); err == nil {
		for _, m := range reports {
			if i, ok := byName[m.From+"@"+m.Host]; ok && tc.Others[i].LastReport == nil {
				r := asMessage(m)
				tc.Others[i].LastReport = &r
			}
			tc.Reports = append(tc.Reports, asMessage(m))
		}
		slices.SortStableFunc(tc.Reports, func(a, b index.Message) int { return b.Created.Compare(a.Created) })
		if len(tc.Reports) > contextReports {
			tc.Reports = tc.Reports[:contextReports]
		}
	}
	if hs, err := t.s.Messages(ctx, coord.Handoff, s.Name, true, contextHandoffsRead); err == nil && len(hs) > 0 {
		var ids []int64
		for i := len(hs) - 1; i >= 0; i-- { // oldest first, as the local ones
			if len(tc.Handoffs) == contextHandoffs { // the rest waits, unseen, for the next read
				tc.HandoffsMore += i + 1
				break
			}
			tc.Handoffs = append(tc.Handoffs, asMessage(hs[i]))
			ids = append(ids, hs[i].ID)
		}
		t.s.MarkSeen(ctx, ids)
	}
	for _, kind := range []string{coord.Note, coord.Inbox} {
		ms, err := t.s.Messages(ctx, kind, "", false, 20)
		if err != nil {
			continue
		}
		for _, m := range ms {
			if len(tc.Team) == contextTeam {
				break
			}
			if kind == coord.Note && m.Type != "decision" {
				continue
			}
			if e.teamHas(ctx, kind, m.Key) {
				continue // merged: the files have it
			}
			tc.Team = append(tc.Team, TeamItem{Kind: kind, Key: m.Key, Type: m.Type, Title: m.Title, Branch: m.Branch,
				From: m.From, Host: m.Host, Created: m.Created})
		}
	}
}

// contextTeam is how many of the team's unmerged items a context lists.
const contextTeam = 3

// teamHas reports whether this clone's files have the note or task key.
func (e *Engine) teamHas(ctx context.Context, kind, key string) bool {
	if key == "" {
		return false
	}
	if kind == coord.Note {
		_, err := e.p.DB.Note(ctx, key)
		return err == nil
	}
	ref, err := queue.ParseRef(key)
	if err != nil {
		return false
	}
	_, err = e.p.DB.Get(ctx, ref)
	return err == nil
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
