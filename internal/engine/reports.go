package engine

import (
	"context"
	"strings"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// Report records session s's progress (about task, when named) for people
// and the other agents: the board's activity and their snag_context show it.
func (e *Engine) Report(ctx context.Context, s index.Session, message, task, detail string) (index.Message, error) {
	message = strings.TrimSpace(message)
	switch {
	case message == "":
		return index.Message{}, refuse(ErrInvalid, "no_message", "report: say in a sentence what you did or found")
	case len(message) > 500:
		return index.Message{}, refuse(ErrInvalid, "long_message", "report: the message is over 500 bytes: keep it to a sentence or two and put the rest in detail")
	case len(detail) > 8000:
		return index.Message{}, refuse(ErrInvalid, "long_detail", "report: detail is over 8000 bytes: write a note (snag_note) and name it")
	}
	m := index.Message{Kind: index.MessageReport, From: s.Name, FromSession: s.ID, Body: message, Detail: detail}
	key := ""
	if task != "" {
		it, err := e.taskOf(ctx, task)
		if err != nil {
			return index.Message{}, err
		}
		m.TaskID, key = it.ID, it.Key
	}
	m, err := e.p.DB.AddMessage(ctx, m)
	if err != nil {
		return m, err
	}
	e.Audit(ctx, snag.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: "report", TaskID: m.TaskID,
		Outcome: "ok", Detail: message})
	e.hub.Publish(snag.ReportEvent{From: s.Name, Task: key, Message: message})
	return m, nil
}

// taskOf reads the task ref names, or refuses naming the fix.
func (e *Engine) taskOf(ctx context.Context, ref string) (*index.Item, error) {
	r, err := queue.ParseRef(ref)
	if err != nil {
		return nil, refuse(ErrInvalid, "bad_ref", "%v", err)
	}
	it, err := e.p.DB.Get(ctx, r)
	if err != nil {
		return nil, refuse(ErrNotFound, "not_found", "no task %s: snag_list or snag_search finds a task's key", ref)
	}
	return it, nil
}

// Messages lists messages of kind (index.MessageReport or
// index.MessageHandoff), addressed to to when it is set, newest first.
func (e *Engine) Messages(ctx context.Context, kind, to string, limit int) ([]index.Message, error) {
	return e.p.DB.Messages(ctx, kind, strings.ToUpper(to), false, limit)
}
