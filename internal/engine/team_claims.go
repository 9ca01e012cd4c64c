package engine

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
)

// teamEndFirst tells the store, before the commit that finishes task id
// here (resolved, or sent to a person's review), that its lease ends
// done: what the store has heard is what counts. The end is recorded at
// the lease's epoch, so no clone can be granted a task whose file here
// says it is finished, even when snagd dies right after the commit, and a
// lease the store ended or granted again meanwhile (this clone cut off
// past the grace) refuses the finish with ErrStale. With the store out of
// reach nothing is committed: the caller says to try again.
//
// It returns undo, to call when the commit then fails or does not finish
// the task: the store takes the end back (Unend), the lease held again at
// its epoch when it still is here, else free. A task no agent of this
// clone holds is a person's move, told after its commit (teamMoved).
func (e *Engine) teamEndFirst(ctx context.Context, id, why string) (undo func(), err error) {
	undo = func() {}
	l, err := e.p.DB.LeaseOf(ctx, id)
	if err != nil || l.Detached || l.SessionID == 0 || l.Epoch == 0 {
		return undo, nil
	}
	t := e.team
	if err := e.teamReadyFor(ctx, claimConcern(l.SessionID, id)); err != nil {
		return undo, err
	}
	if err := t.s.End(ctx, id, l.Epoch, coord.Done, why); err != nil {
		return undo, e.teamErr(err)
	}
	t.mu.Lock()
	if t.endedFirst == nil {
		t.endedFirst = map[string]int64{}
	}
	t.endedFirst[id] = l.Epoch
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		if t.endedFirst[id] == l.Epoch {
			delete(t.endedFirst, id)
		}
		t.mu.Unlock()
		ctx := context.WithoutCancel(ctx)
		now, err := e.p.DB.LeaseOf(ctx, id)
		hold := err == nil && now.Epoch == l.Epoch && now.SessionID == l.SessionID
		if err := t.s.Unend(ctx, id, l.Epoch, coordSession(index.Session{ID: l.SessionID, Name: l.Holder}), hold); err != nil {
			// Sent again from the outbox once the store answers (after a
			// rejoin, too): a finish the store heard and this clone never
			// committed must not leave the task done for every clone. The
			// start's reconcile takes back one still held here meanwhile.
			e.log.Warn("the coordination store was told a task was finished, and the finish was not committed here: the end is taken back once the store answers", "task", id, "err", err)
			t.queue(teamOp{unend: &index.Ended{Lease: index.Lease{TaskID: id, Epoch: l.Epoch}}, why: "the finish was not committed"})
		}
	}, nil
}

// finishRefused is the refusal of a finish the store did not record
// (teamEndFirst's err): a lease the store ended or granted again is ended
// here too, as teamFence does. e.mu must not be held.
func (e *Engine) finishRefused(ctx context.Context, it *index.Item, l index.Lease, err error) *Error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.finishRefusedLocked(ctx, it, l, err)
}

// finishRefusedLocked is finishRefused with e.mu held.
func (e *Engine) finishRefusedLocked(ctx context.Context, it *index.Item, l index.Lease, err error) *Error {
	if errors.Is(err, ErrStale) && !e.closed.Load() {
		e.releaseLocked(ctx, it.ID, queue.System, l.Holder, "the shared lease ended: "+err.Error())
	}
	var r *Error
	if errors.As(err, &r) {
		return r
	}
	return refuse(ErrUnreachable, "coord_unreachable", "%s was not finished: %v", it.Key, err)
}

// teamEndFirstRetry is teamEndFirst for snagd's own finish (a verify's
// outcome), which no one waits to be answered: while the store is out of
// reach it tries again every beat, until the store hears it, refuses it,
// or snagd stops.
func (e *Engine) teamEndFirstRetry(ctx context.Context, id, why string) (undo func(), err error) {
	for {
		undo, err = e.teamEndFirst(ctx, id, why)
		if !errors.Is(err, ErrUnreachable) && !errors.Is(err, ErrStarting) {
			return undo, err
		}
		select {
		case <-ctx.Done():
			return undo, err
		case <-time.After(e.team.beat):
		}
	}
}

// endState is the shared state a lease of task id ends in, by the task's
// status here: free when it is open (or held again), done when it is
// resolved, cancelled, back in the inbox or waiting for a person's
// review, which no clone's agent may take.
func (e *Engine) endState(ctx context.Context, id string) string {
	it, err := e.p.DB.Get(ctx, queue.Ref{ID: id})
	if err != nil {
		return coord.Free
	}
	switch it.Status {
	case queue.StatusOpen, queue.StatusClaimed, queue.StatusVerifying:
		return coord.Free
	}
	return coord.Done
}

// teamMoved tells the store of a person's move of a task: reopened, it
// may be claimed through any clone again; resolved, cancelled, rejected
// or sent to review, through none.
func (e *Engine) teamMoved(t *queue.Task, by string) {
	if t == nil {
		return
	}
	state := coord.Done
	switch t.Status {
	case queue.StatusOpen:
		state = coord.Free
	case queue.StatusClaimed, queue.StatusVerifying:
		return
	}
	e.team.queue(teamOp{set: &teamSet{id: t.ID, key: t.Key, state: state}, why: "moved to " + string(t.Status) + " by " + by})
}

// teamClaimNext is claim-next in team mode: the store picks the first
// task of this clone's ready rows that no clone holds or resolved, and
// grants it; the claim by id then rewrites the file. A task that turns
// out not to be claimable here after all (blocked or changed since the
// rows were published) is given back and the next one tried.
func (e *Engine) teamClaimNext(ctx context.Context, s index.Session, force bool) (Claimed, error) {
	if e.Config().MaxPerSession() > 0 {
		held, err := e.p.DB.LeasesOf(ctx, s.ID)
		if err != nil {
			return Claimed{}, err
		}
		if refusal := e.atLimit(func(ref queue.Ref) (*index.Item, error) { return e.p.DB.Get(ctx, ref) }, held); refusal != nil {
			e.Audit(ctx, claimEntry(s, "", "refused", refusal.Message))
			return Claimed{}, refusal
		}
	}
	var tried []string
	republished := false
	// The tasks the session gave back are passed over while another is
	// ready: an agent that released one is not handed it again at once.
	gaveBack := e.gaveBackBy(s.ID)
	skipped := gaveBack
	for range 5 {
		if err := e.teamReadyFor(ctx, claimConcern(s.ID, "")); err != nil {
			return Claimed{}, err
		}
		pubs := e.team.pubs.Load()
		l, err := e.team.s.GrantNext(ctx, coordSession(s), slices.Concat(e.chosenIDs(), tried, skipped))
		if errors.Is(err, coord.ErrNoneReady) {
			row, rd, err := e.p.DB.Next(ctx)
			if err != nil {
				return Claimed{}, err
			}
			if row != nil && !republished {
				// A task ready here since the last publication (added,
				// released, reopened) is published now, and the grant
				// tried again; so it is when the publisher's loop
				// published it since the grant looked. An end of a lease
				// here that the store has not heard yet (a release just
				// made) is sent first: the store still holds that task.
				if e.team.waiting(func(op teamOp) bool { return op.ended != nil || op.set != nil }) {
					e.teamSend(ctx)
				}
				e.teamPublish(ctx)
				if e.team.pubs.Load() != pubs {
					republished = true
					continue
				}
			}
			if len(skipped) > 0 {
				// Nothing else is ready: a task it gave back may be
				// granted, and the answer says so.
				skipped = nil
				continue
			}
			reason := rd.String()
			if row != nil {
				reason = "nothing is ready: the tasks ready here are held or resolved through other clones"
			}
			return Claimed{Reason: reason}, nil
		}
		if err != nil {
			return Claimed{}, e.teamErr(err)
		}
		got, err := e.claim(ctx, s, queue.Ref{ID: l.TaskID}, force, &l)
		if err == nil && got.Task != nil && slices.Contains(gaveBack, got.Task.ID) {
			got.Note = "you released " + got.Task.Key + " earlier in this session and nothing else is ready: work on it only if what stopped you has changed; else say so to the person"
		}
		var r *Error
		if err == nil || !errors.As(err, &r) || errors.Is(err, ErrHolding) || errors.Is(err, ErrUnreachable) || errors.Is(err, ErrSessionEnded) {
			return got, err
		}
		tried = append(tried, l.TaskID)
	}
	return Claimed{Reason: "nothing is ready: the tasks tried were not claimable here (blocked or changed since); try again"}, nil
}

// teamUngrant gives back a shared lease that the claim it was taken for
// did not use.
func (e *Engine) teamUngrant(ctx context.Context, l *coord.Lease, s index.Session, why string) {
	if err := e.team.s.Release(ctx, l.TaskID, l.Epoch, s.ID, why); err != nil && !errors.Is(err, coord.ErrStale) {
		e.team.queue(teamOp{ended: &index.Ended{Lease: index.Lease{TaskID: l.TaskID, Epoch: l.Epoch, SessionID: s.ID}, Reason: why}})
	}
}

// teamGrant takes the shared lease of task it for session s, after the
// changes of the outbox it depends on are sent (claimConcern).
func (e *Engine) teamGrant(ctx context.Context, it *index.Item, s index.Session) (coord.Lease, error) {
	if err := e.teamReadyFor(ctx, claimConcern(s.ID, it.ID)); err != nil {
		return coord.Lease{}, err
	}
	l, err := e.team.s.Grant(ctx, it.ID, it.Key, coordSession(s))
	return l, e.teamErr(err)
}

// teamReady refuses a grant while this clone is cut off or its leases
// are being reconciled with the store, and sends the outbox.
func (e *Engine) teamReady(ctx context.Context) error { return e.teamReadyFor(ctx, nil) }

// teamReadyFor is teamReady for a grant that depends only on the changes
// of the outbox that concern says it does: when none waits, the outbox
// is left to its sender and the grant goes ahead at once. A claim's grant
// depends on its session's changes and its task's, not on the ends of
// other tasks: one of those the store has not heard of yet is still held
// there, so no grant can take it, and a later end under an old epoch is
// refused as stale. (Sending every end first made each claim wait for the
// whole outbox, and claims queued behind one another.)
func (e *Engine) teamReadyFor(ctx context.Context, concern func(teamOp) bool) error {
	if e.team.gaveUp.Load() {
		return e.teamErr(coord.ErrUnreachable)
	}
	if !e.team.reconciled.Load() {
		// Until its leases agree with the store's, a grant could be taken
		// for one the reconcile is about to end. The first reconcile is
		// part of starting, and is waited out as the first rescan is; a
		// later one follows a rejoin, and is the store's news.
		if !e.team.started.Load() {
			return refuse(ErrStarting, "starting", "snagd is reconciling its leases with the coordination store: try again in a moment")
		}
		return refuse(ErrUnreachable, "coord_unreachable", "snagd is reconciling its leases with the coordination store (it joined again after being cut off): try again in a moment")
	}
	if concern != nil && !e.team.waiting(concern) {
		e.team.wake()
		return nil
	}
	if err := e.teamSend(ctx); err != nil {
		return e.teamErr(err)
	}
	return nil
}

// waiting reports whether a change concern says matters waits in the
// outbox.
func (t *team) waiting(concern func(teamOp) bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.ContainsFunc(t.outbox, concern)
}

// claimConcern says which changes of the outbox a grant of task id (any
// task when id is "") to session sid must come after: the session's own
// (its registration, its end, a lease it adopted, its file claims) and
// the task's.
func claimConcern(sid int64, id string) func(teamOp) bool {
	return func(op teamOp) bool {
		switch {
		case op.register != nil:
			return op.register.ID == sid
		case op.endID != 0:
			return op.endID == sid
		case op.adopt != nil:
			return op.adopt.SessionID == sid || op.adopt.TaskID == id
		case op.files != nil:
			return op.files.session == sid
		case op.ended != nil:
			return id != "" && op.ended.TaskID == id
		case op.set != nil:
			return id != "" && op.set.id == id
		case op.unend != nil:
			return id != "" && op.unend.TaskID == id
		}
		return false
	}
}

// teamFence checks, before an agent's resolve, that the store still has
// the session's lease of the task: one it ended (this clone was cut off,
// or a person took it back through another clone) is ended here too.
func (e *Engine) teamFence(ctx context.Context, ref queue.Ref, s index.Session) error {
	it, err := e.p.DB.Get(ctx, ref)
	if err != nil {
		return nil // the resolve's own reads say so
	}
	l, err := e.p.DB.LeaseOf(ctx, it.ID)
	if err != nil || l.SessionID != s.ID {
		return nil // not held by s here: the resolve's own checks refuse it
	}
	// Until the leases are reconciled, the store may have this one free
	// while the reconcile is about to take it back at its epoch: a check
	// now would take that for another clone's and release it.
	if err := e.teamReadyFor(ctx, nil); err != nil {
		return err
	}
	_, err = e.team.s.Check(ctx, it.ID, l.Epoch, s.ID)
	if errors.Is(err, coord.ErrStale) {
		e.mu.Lock()
		if !e.closed.Load() {
			e.releaseLocked(ctx, it.ID, queue.System, l.Holder, "the shared lease ended: "+err.Error())
		}
		e.mu.Unlock()
	}
	return e.teamErr(err)
}

// teamAlias is the next alias number of kind ("task" or "note") from the
// live state's sequence (the repository's, or a team's workspace's), never
// below floor: worktrees and clones adding at once on different branches
// never mint the same alias.
func (e *Engine) teamAlias(ctx context.Context, kind string, floor int) (int, error) {
	n, err := e.team.s.NextAlias(ctx, kind, int64(floor))
	if err != nil {
		return 0, e.teamErr(err)
	}
	return int(n), nil
}
