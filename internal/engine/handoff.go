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
	ho := newHandingOff(from, by, h)
	if err := ho.refusal(); err != nil {
		return e.refuseHandoff(ctx, ho, err)
	}
	var live bool
	ho.to, live = e.liveNamed(ctx, ho.h.To)
	if ho.h.Task == "" {
		return e.sendHandoff(ctx, ho, live)
	}
	if err := e.readHandoffTask(ctx, ho, live); err != nil {
		return e.refuseHandoff(ctx, ho, err)
	}
	// The lease moves in the live state first, under a new epoch; snag.db
	// mirrors it. Should the file's write fail, it moves back.
	if err := e.teamHandoffTransfer(ctx, ho); err != nil {
		return e.refuseHandoff(ctx, ho, err)
	}
	defer e.teamHandoffGiveBack(ctx, ho)
	got, granted, err := e.commitHandoff(ctx, ho)
	if err != nil {
		return e.refuseHandoff(ctx, ho, err)
	}
	ho.shared = nil // taken: it stays moved
	it := ho.it
	e.hub.Publish(snag.LeaseEvent{Task: it.Key, Holder: ho.h.To, Epoch: granted.Epoch, Handoff: true})
	e.hub.Publish(snag.HandoffEvent{From: ho.by, To: ho.h.To, Title: ho.h.Title, Task: it.Key})
	e.writePlan(ctx)
	return HandedOff{Message: got, Moved: true, Key: it.Key, Epoch: granted.Epoch, Live: true}, nil
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
	// shared is the lease the live state moved to the addressee, until
	// snag.db has it too.
	shared *coord.Lease
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
		return refuse(ErrInvalid, "no_addressee", "handoff: name the agent it is for (snag agents lists them)")
	case h.Title == "":
		return refuse(ErrInvalid, "no_title", "handoff: give it a title: what the other agent is to do")
	case len(h.Title) > 200:
		return refuse(ErrInvalid, "long_title", "handoff: the title is over 200 bytes: keep it short and put the rest in the body")
	case len(h.Body) > 8000:
		return refuse(ErrInvalid, "long_body", "handoff: the body is over 8000 bytes: write a note (snag_note) and name it")
	case ho.from != nil && h.To == ho.from.Name:
		return refuse(ErrInvalid, "to_self", "handoff: %s is you: hand off to another agent (snag_context lists them)", h.To)
	}
	return nil
}

// refuseHandoff audits a refused handoff and answers with its error.
func (e *Engine) refuseHandoff(ctx context.Context, ho *handingOff, err error) (HandedOff, error) {
	entry := ho.entry
	entry.Outcome, entry.Detail = "refused", err.Error()
	e.Audit(ctx, entry)
	return HandedOff{}, err
}

// sendHandoff leaves a handoff without a task: the message alone.
func (e *Engine) sendHandoff(ctx context.Context, ho *handingOff, live bool) (HandedOff, error) {
	got, err := e.p.DB.AddMessage(ctx, ho.m)
	if err != nil {
		return HandedOff{}, err
	}
	entry := ho.entry
	entry.Outcome, entry.Detail = "ok", "to "+ho.h.To+": "+ho.h.Title
	e.Audit(ctx, entry)
	e.hub.Publish(snag.HandoffEvent{From: ho.by, To: ho.h.To, Title: ho.h.Title})
	out := HandedOff{Message: got, Live: live}
	if !live {
		// Connected on another clone: the message reaches it there.
		out.Host = e.teamHostOf(ctx, ho.h.To)
		out.Live = out.Host != ""
	}
	return out, nil
}

// readHandoffTask reads the task handed off and its lease, refusing when
// the addressee is not live here or the task is not held under a live
// lease (by from, for an agent).
func (e *Engine) readHandoffTask(ctx context.Context, ho *handingOff, live bool) error {
	it, err := e.taskOf(ctx, ho.h.Task)
	if err != nil {
		return err
	}
	ho.entry.TaskID = it.ID
	if !live {
		if host := e.teamHostOf(ctx, ho.h.To); host != "" {
			return refuse(ErrNotLive, "not_live", "handoff: nothing moved: %s works on another clone (%s), where %s's file is not the one this clone rewrites. "+
				"Hand it off without the task (the message reaches them there), then release %s with a reason, and they claim it there", ho.h.To, host, it.Key, it.Key)
		}
		return refuse(ErrNotLive, "not_live", "handoff: nothing moved: %s has no live session, so %s stays with its holder. "+
			"Hand it to a connected agent (snag_context lists them), or release it with a reason", ho.h.To, it.Key)
	}
	if it.Status != queue.StatusClaimed {
		return refuse(ErrTransition, "transition", "handoff: nothing moved: %s is %s, and only a claimed task's lease moves", it.Key, it.Status)
	}
	// Agent or person, the holder is checked under e.mu, then in the
	// batch: the file's new bytes (the assignee) are written with no lock.
	e.mu.Lock()
	defer e.mu.Unlock()
	err = e.p.DB.Read(ctx, func(tx *index.Tx) (err error) {
		if it, err = tx.Get(queue.Ref{ID: it.ID}); err != nil {
			return err
		}
		if ho.from != nil {
			if err := holds(tx, it, *ho.from, 0); err != nil {
				return err
			}
		}
		ho.lease, err = tx.LeaseOf(it.ID)
		return err
	})
	ho.it = it
	if errors.Is(err, index.ErrNoLease) || errors.Is(err, index.ErrStale) {
		return refuse(ErrNotHeld, "not_held", "handoff: nothing moved: %s is not held under a live lease", it.Key)
	}
	return err
}

// teamHandoffTransfer moves the task's lease to the addressee in the
// store, under a new epoch.
func (e *Engine) teamHandoffTransfer(ctx context.Context, ho *handingOff) error {
	if err := e.teamReady(ctx); err != nil {
		return err
	}
	l, err := e.team.s.Transfer(ctx, ho.it.ID, ho.lease.Epoch, coordSession(ho.to))
	if err != nil {
		return e.teamErr(err)
	}
	ho.shared = &l
	return nil
}

// teamHandoffGiveBack moves the lease back to its holder in the store
// when snag.db did not take the handoff (ho.shared still set).
func (e *Engine) teamHandoffGiveBack(ctx context.Context, ho *handingOff) {
	if ho.shared == nil {
		return
	}
	back := coord.Session{ID: ho.lease.SessionID, Name: ho.lease.Holder}
	if _, err := e.team.s.Transfer(ctx, ho.it.ID, ho.shared.Epoch, back); err != nil {
		e.log.Error("give a handoff's lease back in the coordination store", "task", ho.it.Key, "err", err)
	}
}

// commitHandoff rewrites the task's file for the addressee and, in the
// same batch, ends the lease, grants it to the addressee (at the live
// state's epoch, ho.shared) and leaves the message. The holder is checked again
// in the batch.
func (e *Engine) commitHandoff(ctx context.Context, ho *handingOff) (got index.Message, granted index.Lease, err error) {
	it, lease, to, from := ho.it, ho.lease, ho.to, ho.from
	mv, err := e.prepareMove(it, ho.h.To, Step{queue.ActRelease, ho.actor}, Step{queue.ActClaim, queue.Agent})
	if err != nil {
		return got, granted, err
	}
	why := "handed off to " + ho.h.To + " by " + ho.by
	m := ho.m
	m.TaskID = it.ID
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
		if granted, err = tx.GrantEpoch(it.ID, to.ID, to.Name, ho.shared.Epoch); err != nil {
			return err
		}
		if _, err = mv.written(tx, e.p.Tasks); err != nil {
			return err
		}
		if got, err = tx.AddMessage(m); err != nil {
			return err
		}
		return tx.Audit(snag.AuditEntry{SessionID: ho.entry.SessionID, Actor: ho.actor, Agent: ho.by, Action: "handoff", TaskID: it.ID,
			Outcome: "ok", Detail: fmt.Sprintf("%s to %s, epoch %d: %s", it.Key, ho.h.To, granted.Epoch, ho.h.Title)})
	}, nil)
	return got, granted, err
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
