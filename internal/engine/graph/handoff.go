package graph

import (
	"context"
	"errors"
	"strings"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// HandedOff is what a handoff did.
type HandedOff struct {
	Message index.Message
	// Moved: the task's lease went to the addressee, with Epoch.
	Moved bool
	Key   string
	Epoch int64
	// Live: the addressee has a live session (a note to one that has none
	// waits for it to come back under its name); Host names the machine
	// of the clone it is connected to, when another (team mode).
	Live bool
	Host string
}

// ErrNotLive: the agent a task is handed to has no live session.
var ErrNotLive = errors.New("not live")

// Handoff leaves h for the agent h.To: it appears in their snag_context
// until they have seen it. With h.Task, the task's lease moves to that
// agent atomically (a new epoch: the old holder's later writes are stale),
// when the agent is live and the task is claimed by from (or by anyone,
// for a person: from nil, by naming them); otherwise nothing is recorded
// and the refusal says why.
func (s *Service) Handoff(ctx context.Context, from *index.Session, by string, h ops.HandoffRequest) (HandedOff, error) {
	ho := newHandingOff(from, by, h)
	if err := ho.refusal(); err != nil {
		return s.refuseHandoff(ctx, ho, err)
	}
	var live bool
	ho.to, live = s.liveNamed(ctx, ho.h.To)
	if ho.h.Task == "" {
		return s.sendHandoff(ctx, ho, live)
	}
	if err := s.readHandoffTask(ctx, ho, live); err != nil {
		return s.refuseHandoff(ctx, ho, err)
	}
	// The lease moves in the live state first, under a new epoch; snag.db
	// mirrors it. Should the file's write fail, it moves back.
	got, granted, err := s.e.HandOver(ctx, engine.Handover{Task: ho.it, Lease: ho.lease, From: ho.from, To: ho.to,
		Actor: ho.actor, By: ho.by, Message: ho.m})
	if err != nil {
		return s.refuseHandoff(ctx, ho, err)
	}
	s.publish(snag.HandoffEvent{From: ho.by, To: ho.h.To, Title: ho.h.Title, Task: ho.it.Key})
	return HandedOff{Message: got, Moved: true, Key: ho.it.Key, Epoch: granted.Epoch, Live: true}, nil
}

// handingOff is one handoff as Handoff makes it: who hands off, the
// message, and with a task, the task, its lease and the addressee's
// session.
type handingOff struct {
	from  *index.Session // the agent handing off; nil for a person
	actor queue.Actor
	by    string
	h     ops.HandoffRequest
	entry snag.AuditEntry // the audit's entry, but for its outcome
	m     index.Message
	to    index.Session
	it    *index.Item
	lease index.Lease
}

// newHandingOff is a handoff's caller and words, the addressee and title
// trimmed.
func newHandingOff(from *index.Session, by string, h ops.HandoffRequest) *handingOff {
	ho := &handingOff{from: from, actor: queue.Person, by: by}
	if from != nil {
		ho.actor, ho.by = queue.Agent, from.Name
	}
	ho.entry = snag.AuditEntry{Actor: ho.actor, Agent: ho.by, Action: "handoff"}
	if from != nil {
		ho.entry.SessionID = from.ID
	}
	h.To = strings.ToUpper(strings.TrimSpace(h.To))
	h.Title = strings.TrimSpace(h.Title)
	ho.h = h
	ho.m = index.Message{Kind: index.MessageHandoff, From: ho.by, To: h.To, Title: h.Title, Body: h.Body}
	if from != nil {
		ho.m.FromSession = from.ID
	}
	return ho
}

// refusal says what is wrong with the handoff's words, if anything.
func (ho *handingOff) refusal() error {
	h := ho.h
	switch {
	case h.To == "":
		return refuse(engine.ErrInvalid, "no_addressee", "handoff: name the agent it is for (snag agents lists them)")
	case h.Title == "":
		return refuse(engine.ErrInvalid, "no_title", "handoff: give it a title: what the other agent is to do")
	case len(h.Title) > 200:
		return refuse(engine.ErrInvalid, "long_title", "handoff: the title is over 200 bytes: keep it short and put the rest in the body")
	case len(h.Body) > 8000:
		return refuse(engine.ErrInvalid, "long_body", "handoff: the body is over 8000 bytes: write a note (snag_note) and name it")
	case ho.from != nil && h.To == ho.from.Name:
		return refuse(engine.ErrInvalid, "to_self", "handoff: %s is you: hand off to another agent (snag_context lists them)", h.To)
	}
	return nil
}

// refuseHandoff audits a refused handoff and answers with its error.
func (s *Service) refuseHandoff(ctx context.Context, ho *handingOff, err error) (HandedOff, error) {
	entry := ho.entry
	entry.Outcome, entry.Detail = "refused", err.Error()
	s.e.Audit(ctx, entry)
	return HandedOff{}, err
}

// sendHandoff leaves a handoff without a task: the message alone.
func (s *Service) sendHandoff(ctx context.Context, ho *handingOff, live bool) (HandedOff, error) {
	got, err := s.db.AddMessage(ctx, ho.m)
	if err != nil {
		return HandedOff{}, err
	}
	entry := ho.entry
	entry.Outcome, entry.Detail = "ok", "to "+ho.h.To+": "+ho.h.Title
	s.e.Audit(ctx, entry)
	s.publish(snag.HandoffEvent{From: ho.by, To: ho.h.To, Title: ho.h.Title})
	out := HandedOff{Message: got, Live: live}
	if !live {
		// Connected on another clone: the message reaches it there.
		out.Host = s.e.TeamHostOf(ctx, ho.h.To)
		out.Live = out.Host != ""
	}
	return out, nil
}

// readHandoffTask reads the task handed off and its lease, refusing when
// the addressee is not live here or the task is not held under a live
// lease (by from, for an agent).
func (s *Service) readHandoffTask(ctx context.Context, ho *handingOff, live bool) error {
	it, err := s.e.TaskOf(ctx, ho.h.Task)
	if err != nil {
		return err
	}
	ho.entry.TaskID = it.ID
	if !live {
		if host := s.e.TeamHostOf(ctx, ho.h.To); host != "" {
			return refuse(ErrNotLive, "not_live", "handoff: nothing moved: %s works on another clone (%s), where %s's file is not the one this clone rewrites. "+
				"Hand it off without the task (the message reaches them there), then release %s with a reason, and they claim it there", ho.h.To, host, it.Key, it.Key)
		}
		return refuse(ErrNotLive, "not_live", "handoff: nothing moved: %s has no live session, so %s stays with its holder. "+
			"Hand it to a connected agent (snag_context lists them), or release it with a reason", ho.h.To, it.Key)
	}
	if it.Status != queue.StatusClaimed {
		return refuse(engine.ErrTransition, "transition", "handoff: nothing moved: %s is %s, and only a claimed task's lease moves", it.Key, it.Status)
	}
	// Agent or person, the holder is checked under the engine's write
	// lock, then in the batch: the file's new bytes (the assignee) are
	// written with no lock.
	read, lease, err := s.e.HandoffLease(ctx, it.ID, ho.from)
	if read != nil {
		it = read
	}
	ho.it, ho.lease = it, lease
	if errors.Is(err, index.ErrNoLease) || errors.Is(err, index.ErrStale) {
		return refuse(engine.ErrNotHeld, "not_held", "handoff: nothing moved: %s is not held under a live lease", it.Key)
	}
	return err
}

// liveNamed is the live session named name, if one is.
func (s *Service) liveNamed(ctx context.Context, name string) (index.Session, bool) {
	ss, err := s.db.LiveSessions(ctx)
	if err != nil {
		return index.Session{}, false
	}
	for _, l := range ss {
		if l.Name == name {
			return l, true
		}
	}
	return index.Session{}, false
}
