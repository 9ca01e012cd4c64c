package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// Claimed is a claim's answer: the task claimed with its lease's epoch,
// or, when nothing was ready, no task and why.
type Claimed struct {
	Task   *index.Row
	Epoch  int64
	Reason string
	// Note says more about the task claimed: that the session had given
	// it back, and nothing else was ready.
	Note string
	// Worktree and Branch are the git worktree made for the lease, when
	// the claim asked for one (the worktrees service's Claim).
	Worktree string
	Branch   string
}

// Claim gives session s a lease on the task ref, or with ref nil on the
// next ready task, and marks its file claimed: the lease, the file's swap,
// its index row and the audit entry are one transaction. Force claims a
// blocked task. A holder that claims its own task again gets its lease as
// it is.
//
// The lease is granted in the live state first and mirrored here with
// its epoch; a claim of the next task lets the live state choose among
// this view's ready tasks (teamClaimNext).
func (e *Engine) Claim(ctx context.Context, s index.Session, ref *queue.Ref, force bool) (Claimed, error) {
	if ref == nil {
		return e.teamClaimNext(ctx, s, force)
	}
	return e.claim(ctx, s, *ref, force, nil)
}

// claim is Claim of task ref; pre is the live state's lease a claim of
// the next task was granted for it (teamClaimNext), given back when the
// claim does not use it.
func (e *Engine) claim(ctx context.Context, s index.Session, ref queue.Ref, force bool, pre *coord.Lease) (got Claimed, err error) {
	if pre != nil {
		defer func() { e.ungrantUntaken(ctx, pre, s, got, err) }()
	}
	it, got, err := e.chooseClaim(ctx, s, ref, force)
	if it == nil || err != nil {
		return got, err
	}
	defer e.claimDone(it.ID)
	if r := e.opts.Repository; r != nil {
		// No other worktree of the repository holds the task, nor can take
		// it until this claim's lease row is committed or the claim fails.
		release, err := r.reserve(ctx, e, it.ID)
		if err != nil {
			return e.refuseClaim(ctx, s, it.ID, err)
		}
		defer release()
	}
	if pre == nil {
		l, err := e.teamGrant(ctx, it, s)
		if err != nil {
			return e.refuseClaim(ctx, s, it.ID, err)
		}
		pre = &l
		defer func() { e.ungrantUntaken(ctx, &l, s, got, err) }()
	}
	// The new bytes are written and synced with no lock held; the grant,
	// the swap and the rows are made in the next batch (commit.go).
	m, err := e.prepareMove(it, s.Name, Step{queue.ActClaim, queue.Agent})
	if err != nil {
		return e.claimUnprepared(ctx, s, it.ID, err)
	}
	lease, moved, again, err := e.commitClaim(ctx, s, it.ID, m, pre)
	if err != nil {
		return e.refuseClaim(ctx, s, it.ID, err)
	}
	if !again {
		e.hub.Publish(snag.LeaseEvent{Task: it.Key, Holder: s.Name, Epoch: lease.Epoch})
		e.writePlan(ctx)
	}
	// A claim changes the file's status and assignee alone, and the row
	// was brought in step with the file in the transaction: the row as it
	// was, with those two, is the row as it is, without another read.
	row := it.Row
	row.Status, row.Assignee = moved.Status, moved.Assignee
	return Claimed{Task: &row, Epoch: lease.Epoch}, nil
}

// ungrantUntaken gives back the shared lease l granted for a claim by s
// that did not take it: the claim failed (err), found nothing, or got
// another epoch.
func (e *Engine) ungrantUntaken(ctx context.Context, l *coord.Lease, s index.Session, got Claimed, err error) {
	if err != nil || got.Task == nil || got.Epoch != l.Epoch {
		e.teamUngrant(ctx, l, s, "the claim did not take it")
	}
}

// refuseClaim audits a refused claim by s of task id, unless the index is
// busy or closed (it would keep the audit waiting too), and answers with
// its error.
func (e *Engine) refuseClaim(ctx context.Context, s index.Session, id string, err error) (Claimed, error) {
	if !index.Busy(err) && !errors.Is(err, errClosed) {
		e.Audit(ctx, claimEntry(s, id, "refused", err.Error()))
	}
	return Claimed{}, err
}

// claimUnprepared answers a claim whose file could not be prepared (err).
// Another's grant may have committed after this claim chose the task: the
// file then holds its claim. The claim is answered as it would have been
// had it come after.
func (e *Engine) claimUnprepared(ctx context.Context, s index.Session, id string, err error) (Claimed, error) {
	got, held, ok := e.claimedMeanwhile(ctx, s, id)
	switch {
	case !ok:
		return e.refuseClaim(ctx, s, id, err)
	case held != nil:
		return e.refuseClaim(ctx, s, id, held)
	}
	return got, nil
}

// commitClaim grants s the lease on task id and swaps in its claimed file
// (m) in the next batch, at the epoch of the live state's lease pre.
// again says s already held the task (its own claim beside this
// one was granted first): the lease is that one, as it is.
func (e *Engine) commitClaim(ctx context.Context, s index.Session, id string, m *move, pre *coord.Lease) (lease index.Lease, moved *queue.Task, again bool, err error) {
	err = e.commitWrite(&write{ctx: ctx, moves: []*move{m}, check: func(tx *index.Tx) error {
		var err error
		lease, again, err = e.checkClaim(tx, s, id, m)
		return err
	}, rows: func(tx *index.Tx) (err error) {
		if again {
			moved = m.moved
			return tx.Audit(claimEntry(s, id, "ok", fmt.Sprintf("already held, epoch %d", lease.Epoch)))
		}
		lease, moved, err = e.grantClaim(tx, s, id, m, pre)
		return err
	}})
	return lease, moved, again, err
}

// checkClaim makes a claim's checks in its batch, then swaps in its file:
// s's own lease on task id (again, with that lease), the session's count
// of leases, and another's lease on the task.
func (e *Engine) checkClaim(tx *index.Tx, s index.Session, id string, m *move) (own index.Lease, again bool, err error) {
	l, err := tx.LeaseOf(id)
	switch {
	case err == nil && l.SessionID == s.ID:
		// Its own claim of the task, under way beside this one, was
		// granted first: this one gets that lease, as it is.
		return l, true, nil
	case err != nil && !errors.Is(err, index.ErrNoLease):
		return index.Lease{}, false, err
	}
	// The session's count is made here, after every grant before this
	// one: its other claims under way may each be refused or granted.
	if refusal := e.claimLimit(tx, s); refusal != nil {
		return index.Lease{}, false, refusal
	}
	if err == nil {
		return index.Lease{}, false, fmt.Errorf("%w: %s holds it", index.ErrHeld, l.Holder)
	}
	return index.Lease{}, false, m.swap()
}

// claimLimit refuses a claim by s when it holds as many leases as the
// project allows one session, or when they cannot be counted.
func (e *Engine) claimLimit(tx *index.Tx, s index.Session) error {
	if limit := e.Config().MaxPerSession(); limit <= 0 {
		return nil
	}
	held, err := tx.LeasesOf(s.ID)
	if err != nil {
		return err
	}
	if refusal := e.atLimit(tx.Get, held); refusal != nil {
		return refusal
	}
	return nil
}

// grantClaim writes a claim's rows: s's lease on task id at the epoch
// the live state granted (pre), the claimed file's row (m), its base for
// a later merge, and the audit entry.
func (e *Engine) grantClaim(tx *index.Tx, s index.Session, id string, m *move, pre *coord.Lease) (lease index.Lease, moved *queue.Task, err error) {
	if lease, err = tx.GrantEpoch(id, s.ID, s.Name, pre.Epoch); err != nil {
		return lease, nil, err
	}
	if moved, err = m.written(tx, e.p.Tasks); err != nil {
		return lease, nil, err
	}
	if m.wrote.Info != nil {
		if err := tx.SetBase(id, lease.Epoch, m.wrote.Old, digest(m.wrote.New)); err != nil {
			return lease, nil, err
		}
	}
	return lease, moved, tx.Audit(claimEntry(s, id, "ok", fmt.Sprintf("epoch %d", lease.Epoch)))
}

// chooseClaim is the part of a claim made under e.mu: it reads task ref,
// checks that s may claim it, and marks it chosen until claimDone. With
// no task to claim it returns none, and the answer (the holder's own
// lease) or the refusal.
func (e *Engine) chooseClaim(ctx context.Context, s index.Session, ref queue.Ref, force bool) (*index.Item, Claimed, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, err := e.readChoice(ctx, s, ref)
	if err != nil {
		return nil, Claimed{}, err
	}
	it := c.it
	if err := unclaimable(it, force); err != nil {
		return nil, Claimed{}, err
	}
	if c.ownErr == nil && c.own.SessionID == s.ID {
		// The holder claims its own task again (a retry, or a lease given
		// back to it by a person's save): it gets its lease, as it is.
		e.Audit(ctx, claimEntry(s, it.ID, "ok", fmt.Sprintf("already held, epoch %d", c.own.Epoch)))
		return nil, Claimed{Task: &it.Row, Epoch: c.own.Epoch}, nil
	}
	if err := e.grantRefusal(ctx, c); err != nil {
		e.Audit(ctx, claimEntry(s, it.ID, "refused", err.Error()))
		return nil, Claimed{}, err
	}
	e.claimMu.Lock()
	defer e.claimMu.Unlock()
	e.claiming[it.ID]++
	return it, Claimed{}, nil
}

// claimChoice is what a claim read under e.mu: the task, its lease (or
// the error reading it), and the leases the session holds when the
// project bounds them.
type claimChoice struct {
	it     *index.Item
	own    index.Lease
	ownErr error
	held   []index.Lease
}

// readChoice reads the task ref a claim by s chooses, with its lease and
// the session's. The checks read on the writer's connection, whose cache
// the claims before this one kept warm (index.DB.Read). e.mu must be held.
func (e *Engine) readChoice(ctx context.Context, s index.Session, ref queue.Ref) (claimChoice, error) {
	var c claimChoice
	err := e.p.DB.Read(ctx, func(tx *index.Tx) error {
		var err error
		if c.it, err = tx.Get(ref); err != nil {
			return err
		}
		c.own, c.ownErr = tx.LeaseOf(c.it.ID)
		if e.Config().MaxPerSession() > 0 {
			c.held, _ = tx.LeasesOf(s.ID) // a failed count leaves the claim to the grant's own checks
		}
		return nil
	})
	return c, err
}

// unclaimable refuses a claim of a task whose file is missing, or that is
// blocked (unless forced).
func unclaimable(it *index.Item, force bool) error {
	if it.State == snag.StateMissing {
		return refuse(ErrMissing, "missing", "%s is missing and cannot be claimed: %s; claim another task", it.Key, it.Error)
	}
	if len(it.BlockedBy) > 0 && !force {
		return refuse(ErrBlocked, "blocked", "%s is blocked by %s: claim it with force, or claim another",
			it.Key, strings.Join(it.BlockedBy, ", "))
	}
	return nil
}

// grantRefusal makes the checks of the grant, in its order, before a temp
// file is written for nothing: the session's count of the leases it holds
// now (its claims under way are counted again in the batch, commit.go),
// then whether another holds the task.
func (e *Engine) grantRefusal(ctx context.Context, c claimChoice) error {
	if refusal := e.atLimit(func(ref queue.Ref) (*index.Item, error) { return e.p.DB.Get(ctx, ref) }, c.held); refusal != nil {
		return refusal
	}
	if c.ownErr == nil {
		return fmt.Errorf("%w: %s holds it", index.ErrHeld, c.own.Holder)
	}
	return nil
}

// claimEntry is the audit entry of a claim by s of task id.
func claimEntry(s index.Session, id, outcome, detail string) snag.AuditEntry {
	return snag.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: "claim",
		TaskID: id, Outcome: outcome, Detail: detail}
}

// claimedMeanwhile looks the lease of task id up again for a claim by s
// whose file could not be prepared. When the task is held now, ok is true
// and the claim's answer is the holder's own lease (got) or a refusal as
// held naming the holder (held); otherwise the claim's own error stands.
func (e *Engine) claimedMeanwhile(ctx context.Context, s index.Session, id string) (got Claimed, held error, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return Claimed{}, nil, false
	}
	var l index.Lease
	var it *index.Item
	err := e.p.DB.Read(ctx, func(tx *index.Tx) (err error) {
		if l, err = tx.LeaseOf(id); err != nil {
			return err
		}
		it, err = tx.Get(queue.Ref{ID: id})
		return err
	})
	if err != nil {
		return Claimed{}, nil, false
	}
	if l.SessionID != s.ID {
		return Claimed{}, fmt.Errorf("%w: %s holds it", index.ErrHeld, l.Holder), true
	}
	e.Audit(ctx, claimEntry(s, id, "ok", fmt.Sprintf("already held, epoch %d", l.Epoch)))
	return Claimed{Task: &it.Row, Epoch: l.Epoch}, nil, true
}

// chosenIDs lists the tasks that claims under way have chosen.
func (e *Engine) chosenIDs() []string {
	e.claimMu.Lock()
	defer e.claimMu.Unlock()
	ids := make([]string, 0, len(e.claiming))
	for id := range e.claiming {
		ids = append(ids, id)
	}
	return ids
}

// claimDone ends the claim under way of task id, made or refused.
func (e *Engine) claimDone(id string) {
	e.claimMu.Lock()
	defer e.claimMu.Unlock()
	if e.claiming[id]--; e.claiming[id] <= 0 {
		delete(e.claiming, id)
	}
}

// atLimit refuses a claim by a session that holds the leases held, as many
// tasks as the project allows one session (claim.max_per_session, 1 unless
// set), naming what it holds (read through get) and the calls that free
// it. The count that decides is made in the claim's batch, after every
// grant before it (Claim).
func (e *Engine) atLimit(get func(queue.Ref) (*index.Item, error), held []index.Lease) *Error {
	limit := e.Config().MaxPerSession()
	if limit == 0 || len(held) < limit {
		return nil
	}
	var names []string
	first, title := "", ""
	verifying := 0
	for _, l := range held {
		name := l.TaskID
		if it, err := get(queue.Ref{ID: l.TaskID}); err == nil {
			name = it.Key
			if first == "" {
				first, title = it.Key, it.Title
			}
			if it.Status == queue.StatusVerifying {
				verifying++
				name += " (verifying)"
			}
		}
		names = append(names, name)
	}
	if first == "" {
		first = held[0].TaskID
	}
	k := strconv.Quote(first)
	what := fmt.Sprintf("you already hold %s %q: an agent works on one task at a time.", names[0], title)
	if limit > 1 {
		what = fmt.Sprintf("you already hold %d tasks (%s), the most this project lets one agent hold at once.",
			len(held), strings.Join(names, ", "))
	}
	it := "it"
	if limit > 1 {
		it = "one"
	}
	how := fmt.Sprintf(" Finish %s with snag_resolve {\"id\": %s}, or give it back with snag_release {\"id\": %s, \"reason\": \"...\"}; then claim again", it, k, k)
	if verifying == len(held) {
		how = fmt.Sprintf(" Its check is running: call snag_get {\"id\": %s} for the outcome (a pass frees you to claim; a failure gives it back to you to fix), or snag_release it with a reason", k)
	}
	return &Error{Kind: ErrHolding, Code: "holding", Message: what + how}
}
