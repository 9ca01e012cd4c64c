package team

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

// reconcileSessions ends in the store this clone's sessions that snag.db
// no longer has live: they ended here while their end was waiting in the
// outbox when snagd stopped, and would otherwise stay live in the store
// for as long as this clone does, keeping their names from every other
// agent of the workspace. The store's list is read first: a session
// registered meanwhile is in snag.db before it is in the store, so it is
// never taken for an ended one. It returns the sessions live here, and
// whether the store answered.
func (s *Service) reconcileSessions(ctx context.Context) (map[int64]bool, bool) {
	live := s.e.Coord()
	shared, err := live.LiveSessions(ctx)
	if err != nil {
		s.log.Warn("reconcile the sessions with the coordination store: will try again", "err", err)
		return nil, false
	}
	local, err := s.e.Sessions(ctx)
	if err != nil {
		s.log.Warn("reconcile the sessions with the coordination store: will try again", "err", err)
		return nil, false
	}
	here := make(map[int64]bool, len(local))
	for _, ses := range local {
		here[ses.ID] = true
	}
	for _, id := range shared {
		if here[id] {
			continue
		}
		const why = "reconcile: the session had ended here before snagd stopped, and the store had not heard"
		freed, err := live.EndSession(ctx, id, why)
		if err != nil {
			s.log.Warn("reconcile the sessions with the coordination store: will try again", "err", err)
			return nil, false
		}
		s.e.Audit(ctx, snag.AuditEntry{SessionID: id, Actor: queue.System, Action: "reconcile", Outcome: "ok",
			Detail: fmt.Sprintf("%s (%d leases freed there)", why, len(freed))})
	}
	return here, true
}

// reconcile makes this clone's leases in snag.db and in the store agree,
// at the start and after a rejoin. A lease snag.db holds is kept when the
// store has it for this clone at the same epoch, and taken back at that
// epoch when the store has it free and no grant went past it (the agent's
// epoch stays good); otherwise another clone holds it or resolved it, and
// it is released here. A lease the store has for this clone that snag.db
// does not hold (snagd stopped between the grant and the file's rewrite)
// is ended in the store. The audit says which. The changes waiting in the
// outbox are sent first.
//
// When the store or snag.db does not answer, the reconcile stops where it
// is and is tried again.
func (s *Service) reconcile(ctx context.Context) {
	clone := s.e.Coord().Clone()
	// The outbox goes first: after a rejoin it holds the ends of the
	// leases given up in the cut, which take back a finish the store
	// heard whose answer was lost (the engine's teamApply). Until the
	// store has them, it has such a task done while no file says so, and
	// this clone does not count as reconciled.
	if err := s.e.TeamSend(ctx); err != nil {
		s.log.Warn("send the changes waiting for the coordination store before the reconcile: will try again", "err", err)
		return
	}
	live, ok := s.reconcileSessions(ctx)
	if !ok {
		return
	}
	var n tally
	if err := s.reconcileLeases(ctx, live, &n); err != nil {
		s.log.Warn("reconcile the leases with the coordination store: will try again", "err", err)
		return
	}
	if s.e.Coord().Clone() != clone {
		// Joined again as a new clone meanwhile: the new one is
		// reconciled anew.
		s.askReconcile()
		return
	}
	s.e.TeamReconciled()
	if n.kept+n.taken+n.released+n.ended > 0 {
		s.log.Info("leases reconciled with the coordination store", "kept", n.kept, "taken_back", n.taken, "released", n.released, "grants_ended", n.ended)
	}
	if n.released > 0 {
		s.e.Events().Publish(snag.LeaseEvent{Reconciled: true, Released: n.released})
	}
}

// tally counts what a reconcile did with the leases.
type tally struct {
	kept, taken, released, ended int
}

// reconcileLeases makes the leases agree: snag.db's first, then the
// store's grants that snag.db does not hold, then the leases that ended
// here lately with their task finished. It stops at the first error from
// the store or snag.db.
func (s *Service) reconcileLeases(ctx context.Context, live map[int64]bool, n *tally) error {
	mine, err := s.e.Coord().Mine(ctx)
	if err != nil {
		return err
	}
	local, err := s.e.Leases(ctx)
	if err != nil {
		return err
	}
	shared := make(map[string]coord.Lease, len(mine))
	for _, l := range mine {
		shared[l.TaskID] = l
	}
	for _, l := range local {
		if err := s.reconcileLease(ctx, l, shared, live, n); err != nil {
			return err
		}
	}
	for _, id := range s.e.TeamClaiming() {
		delete(shared, id) // a claim under way: its grant is being mirrored now
	}
	if err := s.endUnheldGrants(ctx, shared, n); err != nil {
		return err
	}
	return s.markFinished(ctx, n)
}

// reconcileLease makes one lease snag.db holds agree with the store's
// grants (shared, by task), taking out of shared the grant it settles.
func (s *Service) reconcileLease(ctx context.Context, l index.Lease, shared map[string]coord.Lease, live map[int64]bool, n *tally) error {
	if l.Detached || l.SessionID == 0 {
		// Derived from a file that says claimed (one git brought from
		// another clone, or one a rebuilt index read). When the store
		// granted it to a live session here of the name the file
		// says, that session claimed it and snagd stopped between the
		// file's rewrite and its own row: the lease is that session's
		// again. Otherwise no agent of this clone holds it, so it is
		// nothing to take or give back here.
		if m, ok := shared[l.TaskID]; ok && m.Session != 0 && live[m.Session] && m.Holder == l.Holder {
			if err := s.attach(ctx, l, m, n); err != nil {
				return err
			}
		}
		delete(shared, l.TaskID)
		return nil
	}
	if !live[l.SessionID] {
		// Its holder ended here, and snagd stopped before it had
		// released all its tasks: the task goes back to the queue, and
		// the store's lease, freed with the session above, stays so.
		delete(shared, l.TaskID)
		n.released++
		s.release(ctx, l, "reconcile: holder gone before snagd stopped", "release a gone session's task")
		return nil
	}
	if m, ok := shared[l.TaskID]; ok && m.Epoch == l.Epoch {
		delete(shared, l.TaskID)
		n.kept++
		if m.Session != l.SessionID && l.SessionID != 0 {
			s.e.TeamAdopt(l)
		}
		return nil
	}
	return s.takeBack(ctx, l, n)
}

// attach gives a lease derived from a claimed file back to the live
// session the store granted it to (m).
func (s *Service) attach(ctx context.Context, l index.Lease, m coord.Lease, n *tally) error {
	attached, err := s.e.TeamAttach(ctx, l.TaskID, m.Session, m.Epoch)
	if err != nil {
		return err
	}
	if attached {
		n.kept++
		s.e.Audit(ctx, snag.AuditEntry{SessionID: m.Session, Actor: queue.System, Agent: m.Holder, Action: "reconcile", TaskID: l.TaskID,
			Outcome: "ok", Detail: fmt.Sprintf("the claim's file was rewritten before snagd stopped: the lease is %s's again, at epoch %d", m.Holder, m.Epoch)})
	}
	return nil
}

// takeBack takes a lease snag.db holds back in the store at its epoch,
// when the store has it free and no grant went past it; otherwise another
// clone has the task, and it is released here. Only a store that does not
// answer (or ended this clone) is an error.
func (s *Service) takeBack(ctx context.Context, l index.Lease, n *tally) error {
	key := l.TaskID
	if k, _, err := s.e.TeamTask(ctx, l.TaskID); err == nil {
		key = k
	}
	_, err := s.e.Coord().GrantAt(ctx, l.TaskID, key, coord.Session{ID: l.SessionID, Name: l.Holder}, l.Epoch)
	switch {
	case err == nil:
		n.taken++
		s.e.Audit(ctx, snag.AuditEntry{Actor: queue.System, Agent: l.Holder, Action: "reconcile", TaskID: l.TaskID, Outcome: "ok",
			Detail: fmt.Sprintf("the shared lease was free: taken back for %s at epoch %d", l.Holder, l.Epoch)})
	case errors.Is(err, coord.ErrUnreachable), errors.Is(err, coord.ErrCloneEnded):
		return err
	default:
		n.released++
		s.release(ctx, l, "reconcile: "+s.e.CoordRefusal(err).Error(), "release a lease another clone has")
	}
	return nil
}

// release gives a lease's task back to the queue here, logging (as
// failed) what failed.
func (s *Service) release(ctx context.Context, l index.Lease, why, failed string) {
	if err := s.e.TeamRelease(ctx, l, why); err != nil {
		s.log.Error(failed, "task", l.TaskID, "err", err)
	}
}

// endUnheldGrants ends in the store the grants snag.db does not hold.
func (s *Service) endUnheldGrants(ctx context.Context, shared map[string]coord.Lease, n *tally) error {
	for _, m := range shared {
		// The store has a grant that snag.db does not: snagd stopped
		// between the grant and the file's rewrite, or between the end of
		// its lease here and telling the store. The task's status here
		// says which way it ends: done when its work was resolved here.
		state := s.e.TeamEndState(ctx, m.TaskID)
		why := "reconcile: the grant's file was never rewritten here (snagd stopped between the two): the grant ended"
		if state == coord.Done {
			why = "reconcile: the lease ended here (the task is " + s.statusOf(ctx, m.TaskID) + ") before snagd stopped, and the store had not heard: it is done"
		}
		if err := s.e.Coord().End(ctx, m.TaskID, m.Epoch, state, why); err != nil && !errors.Is(err, coord.ErrStale) {
			return err
		}
		n.ended++
		s.e.Audit(ctx, snag.AuditEntry{Actor: queue.System, Agent: m.Holder, Action: "reconcile", TaskID: m.TaskID, Outcome: "ok", Detail: why})
	}
	return nil
}

// markFinished marks done in the store the leases that ended here lately
// with their task finished. Such a lease may be one the store never heard
// end (snagd stopped after the commit, before it told the store), and
// that the others' sweep has freed since: it is marked done there, unless
// a grant went past it. Leases snag.db cannot list are left for the next
// reconcile.
func (s *Service) markFinished(ctx context.Context, n *tally) error {
	recent, err := s.e.TeamEndedSince(ctx, time.Now().Add(-recentEnds))
	if err != nil {
		return nil
	}
	for _, l := range recent {
		if s.e.TeamEndState(ctx, l.TaskID) != coord.Done {
			continue
		}
		why := "reconcile: the task was finished here (" + s.statusOf(ctx, l.TaskID) + ") before snagd stopped, and the store had not heard"
		changed, err := s.e.Coord().MarkDone(ctx, l.TaskID, l.Epoch, why)
		if err != nil {
			return err
		}
		if changed {
			n.ended++
			s.e.Audit(ctx, snag.AuditEntry{Actor: queue.System, Agent: l.Holder, Action: "reconcile", TaskID: l.TaskID, Outcome: "ok", Detail: why})
		}
	}
	return nil
}

// recentEnds is how far back a start's reconcile looks for leases that
// ended here with their task finished.
const recentEnds = 24 * time.Hour

// statusOf is task id's status here, or "gone".
func (s *Service) statusOf(ctx context.Context, id string) string {
	if _, status, err := s.e.TeamTask(ctx, id); err == nil {
		return string(status)
	}
	return "gone"
}
