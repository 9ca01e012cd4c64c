package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/snagdev/snag/internal/coord"
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
func (e *Engine) Handoff(ctx context.Context, from *index.Session, by string, h ops.HandoffRequest) (HandedOff, error) {
	actor := queue.Person
	if from != nil {
		actor, by = queue.Agent, from.Name
	}
	entry := snag.AuditEntry{Actor: actor, Agent: by, Action: "handoff"}
	if from != nil {
		entry.SessionID = from.ID
	}
	refused := func(err error) (HandedOff, error) {
		entry.Outcome, entry.Detail = "refused", err.Error()
		e.Audit(ctx, entry)
		return HandedOff{}, err
	}
	h.To = strings.ToUpper(strings.TrimSpace(h.To))
	h.Title = strings.TrimSpace(h.Title)
	switch {
	case h.To == "":
		return refused(refuse(ErrInvalid, "no_addressee", "handoff: name the agent it is for (snag agents lists them)"))
	case h.Title == "":
		return refused(refuse(ErrInvalid, "no_title", "handoff: give it a title: what the other agent is to do"))
	case len(h.Title) > 200:
		return refused(refuse(ErrInvalid, "long_title", "handoff: the title is over 200 bytes: keep it short and put the rest in the body"))
	case len(h.Body) > 8000:
		return refused(refuse(ErrInvalid, "long_body", "handoff: the body is over 8000 bytes: write a note (snag_note) and name it"))
	case from != nil && h.To == from.Name:
		return refused(refuse(ErrInvalid, "to_self", "handoff: %s is you: hand off to another agent (snag_context lists them)", h.To))
	}
	to, live := e.liveNamed(ctx, h.To)
	m := index.Message{Kind: index.MessageHandoff, From: by, To: h.To, Title: h.Title, Body: h.Body}
	if from != nil {
		m.FromSession = from.ID
	}
	if h.Task == "" {
		got, err := e.p.DB.AddMessage(ctx, m)
		if err != nil {
			return HandedOff{}, err
		}
		entry.Outcome, entry.Detail = "ok", "to "+h.To+": "+h.Title
		e.Audit(ctx, entry)
		e.hub.Publish("handoff", map[string]any{"from": by, "to": h.To, "title": h.Title})
		out := HandedOff{Message: got, Live: live}
		if !live {
			// Connected on another clone: the message reaches it there.
			out.Host = e.teamHostOf(ctx, h.To)
			out.Live = out.Host != ""
		}
		return out, nil
	}
	it, err := e.taskOf(ctx, h.Task)
	if err != nil {
		return refused(err)
	}
	entry.TaskID = it.ID
	if !live {
		if host := e.teamHostOf(ctx, h.To); host != "" {
			return refused(refuse(ErrNotLive, "not_live", "handoff: nothing moved: %s works on another clone (%s), where %s's file is not the one this clone rewrites. "+
				"Hand it off without the task (the message reaches them there), then release %s with a reason, and they claim it there", h.To, host, it.Key, it.Key))
		}
		return refused(refuse(ErrNotLive, "not_live", "handoff: nothing moved: %s has no live session, so %s stays with its holder. "+
			"Hand it to a connected agent (snag_context lists them), or release it with a reason", h.To, it.Key))
	}
	if it.Status != queue.StatusClaimed {
		return refused(refuse(ErrTransition, "transition", "handoff: nothing moved: %s is %s, and only a claimed task's lease moves", it.Key, it.Status))
	}
	// Agent or person, the holder is checked under e.mu, then in the
	// batch: the file's new bytes (the assignee) are written with no lock.
	var lease index.Lease
	err = func() error {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.p.DB.Read(ctx, func(tx *index.Tx) (err error) {
			if it, err = tx.Get(queue.Ref{ID: it.ID}); err != nil {
				return err
			}
			if from != nil {
				if err := holds(tx, it, *from, 0); err != nil {
					return err
				}
			}
			lease, err = tx.LeaseOf(it.ID)
			return err
		})
	}()
	if errors.Is(err, index.ErrNoLease) || errors.Is(err, index.ErrStale) {
		return refused(refuse(ErrNotHeld, "not_held", "handoff: nothing moved: %s is not held under a live lease", it.Key))
	}
	if err != nil {
		return refused(err)
	}
	var shared *coord.Lease
	if e.team != nil {
		// The lease moves in the store first, under a new epoch; snag.db
		// mirrors it. Should the file's write fail, it moves back.
		if err := e.teamReady(ctx); err != nil {
			return refused(err)
		}
		l, err := e.team.s.Transfer(ctx, it.ID, lease.Epoch, coordSession(to))
		if err != nil {
			return refused(e.teamErr(err))
		}
		shared = &l
		defer func() {
			if shared != nil {
				back := coord.Session{ID: lease.SessionID, Name: lease.Holder}
				if _, err := e.team.s.Transfer(ctx, it.ID, l.Epoch, back); err != nil {
					e.log.Error("give a handoff's lease back in the coordination store", "task", it.Key, "err", err)
				}
			}
		}()
	}
	mv, err := e.prepareMove(it, h.To, Step{queue.ActRelease, actor}, Step{queue.ActClaim, queue.Agent})
	if err != nil {
		return refused(err)
	}
	why := "handed off to " + h.To + " by " + by
	m.TaskID = it.ID
	var got index.Message
	var granted index.Lease
	err = e.commit(ctx, []*move{mv}, func(tx *index.Tx) error {
		if from != nil {
			if err := holds(tx, it, *from, 0); err != nil {
				return err
			}
		} else if l, err := tx.LeaseOf(it.ID); err != nil || l.Epoch != lease.Epoch {
			return fmt.Errorf("%w: %s changed hands meanwhile", index.ErrStale, it.Key)
		}
		return mv.swap()
	}, func(tx *index.Tx) (err error) {
		if _, _, err = tx.End(it.ID, why); err != nil {
			return err
		}
		if shared != nil {
			granted, err = tx.GrantEpoch(it.ID, to.ID, to.Name, shared.Epoch)
		} else {
			granted, err = tx.Grant(it.ID, to.ID, to.Name, false)
		}
		if err != nil {
			return err
		}
		if _, err = mv.written(tx, e.p.Tasks); err != nil {
			return err
		}
		if got, err = tx.AddMessage(m); err != nil {
			return err
		}
		return tx.Audit(snag.AuditEntry{SessionID: entry.SessionID, Actor: actor, Agent: by, Action: "handoff", TaskID: it.ID,
			Outcome: "ok", Detail: fmt.Sprintf("%s to %s, epoch %d: %s", it.Key, h.To, granted.Epoch, h.Title)})
	}, nil)
	if err != nil {
		return refused(err)
	}
	shared = nil // taken: it stays moved
	e.hub.Publish("lease", map[string]any{"task": it.Key, "holder": h.To, "epoch": granted.Epoch, "handoff": true})
	e.hub.Publish("handoff", map[string]any{"from": by, "to": h.To, "title": h.Title, "task": it.Key})
	e.writePlan(ctx)
	return HandedOff{Message: got, Moved: true, Key: it.Key, Epoch: granted.Epoch, Live: true}, nil
}

// liveNamed is the live session named name, if one is.
func (e *Engine) liveNamed(ctx context.Context, name string) (index.Session, bool) {
	ss, err := e.p.DB.LiveSessions(ctx)
	if err != nil {
		return index.Session{}, false
	}
	for _, s := range ss {
		if s.Name == name {
			return s, true
		}
	}
	return index.Session{}, false
}
