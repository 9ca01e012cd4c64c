package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/snagdev/snag/gitdir"
	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/queue"
)

// streams counts the open streams of each session and, when a session's
// last stream closes, ends the session after a grace unless one comes back:
// a daemon restart or a blip must not cost an agent its leases.
type streams struct {
	mu     sync.Mutex
	open   map[int64]int
	timers map[int64]*time.Timer
}

func newStreams() *streams {
	return &streams{open: map[int64]int{}, timers: map[int64]*time.Timer{}}
}

func (s *streams) opened(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open[id]++
	if t, ok := s.timers[id]; ok {
		t.Stop()
		delete(s.timers, id)
	}
}

// closed records that a stream ended; after grace with no stream back,
// gone is called.
func (s *streams) closed(id int64, grace time.Duration, gone func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[id]--; s.open[id] > 0 {
		return
	}
	delete(s.open, id)
	s.arm(id, grace, gone)
}

// arm starts the grace for a session with no stream (as after a restart).
func (s *streams) arm(id int64, grace time.Duration, gone func()) {
	if _, ok := s.timers[id]; ok || s.open[id] > 0 {
		return
	}
	s.timers[id] = time.AfterFunc(grace, func() {
		s.mu.Lock()
		_, still := s.timers[id]
		delete(s.timers, id)
		back := s.open[id] > 0
		s.mu.Unlock()
		if still && !back {
			gone()
		}
	})
}

func (s *streams) armLocked(id int64, grace time.Duration, gone func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arm(id, grace, gone)
}

// isOpen reports whether a session has a stream open.
func (s *streams) isOpen(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[id] > 0
}

func (s *streams) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, t := range s.timers {
		t.Stop()
		delete(s.timers, id)
	}
}

// sweep ends sessions whose process is gone, at start and every few
// seconds: the pid with the start time it registered with, so a reused pid
// is not taken for the agent. A session of another host or boot is never
// swept, only shown.
func (e *Engine) sweep(ctx context.Context) error {
	t := time.NewTicker(e.opts.Sweep)
	defer t.Stop()
	for {
		e.restoreIndex(ctx)
		ss, err := e.p.DB.LiveSessions(ctx)
		if err == nil {
			for _, s := range ss {
				if !alive(s) {
					e.EndSession(s.ID, "process gone")
				} else if b := e.sessionBranch(s); b != s.Branch {
					e.p.DB.SetSessionBranch(ctx, s.ID, b)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// sessionBranch is the branch checked out where a local session works
// (its worktree, or snagd's own), for the activity by branch; a session
// over HTTP may work anywhere, and keeps the branch its writes named.
func (e *Engine) sessionBranch(s index.Session) string {
	if s.Transport == "http" {
		return s.Branch
	}
	top := s.Root
	if top == "" {
		top = e.root
	}
	b, _, _ := gitdir.Head(top)
	return b
}

// adoptSessions gives every session live in the database (from before a
// restart) the grace to reconnect.
func (e *Engine) adoptSessions(ctx context.Context) {
	ss, err := e.p.DB.LiveSessions(ctx)
	if err != nil {
		e.log.Error("live sessions", "err", err)
		return
	}
	for _, s := range ss {
		id := s.ID
		e.streams.armLocked(id, e.opts.Grace, func() { e.EndSession(id, "did not reconnect after a restart") })
	}
}

// reconcile makes leases agree with the files, which win: a live lease on a
// task whose file is no longer claimed or verifying ends (a person edited
// it, or a crash came between the lease and the rename); a task whose file
// says claimed or verifying with no live lease gets a detached lease in its
// assignee's name, until that agent reconnects or a person releases it.
// With ids nil it looks at every task. e.mu must be held.
func (e *Engine) reconcile(ctx context.Context, ids []string) {
	byTask := map[string]index.Lease{}
	if ids != nil {
		// The tasks named alone (a file's edit): their own leases, not
		// every live one.
		for _, id := range ids {
			l, err := e.p.DB.LeaseOf(ctx, id)
			switch {
			case err == nil:
				byTask[id] = l
			case !errors.Is(err, index.ErrNoLease):
				e.log.Error("reconcile", "err", err)
				return
			}
		}
	} else {
		leases, err := e.p.DB.Leases(ctx)
		if err != nil {
			e.log.Error("reconcile", "err", err)
			return
		}
		for _, l := range leases {
			byTask[l.TaskID] = l
		}
	}
	var rows []*index.Row
	if ids == nil {
		// The rows whose files say held with no live lease, and the ids
		// of the ones held: a lease whose task is not among them is read
		// below. Rows that agree with their lease are not read at all.
		held, unleased, err := e.p.DB.Holding(ctx)
		if err != nil {
			e.log.Error("reconcile", "err", err)
			return
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
	var live []index.Session // read once, when a lease is to be re-derived
	type grant struct {
		r      *index.Row
		holder string
		sid    int64
	}
	var grants []grant
	for _, r := range rows {
		if r.State != index.StateOK || r.Stale {
			continue
		}
		l, leased := byTask[r.ID]
		holding := r.Status == queue.StatusClaimed || r.Status == queue.StatusVerifying
		switch {
		case leased && !holding && e.putBack(r, l):
			// git put the file back as it was before the claim (a stash, a
			// checkout, a merge): the lease holds.
			e.Audit(ctx, index.AuditEntry{Actor: queue.System, Agent: l.Holder, Action: "lease_kept", TaskID: r.ID, Outcome: "ok",
				Detail: "the file is back as it was before the claim (git stash, checkout or merge): " + l.Holder +
					" keeps the lease; snag release frees the task"})
		case leased && !holding:
			why := fmt.Sprintf("the file says %s (edited by hand)", r.Status)
			e.p.DB.Update(ctx, func(tx *index.Tx) error {
				tx.End(r.ID, why)
				return tx.Audit(index.AuditEntry{Actor: queue.Person, Action: "lease_end", TaskID: r.ID, Outcome: "ok",
					Detail: l.Holder + ": " + why})
			})
			e.hub.Publish("lease", map[string]any{"task": r.Key, "ended": true, "reason": why})
		case !leased && holding:
			holder := r.Assignee
			if holder == "" {
				holder = "unknown"
			}
			// A live session of that name gets the lease back when it is
			// the agent the file means: one that held the task (a person
			// saved from a buffer older than its release) or asked for the
			// name (an agent back after a rebuilt index). A session that
			// was only given the name, as a newcomer, does not inherit a
			// pulled file's claim: the lease is detached until its agent
			// reconnects under the name, or a person releases it. (A claim
			// snagd died committing is the live state's grant: it is given
			// back to its session when the leases are reconciled with it.)
			var sid int64
			if live == nil {
				live, _ = e.p.DB.LiveSessions(ctx)
			}
			for _, s := range live {
				if s.Name != holder {
					continue
				}
				if held, _ := e.p.DB.HeldBefore(ctx, r.ID, s.ID); held || s.Asked {
					sid = s.ID
				}
			}
			grants = append(grants, grant{r, holder, sid})
		}
	}
	if len(grants) == 0 {
		return
	}
	// The leases re-derived from the files go in one transaction: after a
	// rebuild or a first start they are every claimed task's (a quarter of
	// 100,000, which took a commit each). A task whose lease a row before
	// it granted (two files with its id) is skipped, as it was refused.
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
			err := tx.Audit(index.AuditEntry{Actor: queue.System, Agent: g.holder, Action: action, TaskID: g.r.ID,
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

// EndForPerson ends live session id for a person, by, with a reason (an
// agent that is gone without saying so, or one to stop): its tasks go back
// to the queue and the audit log says who. It returns the session's name
// and how many tasks went back.
func (e *Engine) EndForPerson(ctx context.Context, id int64, by, reason string) (string, int, error) {
	s, err := e.p.DB.SessionByID(ctx, id)
	if err != nil || !s.Ended.IsZero() {
		return "", 0, refuse(ErrNotFound, "no_session", "no live session %d: snag agents lists the live ones", id)
	}
	held, _ := e.p.DB.LeasesOf(ctx, id)
	if by == "" {
		by = "person"
	}
	why := "ended by " + by
	if reason != "" {
		why += ": " + reason
	}
	e.Audit(ctx, index.AuditEntry{SessionID: id, Actor: queue.Person, Agent: by, Action: "session_end",
		Outcome: "ok", Detail: fmt.Sprintf("%s (holding %d): %s", s.Name, len(held), why)})
	e.EndSession(id, why)
	return s.Name, len(held), nil
}

// count is how many sessions have a stream open.
func (s *streams) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}
