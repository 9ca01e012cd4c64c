package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// reconcile makes leases agree with the files, which win: a live lease on a
// task whose file is no longer claimed or verifying ends (a person edited
// it, or a crash came between the lease and the rename); a task whose file
// says claimed or verifying with no live lease gets a detached lease in its
// assignee's name, until that agent reconnects or a person releases it.
// With ids nil it looks at every task. e.mu must be held.
func (e *Engine) reconcile(ctx context.Context, ids []string) {
	byTask, err := e.leasesToReconcile(ctx, ids)
	if err != nil {
		e.log.Error("reconcile", "err", err)
		return
	}
	rows, err := e.rowsToReconcile(ctx, ids, byTask)
	if err != nil {
		e.log.Error("reconcile", "err", err)
		return
	}
	var live []index.Session // read once, when a lease is to be re-derived
	var grants []leaseGrant
	for _, r := range rows {
		if r.State != snag.StateOK || r.Stale {
			continue
		}
		if g, ok := e.reconcileRow(ctx, r, byTask, &live); ok {
			grants = append(grants, g)
		}
	}
	if len(grants) == 0 {
		return
	}
	e.grantFromFiles(ctx, grants)
}

// leasesToReconcile are the live leases of the tasks ids names, by task:
// every live one when ids is nil.
func (e *Engine) leasesToReconcile(ctx context.Context, ids []string) (map[string]index.Lease, error) {
	byTask := map[string]index.Lease{}
	if ids == nil {
		leases, err := e.p.DB.Leases(ctx)
		if err != nil {
			return nil, err
		}
		for _, l := range leases {
			byTask[l.TaskID] = l
		}
		return byTask, nil
	}
	// The tasks named alone (a file's edit): their own leases, not every
	// live one.
	for _, id := range ids {
		l, err := e.p.DB.LeaseOf(ctx, id)
		switch {
		case err == nil:
			byTask[id] = l
		case !errors.Is(err, index.ErrNoLease):
			return nil, err
		}
	}
	return byTask, nil
}

// rowsToReconcile are the rows to hold against the leases: the tasks ids
// names, or with ids nil the rows whose files say held with no live lease
// and the rows of leased tasks whose files do not say held. Rows that
// agree with their lease are not read at all.
func (e *Engine) rowsToReconcile(ctx context.Context, ids []string, byTask map[string]index.Lease) ([]*index.Row, error) {
	var rows []*index.Row
	if ids == nil {
		held, unleased, err := e.p.DB.Holding(ctx)
		if err != nil {
			return nil, err
		}
		rows = unleased
		for id := range byTask {
			if !held[id] {
				ids = append(ids, id)
			}
		}
	}
	for _, id := range ids {
		it, err := e.p.DB.Get(ctx, queue.Ref{ID: id})
		if err != nil {
			continue // gone from the files (moved out, other branch): the lease stays
		}
		rows = append(rows, &it.Row)
	}
	return rows, nil
}

// leaseGrant is a lease to re-derive from a file that says held: detached
// when sid is 0.
type leaseGrant struct {
	r      *index.Row
	holder string
	sid    int64
}

// reconcileRow holds one row against its lease (in byTask): a lease kept
// because git put the file back, a lease ended because a person edited the
// file, or a lease to grant because the file says held with none (ok).
// live is the live sessions, read when first needed.
func (e *Engine) reconcileRow(ctx context.Context, r *index.Row, byTask map[string]index.Lease, live *[]index.Session) (g leaseGrant, ok bool) {
	l, leased := byTask[r.ID]
	holding := r.Status == queue.StatusClaimed || r.Status == queue.StatusVerifying
	switch {
	case leased && !holding && e.putBack(r, l):
		// git put the file back as it was before the claim (a stash, a
		// checkout, a merge): the lease holds.
		e.Audit(ctx, snag.AuditEntry{Actor: queue.System, Agent: l.Holder, Action: "lease_kept", TaskID: r.ID, Outcome: "ok",
			Detail: "the file is back as it was before the claim (git stash, checkout or merge): " + l.Holder +
				" keeps the lease; snag release frees the task"})
	case leased && !holding:
		why := fmt.Sprintf("the file says %s (edited by hand)", r.Status)
		e.p.DB.Update(ctx, func(tx *index.Tx) error {
			tx.End(r.ID, why)
			return tx.Audit(snag.AuditEntry{Actor: queue.Person, Action: "lease_end", TaskID: r.ID, Outcome: "ok",
				Detail: l.Holder + ": " + why})
		})
		e.hub.Publish(snag.LeaseEvent{Task: r.Key, Ended: true, Reason: why})
	case !leased && holding:
		holder := r.Assignee
		if holder == "" {
			holder = "unknown"
		}
		return leaseGrant{r, holder, e.fileHolder(ctx, r, holder, live)}, true
	}
	return leaseGrant{}, false
}

// fileHolder is the live session a held file's lease goes back to, or 0
// (detached).
//
// A live session of the holder's name gets the lease back when it is the
// agent the file means: one that held the task (a person saved from a
// buffer older than its release) or asked for the name (an agent back
// after a rebuilt index). A session that was only given the name, as a
// newcomer, does not inherit a pulled file's claim: the lease is detached
// until its agent reconnects under the name, or a person releases it. (A
// claim snagd died committing is the live state's grant: it is given back
// to its session when the leases are reconciled with it.)
func (e *Engine) fileHolder(ctx context.Context, r *index.Row, holder string, live *[]index.Session) int64 {
	var sid int64
	if *live == nil {
		*live, _ = e.p.DB.LiveSessions(ctx)
	}
	for _, s := range *live {
		if s.Name != holder {
			continue
		}
		if held, _ := e.p.DB.HeldBefore(ctx, r.ID, s.ID); held || s.Asked {
			sid = s.ID
		}
	}
	return sid
}

// grantFromFiles re-derives leases from the files in one transaction:
// after a rebuild or a first start they are every claimed task's (a
// quarter of 100,000, which took a commit each). A task whose lease a row
// before it granted (two files with its id) is skipped, as it was refused.
func (e *Engine) grantFromFiles(ctx context.Context, grants []leaseGrant) {
	err := e.p.DB.Update(ctx, func(tx *index.Tx) error {
		for _, g := range grants {
			if _, err := tx.Grant(g.r.ID, g.sid, g.holder, g.sid == 0); errors.Is(err, index.ErrHeld) {
				continue
			} else if err != nil {
				return err
			}
			action, detail := "lease_detached", "the file says "+string(g.r.Status)+" with no live lease"
			if g.sid != 0 {
				action, detail = "lease_restored", "the file says "+string(g.r.Status)+" by "+g.holder+", who is connected"
			}
			err := tx.Audit(snag.AuditEntry{Actor: queue.System, Agent: g.holder, Action: action, TaskID: g.r.ID,
				SessionID: g.sid, Outcome: "ok", Detail: detail})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		e.log.Error("reconcile: re-derive leases from the files", "leases", len(grants), "err", err)
	}
}
