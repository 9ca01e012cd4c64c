package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/coord"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// teamErr words an error of the store as the engine's refusals.
func (e *Engine) teamErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, coord.ErrHeld):
		return refuse(ErrHeld, "held", "%s; claim another task", strings.TrimPrefix(err.Error(), coord.ErrHeld.Error()+": "))
	case errors.Is(err, coord.ErrDone):
		return refuse(ErrTransition, "resolved_elsewhere", "%s", strings.TrimPrefix(err.Error(), coord.ErrDone.Error()+": "))
	case errors.Is(err, coord.ErrStale):
		return refuse(ErrStale, "stale", "%s: claim the task again before you write to it", err.Error())
	case errors.Is(err, coord.ErrUnreachable), errors.Is(err, coord.ErrCloneEnded):
		return refuse(ErrUnreachable, "coord_unreachable", "%s", e.cutOffMessage())
	}
	return err
}

// giveUpAfter is how long after its last heartbeat a clone cut off from
// the store gives its leases up: a heartbeat (at most a quarter of the
// grace) before the others may sweep it by its grace, so that it has
// stopped holding them before any other clone can be granted them. The
// last heartbeat counts from when it was sent (the team service's beat), no later than
// the store's own mark of it.
func (t *team) giveUpAfter() time.Duration {
	grace := t.s.Grace()
	return grace - min(t.beat, grace/4)
}

// cutOff is how long the store has not taken a heartbeat, or 0 while it
// does.
func (t *team) cutOff() time.Duration {
	d := time.Since(time.Unix(0, t.lastBeat.Load()))
	if d < 2*t.beat+time.Second && !t.gaveUp.Load() {
		return 0
	}
	return d
}

func (e *Engine) cutOffMessage() string {
	d := e.team.cutOff()
	if e.team.gaveUp.Load() {
		return fmt.Sprintf("coordination unreachable for %d s: this clone's leases were given up at %s; nothing is granted until it is back (try again in a few seconds)",
			int(d.Seconds()), seconds(e.team.giveUpAfter()))
	}
	if d == 0 {
		return "coordination store unreachable: nothing is granted until it is back (try again in a few seconds)"
	}
	return fmt.Sprintf("coordination unreachable for %d s: nothing is granted until it is back (try again in a few seconds)", int(d.Seconds()))
}

// CoordNotice is what every answer to session id says while the store
// is out of reach: how long, and when the tasks it holds are given up
// ("coordination unreachable for 9 s: your lease of SNAG-3 will be given
// up at 15 s"); "" while all is well.
func (e *Engine) CoordNotice(ctx context.Context, id int64) string {
	d := e.team.cutOff()
	if d == 0 {
		return ""
	}
	at := seconds(e.team.giveUpAfter())
	if e.team.gaveUp.Load() {
		return fmt.Sprintf("coordination unreachable for %d s: every lease of this clone was given up at %s; claims wait until it is back", int(d.Seconds()), at)
	}
	var keys []string
	if ls, err := e.p.DB.LeasesOf(ctx, id); err == nil {
		for _, l := range ls {
			if it, err := e.p.DB.Get(ctx, queue.Ref{ID: l.TaskID}); err == nil {
				keys = append(keys, it.Key)
			}
		}
	}
	if len(keys) == 0 {
		return fmt.Sprintf("coordination unreachable for %d s: nothing is granted until it is back", int(d.Seconds()))
	}
	return fmt.Sprintf("coordination unreachable for %d s: your lease of %s will be given up at %s", int(d.Seconds()), strings.Join(keys, ", "), at)
}

// seconds words d as "11 s", or "2.2 s" under ten seconds.
func seconds(d time.Duration) string {
	if d < 10*time.Second {
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	}
	return strconv.Itoa(int(d.Seconds())) + " s"
}

// teamRegister registers new session s with the store at once, so that
// no agent of another clone is given its name meanwhile; a name taken
// there since is swapped for a free one. With the store out of reach the
// registration waits in the outbox.
func (e *Engine) teamRegister(ctx context.Context, s index.Session) index.Session {
	t := e.team
	for range 5 {
		if t.cutOff() > 0 {
			break
		}
		err := t.s.Register(ctx, coordSession(s))
		if err == nil {
			return s
		}
		if !errors.Is(err, coord.ErrNameTaken) {
			break
		}
		name, err := e.teamFreeName(ctx, s.Name)
		if err != nil {
			break
		}
		if err := e.p.DB.Rename(ctx, s.ID, name); err != nil {
			continue // taken here meanwhile: the next round picks another
		}
		e.live.ended(s.ID) // the kept copy has the old name
		s.Name = name
	}
	t.queue(teamOp{register: &s})
	return s
}

// teamFreeName is a name that no live session has: of the workspace (the
// store's), of this worktree (its registrations may still wait in the
// outbox) or of the repository's other worktrees; taken is the name that
// was refused.
func (e *Engine) teamFreeName(ctx context.Context, taken string) (string, error) {
	names, err := e.team.s.LiveNames(ctx)
	if err != nil {
		return "", err
	}
	names = append(names, taken)
	if local, err := e.p.DB.LiveSessions(ctx); err == nil {
		for _, s := range local {
			names = append(names, s.Name)
		}
	}
	if r := e.opts.Repository; r != nil {
		names = append(names, r.liveNames(ctx, e)...)
	}
	return freeName(names), nil
}

// freeName is the first of index.Names (then NAME-2, NAME-3 ...) not in
// taken.
func freeName(taken []string) string {
	for i := 1; ; i++ {
		for _, n := range index.Names {
			if i > 1 {
				n += "-" + strconv.Itoa(i)
			}
			if !slices.Contains(taken, n) {
				return n
			}
		}
	}
}

// teamRegisterLive registers every live session with the store (after a
// start, or a rejoin).
func (e *Engine) teamRegisterLive(ctx context.Context) {
	ss, err := e.p.DB.LiveSessions(ctx)
	if err != nil {
		return
	}
	for i := range ss {
		e.team.queue(teamOp{register: &ss[i]})
	}
}

// teamGiveUp gives back every task this clone's sessions hold, once:
// the other clones may hold them now.
func (e *Engine) teamGiveUp(ctx context.Context, why string) {
	if e.team.gaveUp.Swap(true) {
		return
	}
	e.team.pubDirty.Store(true)
	ls, err := e.p.DB.Leases(ctx)
	if err != nil {
		e.log.Error("list leases to give up", "err", err)
		return
	}
	ls = slices.DeleteFunc(ls, func(l index.Lease) bool { return l.Detached || l.SessionID == 0 })
	e.log.Warn("giving up every lease of this clone", "why", why, "leases", len(ls))
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return
	}
	for _, l := range ls {
		if err := e.releaseLocked(ctx, l.TaskID, queue.System, l.Holder, "lease given up: "+why); err != nil {
			e.log.Error("give up a lease", "task", l.TaskID, "err", err)
		}
	}
	e.hub.Publish(snag.LeaseEvent{GivenUp: new(len(ls)), Reason: why})
	e.writePlan(ctx)
}

// teamPublish writes this clone's ready tasks to the store when snag.db
// changed since the last time. One publication runs at a time: one that
// read the rows earlier never lands after one that read them later.
func (e *Engine) teamPublish(ctx context.Context) {
	t := e.team
	t.pubMu.Lock()
	defer t.pubMu.Unlock()
	w := e.p.DB.Writes()
	if !t.pubDirty.Load() && t.published.Load() == w || t.gaveUp.Load() || !e.ready.Load() {
		return
	}
	rows, err := e.p.DB.ReadyRows(ctx)
	if err != nil {
		return
	}
	ready := make([]coord.Ready, len(rows))
	for i, r := range rows {
		ready[i] = coord.Ready{TaskID: r.ID, Key: r.Key, Wave: r.Wave, SevRank: r.SevRank, Created: r.Created}
	}
	if err := t.s.Publish(ctx, ready); err != nil {
		t.pubDirty.Store(true)
		return
	}
	t.pubs.Add(1) // before the marks that tell a claim nothing is left to publish
	t.pubDirty.Store(false)
	t.published.Store(w)
}
