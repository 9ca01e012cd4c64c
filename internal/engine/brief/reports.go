package brief

import (
	"context"
	"strings"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// Report records session from's progress (about task, when named) for people
// and the other agents: the board's activity and their snag_context show it.
func (s *Service) Report(ctx context.Context, from index.Session, message, task, detail string) (index.Message, error) {
	message = strings.TrimSpace(message)
	switch {
	case message == "":
		return index.Message{}, refuse(engine.ErrInvalid, "no_message", "report: say in a sentence what you did or found")
	case len(message) > 500:
		return index.Message{}, refuse(engine.ErrInvalid, "long_message", "report: the message is over 500 bytes: keep it to a sentence or two and put the rest in detail")
	case len(detail) > 8000:
		return index.Message{}, refuse(engine.ErrInvalid, "long_detail", "report: detail is over 8000 bytes: write a note (snag_note) and name it")
	}
	m := index.Message{Kind: index.MessageReport, From: from.Name, FromSession: from.ID, Body: message, Detail: detail}
	key := ""
	if task != "" {
		it, err := s.e.TaskOf(ctx, task)
		if err != nil {
			return index.Message{}, err
		}
		m.TaskID, key = it.ID, it.Key
	}
	m, err := s.db.AddMessage(ctx, m)
	if err != nil {
		return m, err
	}
	s.e.Audit(ctx, snag.AuditEntry{SessionID: from.ID, Actor: queue.Agent, Agent: from.Name, Action: "report", TaskID: m.TaskID,
		Outcome: "ok", Detail: message})
	s.e.Events().Publish(snag.ReportEvent{From: from.Name, Task: key, Message: message})
	return m, nil
}

// Messages lists messages of kind (index.MessageReport or
// index.MessageHandoff), addressed to to when it is set, newest first.
func (s *Service) Messages(ctx context.Context, kind, to string, limit int) ([]index.Message, error) {
	return s.db.Messages(ctx, kind, strings.ToUpper(to), false, limit)
}
