package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
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
	// the claim asked for one (ClaimWorktree).
	Worktree string
	Branch   string
}

// Claim gives session s a lease on the task ref, or with ref nil on the
// next ready task, and marks its file claimed: the lease, the file's swap,
// its index row and the audit entry are one transaction. Force claims a
// blocked task. A holder that claims its own task again gets its lease as
// it is.
//
// With a coordination store (team mode) the lease is granted there first
// and mirrored here with its epoch; a claim of the next task lets the
// store choose among this clone's ready tasks (teamClaimNext).
func (e *Engine) Claim(ctx context.Context, s index.Session, ref *queue.Ref, force bool) (Claimed, error) {
	if e.team != nil && ref == nil {
		return e.teamClaimNext(ctx, s, force)
	}
	if ref == nil && e.opts.Repository != nil {
		// Claim-next skips the tasks other worktrees hold; one whose claim
		// there began after this one chose it is skipped on the next try.
		// Each such refusal is another claim's progress, so the tries end:
		// in a grant, or when nothing is left that others are not taking.
		for try := 0; ; try++ {
			got, err := e.claim(ctx, s, nil, force, nil)
			if !errors.Is(err, ErrHeldElsewhere) || try == claimNextTries-1 || ctx.Err() != nil {
				return got, err
			}
		}
	}
	return e.claim(ctx, s, ref, force, nil)
}

// claimNextTries bounds how often a claim of the next task chooses again
// after another worktree took its choice first.
const claimNextTries = 100

// claim is Claim of task ref, or of the next task when ref is nil; pre is
// the shared lease a team's claim-next was granted for it, given back when
// the claim does not use it.
func (e *Engine) claim(ctx context.Context, s index.Session, ref *queue.Ref, force bool, pre *coord.Lease) (got Claimed, err error) {
	if pre != nil {
		defer func() {
			if err != nil || got.Task == nil || got.Epoch != pre.Epoch {
				e.teamUngrant(ctx, pre, s, "the claim did not take it")
			}
		}()
	}
	it, got, err := e.chooseClaim(ctx, s, ref, force)
	if it == nil || err != nil {
		return got, err
	}
	defer e.claimDone(it.ID)
	refused := func(err error) (Claimed, error) {
		if !index.Busy(err) && !errors.Is(err, errClosed) { // a busy index would keep the audit waiting too
			e.Audit(ctx, claimEntry(s, it.ID, "refused", err.Error()))
		}
		return Claimed{}, err
	}
	if r := e.opts.Repository; r != nil {
		// No other worktree of the repository holds the task, nor can take
		// it until this claim's lease row is committed or the claim fails.
		release, err := r.reserve(ctx, e, it.ID)
		if err != nil {
			return refused(err)
		}
		defer release()
	}
	if e.team != nil && pre == nil {
		l, err := e.teamGrant(ctx, it, s)
		if err != nil {
			return refused(err)
		}
		pre = &l
		defer func() {
			if err != nil || got.Task == nil || got.Epoch != l.Epoch {
				e.teamUngrant(ctx, &l, s, "the claim did not take it")
			}
		}()
	}
	// The new bytes are written and synced with no lock held; the grant,
	// the swap and the rows are made in the next batch (commit.go).
	m, err := e.prepareMove(it, s.Name, Step{queue.ActClaim, queue.Agent})
	if err != nil {
		// Another's grant may have committed after this claim chose the
		// task: the file then holds its claim. The claim is answered as it
		// would have been had it come after.
		if got, held, ok := e.claimedMeanwhile(ctx, s, it.ID); ok {
			if held != nil {
				return refused(held)
			}
			return got, nil
		}
		return refused(err)
	}
	var lease index.Lease
	var moved *queue.Task
	again := false
	err = e.commitWrite(&write{ctx: ctx, moves: []*move{m}, claim: true, check: func(tx *index.Tx) error {
		again = false
		l, err := tx.LeaseOf(it.ID)
		switch {
		case err == nil && l.SessionID == s.ID:
			// Its own claim of the task, under way beside this one, was
			// granted first: this one gets that lease, as it is.
			lease, again = l, true
			return nil
		case err != nil && !errors.Is(err, index.ErrNoLease):
			return err
		}
		// The session's count is made here, after every grant before this
		// one: its other claims under way may each be refused or granted.
		if limit := e.Config().MaxPerSession(); limit > 0 {
			held, err := tx.LeasesOf(s.ID)
			if err != nil {
				return err
			}
			if refusal := e.atLimit(tx.Get, held); refusal != nil {
				return refusal
			}
		}
		if err == nil {
			return fmt.Errorf("%w: %s holds it", index.ErrHeld, l.Holder)
		}
		return m.swap()
	}, rows: func(tx *index.Tx) (err error) {
		if again {
			moved = m.moved
			return tx.Audit(claimEntry(s, it.ID, "ok", fmt.Sprintf("already held, epoch %d", lease.Epoch)))
		}
		if pre != nil {
			lease, err = tx.GrantEpoch(it.ID, s.ID, s.Name, pre.Epoch)
		} else {
			lease, err = tx.Grant(it.ID, s.ID, s.Name, false)
		}
		if err != nil {
			return err
		}
		if moved, err = m.written(tx, e.p.Tasks); err != nil {
			return err
		}
		if m.wrote.Info != nil {
			if err := tx.SetBase(it.ID, lease.Epoch, m.wrote.Old, digest(m.wrote.New)); err != nil {
				return err
			}
		}
		return tx.Audit(claimEntry(s, it.ID, "ok", fmt.Sprintf("epoch %d", lease.Epoch)))
	}})
	if err != nil {
		return refused(err)
	}
	if !again {
		e.hub.Publish("lease", map[string]any{"task": it.Key, "holder": s.Name, "epoch": lease.Epoch})
		e.writePlan(ctx)
	}
	// A claim changes the file's status and assignee alone, and the row
	// was brought in step with the file in the transaction: the row as it
	// was, with those two, is the row as it is, without another read.
	row := it.Row
	row.Status, row.Assignee = moved.Status, moved.Assignee
	return Claimed{Task: &row, Epoch: lease.Epoch}, nil
}

// chooseClaim is the part of a claim made under e.mu: it finds the task
// (the next ready one that no claim under way has chosen, when ref is nil),
// checks that s may claim it, and marks it chosen until claimDone. With
// no task to claim it returns none, and the answer (nothing ready, or the
// holder's own lease) or the refusal.
func (e *Engine) chooseClaim(ctx context.Context, s index.Session, ref *queue.Ref, force bool) (*index.Item, Claimed, error) {
	var elsewhere map[string]Holder
	if ref == nil {
		if e.opts.Repository != nil {
			elsewhere = e.opts.Repository.elsewhere(ctx, e)
		}
		// A task whose file git put back as it was before its claim reads
		// open, but its lease holds it.
		for id, h := range e.leasedOpen(ctx) {
			if elsewhere == nil {
				elsewhere = map[string]Holder{}
			}
			elsewhere[id] = h
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// The choice and the checks read on the writer's connection, whose
	// cache the claims before this one kept warm (index.DB.Read).
	var (
		it     *index.Item
		reason string
		own    index.Lease
		ownErr error
		held   []index.Lease
	)
	err := e.p.DB.Read(ctx, func(tx *index.Tx) error {
		if ref == nil {
			id, err := e.nextReady(tx, elsewhere)
			if err != nil {
				return err
			}
			if id == "" { // nothing is ready: Next says why
				row, rd, err := tx.Next()
				if err != nil {
					return err
				}
				heldElsewhere := false
				if row != nil {
					_, heldElsewhere = elsewhere[row.ID]
				}
				if row == nil || e.chosen(row.ID) || heldElsewhere {
					reason = rd.String()
					if heldElsewhere {
						h := elsewhere[row.ID]
						reason = fmt.Sprintf("nothing is ready here: the ready tasks are held or being claimed in other worktrees of the repository (%s in %s)", row.Key, h.Worktree)
					} else if row != nil {
						reason = "nothing is ready: the ready tasks are being claimed by others"
					}
					return nil
				}
				id = row.ID
			}
			ref = &queue.Ref{ID: id}
		}
		var err error
		if it, err = tx.Get(*ref); err != nil {
			return err
		}
		own, ownErr = tx.LeaseOf(it.ID)
		if e.Config().MaxPerSession() > 0 {
			held, _ = tx.LeasesOf(s.ID) // a failed count leaves the claim to the grant's own checks
		}
		return nil
	})
	if err != nil {
		return nil, Claimed{}, err
	}
	if it == nil {
		return nil, Claimed{Reason: reason}, nil
	}
	if it.State == snag.StateMissing {
		return nil, Claimed{}, refuse(ErrMissing, "missing", "%s is missing and cannot be claimed: %s; claim another task", it.Key, it.Error)
	}
	if len(it.BlockedBy) > 0 && !force {
		return nil, Claimed{}, refuse(ErrBlocked, "blocked", "%s is blocked by %s: claim it with force, or claim another",
			it.Key, strings.Join(it.BlockedBy, ", "))
	}
	if ownErr == nil && own.SessionID == s.ID {
		// The holder claims its own task again (a retry, or a lease given
		// back to it by a person's save): it gets its lease, as it is.
		e.Audit(ctx, claimEntry(s, it.ID, "ok", fmt.Sprintf("already held, epoch %d", own.Epoch)))
		return nil, Claimed{Task: &it.Row, Epoch: own.Epoch}, nil
	}
	// The checks of the grant, in its order, before a temp file is
	// written for nothing: the session's count of the leases it holds now
	// (its claims under way are counted again in the batch, commit.go),
	// then whether another holds the task.
	if refusal := e.atLimit(func(ref queue.Ref) (*index.Item, error) { return e.p.DB.Get(ctx, ref) }, held); refusal != nil {
		e.Audit(ctx, claimEntry(s, it.ID, "refused", refusal.Message))
		return nil, Claimed{}, refusal
	}
	if ownErr == nil {
		err := fmt.Errorf("%w: %s holds it", index.ErrHeld, own.Holder)
		e.Audit(ctx, claimEntry(s, it.ID, "refused", err.Error()))
		return nil, Claimed{}, err
	}
	e.claimMu.Lock()
	defer e.claimMu.Unlock()
	e.claiming[it.ID]++
	return it, Claimed{}, nil
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
	if e.p == nil {
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

// nextMark is where the last claim-next's walk of the queue found its
// task (index.Mark), with the DB's count of writes and the data version
// then: while those are the same, or only claims were written since
// (runBatch), no task before the mark has become ready. e.mu guards it.
type nextMark struct {
	mark    index.Mark
	writes  uint64
	version int64
}

// nextReady finds the task claim-next hands out (index.Tx.NextReadyFrom),
// walking from where the last claim-next found its task when nothing but
// claims was written since; e.mu must be held, and tx be a DB.Read.
func (e *Engine) nextReady(tx *index.Tx, elsewhere map[string]Holder) (string, error) {
	writes := e.p.DB.Writes()
	version, err := tx.DataVersion()
	if err != nil {
		return "", err
	}
	from := index.Mark{}
	if e.nextMark.writes == writes && e.nextMark.version == version && len(elsewhere) == 0 {
		// (A task another worktree holds may be freed there without a
		// write here: with any held elsewhere, the walk starts over.)
		from = e.nextMark.mark
	}
	skip := e.chosen
	if len(elsewhere) > 0 {
		skip = func(id string) bool {
			_, held := elsewhere[id]
			return held || e.chosen(id)
		}
	}
	id, mark, err := tx.NextReadyFrom(from, skip)
	if err == nil && id == "" && from != (index.Mark{}) {
		// Nothing from the mark on: the whole queue is walked before
		// saying so.
		id, mark, err = tx.NextReadyFrom(index.Mark{}, skip)
	}
	if err != nil {
		e.nextMark = nextMark{}
		return "", err
	}
	e.nextMark = nextMark{mark: mark, writes: writes, version: version}
	return id, nil
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

// chosen reports whether a claim under way has chosen task id.
func (e *Engine) chosen(id string) bool {
	e.claimMu.Lock()
	defer e.claimMu.Unlock()
	_, ok := e.claiming[id]
	return ok
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

// Released is where a release or a holder's move left a task.
type Released struct {
	Key    string
	Status queue.Status
}

// holds checks, inside tx, that s holds it under a live lease of epoch
// (0: whichever is live).
func holds(tx *index.Tx, it *index.Item, s index.Session, epoch int64) error {
	l, err := tx.Check(it.ID, epoch)
	if err != nil {
		return err
	}
	if l.SessionID != s.ID {
		return fmt.Errorf("%w: %s holds %s, not %s", index.ErrHeld, l.Holder, it.Key, s.Name)
	}
	return nil
}

// Release gives a task back to the queue for the session that holds it,
// fenced by its epoch (0: its live lease), with a reason it must give.
func (e *Engine) Release(ctx context.Context, s index.Session, ref queue.Ref, epoch int64, reason string) (Released, error) {
	if strings.TrimSpace(reason) == "" {
		return Released{}, refuse(ErrInvalid, "no_reason", "release needs a reason: say why the task goes back (blocked, out of scope, ...)")
	}
	// The lease is checked first, under e.mu, so that a stale or foreign
	// release is refused as such; the new bytes are then written with no
	// lock held, and the check, the swap and the rows made in a batch.
	var it *index.Item
	var lease index.Lease
	err := func() error {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.p.DB.Read(ctx, func(tx *index.Tx) (err error) {
			if it, err = tx.Get(ref); err != nil {
				return err
			}
			if err := holds(tx, it, s, epoch); err != nil {
				return err
			}
			lease, err = tx.LeaseOf(it.ID)
			return err
		})
	}()
	refused := func(err error) (Released, error) {
		if it != nil && !index.Busy(err) && !errors.Is(err, errClosed) {
			e.Audit(ctx, snag.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: string(queue.ActRelease),
				TaskID: it.ID, Outcome: "refused", Detail: err.Error()})
		}
		return Released{}, err
	}
	if err != nil {
		return refused(err)
	}
	m, err := e.prepareMoveOf(it, &lease, s.Name, Step{queue.ActRelease, queue.Agent})
	if err != nil {
		return refused(err)
	}
	var status queue.Status
	err = e.commit(ctx, []*move{m}, func(tx *index.Tx) error {
		if err := holds(tx, it, s, epoch); err != nil {
			return err
		}
		return m.swap()
	}, func(tx *index.Tx) error {
		if _, _, err := tx.End(it.ID, string(queue.ActRelease)+": "+reason); err != nil {
			return err
		}
		t, err := m.written(tx, e.p.Tasks)
		if err != nil {
			return err
		}
		status = t.Status
		return tx.Audit(snag.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: string(queue.ActRelease),
			TaskID: it.ID, Outcome: "ok", Detail: reason})
	}, nil)
	if err != nil {
		return refused(err)
	}
	e.hub.Publish("lease", map[string]any{"task": it.Key, "action": queue.ActRelease, "status": status})
	e.writePlan(ctx)
	e.noteGaveBack(s.ID, it.ID)
	return Released{Key: it.Key, Status: status}, nil
}

// noteGaveBack records that session id released task: its claim-next
// passes over it while another task is ready.
func (e *Engine) noteGaveBack(id int64, task string) {
	e.claimMu.Lock()
	defer e.claimMu.Unlock()
	if e.gaveBack == nil {
		e.gaveBack = map[int64]map[string]bool{}
	}
	if e.gaveBack[id] == nil {
		e.gaveBack[id] = map[string]bool{}
	}
	e.gaveBack[id][task] = true
}

// gaveBackBy lists the tasks session id released.
func (e *Engine) gaveBackBy(id int64) []string {
	e.claimMu.Lock()
	defer e.claimMu.Unlock()
	out := make([]string, 0, len(e.gaveBack[id]))
	for task := range e.gaveBack[id] {
		out = append(out, task)
	}
	return out
}

func (e *Engine) forgetGaveBack(id int64) {
	e.claimMu.Lock()
	defer e.claimMu.Unlock()
	delete(e.gaveBack, id)
}

// PersonRelease is a person, by, taking a task back from whoever holds
// it: the lease ends, its epoch moves on, and the holder's later writes
// are stale. A check in flight is stopped.
func (e *Engine) PersonRelease(ctx context.Context, ref queue.Ref, by, reason string) (Released, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	it, err := e.p.DB.Get(ctx, ref)
	if err != nil {
		return Released{}, err
	}
	if it.Status != queue.StatusClaimed && it.Status != queue.StatusVerifying {
		if _, err := e.p.DB.LeaseOf(ctx, it.ID); err != nil {
			return Released{}, refuse(ErrNotHeld, "not_held", "%s is %s and held by no one: nothing to release", it.Key, it.Status)
		}
	}
	why := "released by " + by
	if reason != "" {
		why += ": " + reason
	}
	if err := e.releaseLocked(ctx, it.ID, queue.Person, by, why); err != nil {
		return Released{}, err
	}
	e.verify.stop(it.ID)
	e.hub.Publish("lease", map[string]any{"task": it.Key, "ended": true, "reason": why})
	e.writePlan(ctx)
	return Released{Key: it.Key, Status: queue.StatusOpen}, nil
}

// releaseLocked gives a task back to the queue on behalf of snag or a
// person: whatever lease is live ends. e.mu must be held.
func (e *Engine) releaseLocked(ctx context.Context, taskID string, actor queue.Actor, who, why string) error {
	it, err := e.item(ctx, queue.Ref{ID: taskID})
	if errors.Is(err, index.ErrNotFound) || err == nil && it.State == snag.StateMissing {
		// The file is gone (moved out, or on another branch): end the lease
		// alone, the file has nothing to change; the missing row goes with it.
		return e.p.DB.Update(ctx, func(tx *index.Tx) error {
			if _, _, err := tx.End(taskID, why); err != nil {
				return err
			}
			if it != nil {
				if err := tx.SyncFile(e.p.Tasks, project.Name(it)); err != nil {
					return err
				}
			}
			return tx.Audit(snag.AuditEntry{Actor: actor, Agent: who, Action: "release", TaskID: taskID, Outcome: "ok",
				Detail: why + " (the task file is missing: the lease ended, no file changed)"})
		})
	}
	if err != nil {
		return err
	}
	return e.p.DB.Update(ctx, func(tx *index.Tx) error {
		l, lerr := tx.LeaseOf(taskID)
		if _, _, err := tx.End(taskID, why); err != nil {
			return err
		}
		if it.Status == queue.StatusClaimed || it.Status == queue.StatusVerifying {
			var under *index.Lease
			if lerr == nil {
				under = &l
			}
			if _, err := e.moveStepsOf(tx, it, under, who, Step{queue.ActRelease, actor}); err != nil {
				return err
			}
		}
		return tx.Audit(snag.AuditEntry{Actor: actor, Agent: who, Action: "release", TaskID: taskID, Outcome: "ok", Detail: why})
	})
}

// item reads a task on the writer's connection, for a write about to be
// made on it (index.DB.Read). e.mu must be held.
func (e *Engine) item(ctx context.Context, ref queue.Ref) (it *index.Item, err error) {
	err = e.p.DB.Read(ctx, func(tx *index.Tx) error {
		it, err = tx.Get(ref)
		return err
	})
	return it, err
}
