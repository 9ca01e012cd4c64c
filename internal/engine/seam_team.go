package engine

import (
	"context"
	"slices"
	"time"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
)

// The seam of the team service (internal/engine/team): the link to the
// live state's other clones runs there (the heartbeat, the give-up, the
// sweep of silent clones, the outbox's sender loop, the publication loop,
// the other clones' events and the reconcile of this clone's leases),
// over the methods below. The engine keeps the link's state, which every
// grant reads, the outbox and its delivery (a claim sends what it depends
// on itself), the publication (a claim that finds nothing ready publishes
// at once), and every change the team makes to the index or the files.

// TeamLink is the state of this clone's link to the coordination store,
// as the engine keeps it.
type TeamLink struct {
	// Beat is how often the clone heartbeats (Options.CoordBeat, or its
	// default).
	Beat time.Duration
	// LastBeat is when the last heartbeat the store took was sent.
	LastBeat time.Time
	// GiveUpAfter is how long after LastBeat a clone cut off from the
	// store gives its leases up.
	GiveUpAfter time.Duration
	// CutOff is how long the store has not taken a heartbeat, or 0 while
	// it does.
	CutOff time.Duration
	// GaveUp is set once this clone gave its leases up, cut off past the
	// grace, until it is back.
	GaveUp bool
	// Reconciled is set once this clone's leases in snag.db and in the
	// store agree (at the start, and after a rejoin).
	Reconciled bool
}

// TeamLink is the state of this clone's link to the coordination store.
func (e *Engine) TeamLink() TeamLink {
	t := e.team
	return TeamLink{Beat: t.beat, LastBeat: time.Unix(0, t.lastBeat.Load()), GiveUpAfter: t.giveUpAfter(),
		CutOff: t.cutOff(), GaveUp: t.gaveUp.Load(), Reconciled: t.reconciled.Load()}
}

// TeamWakes receives when the outbox and the audit entries should be sent
// now: a change was queued, or the store took a heartbeat. One receiver
// (the team service's sender) reads it.
func (e *Engine) TeamWakes() <-chan struct{} { return e.team.kick }

// TeamSend tells the store every change in the outbox, in order. It stops
// at the first that cannot reach the store, which stays first.
func (e *Engine) TeamSend(ctx context.Context) error { return e.teamSend(ctx) }

// TeamSendAudits sends the audit entries the store has not taken yet.
func (e *Engine) TeamSendAudits(ctx context.Context) error { return e.teamSendAudits(ctx) }

// TeamPublish writes this clone's ready tasks to the store when snag.db
// changed since the last time.
func (e *Engine) TeamPublish(ctx context.Context) { e.teamPublish(ctx) }

// TeamUnpublished has the next publication write the ready tasks whether
// snag.db changed or not (the store asked the clones to publish again).
func (e *Engine) TeamUnpublished() { e.team.pubDirty.Store(true) }

// TeamRegisterLive queues a registration of every live session (after a
// start, or a rejoin).
func (e *Engine) TeamRegisterLive(ctx context.Context) { e.teamRegisterLive(ctx) }

// TeamBeaten records that the store took a heartbeat sent at sent, and
// wakes the sender. It reports whether this clone had given its leases up
// (it is back).
func (e *Engine) TeamBeaten(sent time.Time) (back bool) {
	t := e.team
	back = t.gaveUp.Swap(false)
	t.lastBeat.Store(sent.UnixNano())
	t.wake()
	return back
}

// TeamUnreconciled records that the other clones ended this one: its
// leases are not reconciled until the next reconcile after it joins again.
func (e *Engine) TeamUnreconciled() { e.team.reconciled.Store(false) }

// TeamRejoined records that this clone joined the store again as a new
// clone, and drops the outbox's changes made moot; it returns how many.
func (e *Engine) TeamRejoined() (dropped int) {
	t := e.team
	t.gaveUp.Store(false)
	t.lastBeat.Store(time.Now().UnixNano())
	t.pubDirty.Store(true)
	// Its changes of the old clone's sessions, claims and adoptions are
	// moot: the sweep ended them. A person's move of a task, what was
	// posted for the team, and every end of a lease still go, as its
	// audit entries do: the end of a lease whose task is finished here
	// marks it done (MarkDone), and one freed here, or a finish not
	// committed here, takes back a finish the store heard whose answer
	// was lost in the cut (Unend at that epoch). The sweep freed the
	// leases held, not those a lost finish had left done: dropped, such
	// an end left the task done for every clone with no file saying so.
	t.mu.Lock()
	defer t.mu.Unlock()
	before := len(t.outbox)
	t.outbox = slices.DeleteFunc(t.outbox, func(op teamOp) bool {
		return op.post == nil && op.set == nil && op.ended == nil && op.unend == nil
	})
	return before - len(t.outbox)
}

// TeamGiveUp gives back every task this clone's sessions hold, once: the
// other clones may hold them now.
func (e *Engine) TeamGiveUp(ctx context.Context, why string) { e.teamGiveUp(ctx, why) }

// TeamReleaseFile ends this clone's claims of path, which a person on
// another clone freed from whoever held it.
func (e *Engine) TeamReleaseFile(ctx context.Context, path, why string) {
	e.p.DB.ForceReleaseFile(ctx, path, why)
}

// TeamReconciled records that this clone's leases in snag.db and in the
// store agree: grants go ahead, and the engine has started.
func (e *Engine) TeamReconciled() {
	e.team.reconciled.Store(true)
	e.progress.reconciles.Add(1)
	e.team.started.Store(true)
	e.team.startOnce.Do(func() { close(e.team.startedCh) })
}

// TeamClaiming lists the tasks that claims under way have chosen: their
// grants are being mirrored now.
func (e *Engine) TeamClaiming() []string { return e.chosenIDs() }

// TeamAttach gives the lease of task taskID, derived from a claimed file,
// to live session session at epoch, as the store granted it; it reports
// whether it did.
func (e *Engine) TeamAttach(ctx context.Context, taskID string, session, epoch int64) (bool, error) {
	var attached bool
	err := e.p.DB.Update(ctx, func(tx *index.Tx) error {
		var err error
		attached, err = tx.Attach(taskID, session, epoch)
		return err
	})
	return attached, err
}

// TeamAdopt queues for the store the adoption of lease l by its session.
func (e *Engine) TeamAdopt(l index.Lease) { e.team.queue(teamOp{adopt: &l}) }

// TeamRelease gives lease l's task back to the queue here, why says why.
func (e *Engine) TeamRelease(ctx context.Context, l index.Lease, why string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return nil
	}
	return e.releaseLocked(ctx, l.TaskID, queue.System, l.Holder, why)
}

// TeamEndState is the shared state a lease of task id ends in, by the
// task's status here (coord.Free or coord.Done).
func (e *Engine) TeamEndState(ctx context.Context, id string) string { return e.endState(ctx, id) }

// TeamTask is task id's key and status as snag.db has them (no lease of
// another worktree or clone shown over them, as Get does).
func (e *Engine) TeamTask(ctx context.Context, id string) (key string, status queue.Status, err error) {
	it, err := e.p.DB.Get(ctx, queue.Ref{ID: id})
	if err != nil {
		return "", "", err
	}
	return it.Key, it.Status, nil
}

// TeamEndedSince are the leases that ended here after since.
func (e *Engine) TeamEndedSince(ctx context.Context, since time.Time) ([]index.Lease, error) {
	return e.p.DB.EndedLeases(ctx, since)
}

// CoordRefusal words an error of the coordination store as the engine's
// refusals (ErrHeld, ErrStale, ErrUnreachable ...), naming the fix.
func (e *Engine) CoordRefusal(err error) error { return e.teamErr(err) }
