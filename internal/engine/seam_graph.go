package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// The seam of the graph service (internal/engine/graph): what the
// decision graph, the plans and the handoffs need of the engine. The
// service keeps the policy (what a note, a link, a plan or a handoff may
// be, and each refusal's words); the engine keeps the keys, the live
// state's side and the one move of the graph, a handoff's transfer of a
// lease.

// SyncNotes brings the notes index in step with the folders of every
// worktree, unless it was moments ago and no folder has changed since;
// force always does.
func (e *Engine) SyncNotes(ctx context.Context, force bool) error { return e.syncNotes(ctx, force) }

// NextNoteKey is the first note key to try: past every key indexed, on
// disk in any notes folder, in the repository's other worktrees and
// handed out by the live state.
func (e *Engine) NextNoteKey(ctx context.Context) (int, error) { return e.nextNoteKey(ctx) }

// PlanView reads the plan slug and counts its tasks; a file that does
// not read has its problem in the view.
func (e *Engine) PlanView(ctx context.Context, slug string) PlanView { return e.planView(ctx, slug) }

// SessionRoot is tree's root when it is another worktree of the
// repository snagd serves with a .snag/ folder; else "".
func (e *Engine) SessionRoot(tree string) string { return e.sessionRoot(tree) }

// TaskOf reads the task ref names, or refuses naming the fix.
func (e *Engine) TaskOf(ctx context.Context, ref string) (*index.Item, error) {
	return e.taskOf(ctx, ref)
}

// TeamPost publishes a note (or an inbox item) added here, for the team
// to read before git carries its file.
func (e *Engine) TeamPost(m coord.Message) { e.teamPost(m) }

// TeamHostOf is the machine of the clone where the agent name is
// connected, when that is another clone than this one; else "".
func (e *Engine) TeamHostOf(ctx context.Context, name string) string { return e.teamHostOf(ctx, name) }

// BranchHolder is who holds a branch's write lease, and until when.
type BranchHolder struct {
	Holder  string // the session's name, with " on <host>" when it is on another machine
	Expires time.Time
}

// TakeBranch takes or renews the session's write lease on branch for ttl:
// first in the live state (an agent on another clone writing the same
// branch's graph holds it too), then in snag.db, where the session's
// branch is noted. It answers false and the holder when another session
// holds it; an error is a refusal.
func (e *Engine) TakeBranch(ctx context.Context, session int64, who, branch string, ttl time.Duration) (BranchHolder, bool, *Error) {
	shared, ok, err := e.team.s.TakeBranch(ctx, branch, coord.Session{ID: session, Name: who}, ttl)
	if err != nil {
		var r *Error
		if errors.As(e.teamErr(err), &r) {
			return BranchHolder{}, false, r
		}
		return BranchHolder{}, false, &Error{Kind: ErrInvalid, Code: "branch_lease", Message: err.Error()}
	}
	if !ok {
		holder := shared.Holder
		if shared.Clone != e.team.s.Clone() && shared.Host != "" && e.across() {
			holder += " on " + shared.Host
		}
		return BranchHolder{Holder: holder, Expires: shared.Expires}, false, nil
	}
	held, ok, err := e.p.DB.TakeBranchLease(ctx, index.BranchLease{Workspace: e.Workspace(), Branch: branch, SessionID: session, Holder: who}, ttl)
	if err != nil {
		return BranchHolder{}, false, &Error{Kind: ErrInvalid, Code: "branch_lease", Message: err.Error()}
	}
	if !ok {
		return BranchHolder{Holder: held.Holder, Expires: held.Expires}, false, nil
	}
	e.p.DB.SetSessionBranch(ctx, session, branch)
	return BranchHolder{}, true, nil
}

// HandoffLease reads the task id and its live lease under the write
// lock, checking that from (nil for a person) holds it. It wraps
// index.ErrNoLease or index.ErrStale when no live lease holds the task.
func (e *Engine) HandoffLease(ctx context.Context, id string, from *index.Session) (*index.Item, index.Lease, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var it *index.Item
	var lease index.Lease
	err := e.p.DB.Read(ctx, func(tx *index.Tx) (err error) {
		if it, err = tx.Get(queue.Ref{ID: id}); err != nil {
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
	return it, lease, err
}

// Handover is a handoff's move: the task's lease (as HandoffLease read
// it) goes from its holder to the session To, and the message is left in
// the same batch.
type Handover struct {
	Task  *index.Item
	Lease index.Lease
	From  *index.Session // the agent handing off, whose lease is checked again; nil for a person
	To    index.Session
	Actor queue.Actor // who hands off (the release's step)
	By    string      // their name
	// Message is the handoff's message (its task is set here); none is
	// left when its title is empty.
	Message index.Message
	// Action names the move in the audit log: "handoff" when empty.
	Action string
}

// HandOver moves the task's lease to h.To: in the live state first under
// a new epoch, then in one batch the task's file is rewritten for the
// addressee, the lease ended and granted to it at that epoch, and the
// message left. Should the batch fail, the live state's lease goes back
// to its holder. It answers the message and the new lease.
func (e *Engine) HandOver(ctx context.Context, h Handover) (index.Message, index.Lease, error) {
	if err := e.teamReady(ctx); err != nil {
		return index.Message{}, index.Lease{}, err
	}
	shared, err := e.team.s.Transfer(ctx, h.Task.ID, h.Lease.Epoch, coordSession(h.To))
	if err != nil {
		return index.Message{}, index.Lease{}, e.teamErr(err)
	}
	got, granted, err := e.commitHandover(ctx, h, shared.Epoch)
	if err != nil {
		back := coord.Session{ID: h.Lease.SessionID, Name: h.Lease.Holder}
		if _, err := e.team.s.Transfer(ctx, h.Task.ID, shared.Epoch, back); err != nil {
			e.log.Error("give a handoff's lease back in the coordination store", "task", h.Task.Key, "err", err)
		}
		return index.Message{}, index.Lease{}, err
	}
	e.hub.Publish(snag.LeaseEvent{Task: h.Task.Key, Holder: h.To.Name, Epoch: granted.Epoch, Handoff: true})
	e.writePlan(ctx)
	return got, granted, nil
}

// commitHandover rewrites the task's file for the addressee and, in the
// same batch, ends the lease, grants it to the addressee at the live
// state's epoch and leaves the message. The holder is checked again in
// the batch.
func (e *Engine) commitHandover(ctx context.Context, h Handover, epoch int64) (got index.Message, granted index.Lease, err error) {
	it, lease, to, from := h.Task, h.Lease, h.To, h.From
	mv, err := e.prepareMove(it, to.Name, Step{queue.ActRelease, h.Actor}, Step{queue.ActClaim, queue.Agent})
	if err != nil {
		return got, granted, err
	}
	why := "handed off to " + to.Name + " by " + h.By
	action := "handoff"
	if h.Action != "" {
		action, why = h.Action, h.Action+" by "+to.Name
	}
	m := h.Message
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
		if granted, err = tx.GrantEpoch(it.ID, to.ID, to.Name, epoch); err != nil {
			return err
		}
		if _, err = mv.written(tx, e.p.Tasks); err != nil {
			return err
		}
		if m.Title != "" {
			if got, err = tx.AddMessage(m); err != nil {
				return err
			}
		}
		a := snag.AuditEntry{Actor: h.Actor, Agent: h.By, Action: action, TaskID: it.ID,
			Outcome: "ok", Detail: fmt.Sprintf("%s to %s, epoch %d: %s", it.Key, to.Name, granted.Epoch, m.Title)}
		if from != nil {
			a.SessionID = from.ID
		}
		return tx.Audit(a)
	}, nil)
	return got, granted, err
}
