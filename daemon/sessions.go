package daemon

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/snagdev/snag/api"
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
func (d *Daemon) sweep(ctx context.Context) error {
	t := time.NewTicker(d.opts.Sweep)
	defer t.Stop()
	for {
		ss, err := d.p.DB.LiveSessions(ctx)
		if err == nil {
			for _, s := range ss {
				if !alive(s) {
					d.endSession(s.ID, "process gone")
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

// adoptSessions gives every session live in the database (from before a
// restart) the grace to reconnect.
func (d *Daemon) adoptSessions(ctx context.Context) {
	ss, err := d.p.DB.LiveSessions(ctx)
	if err != nil {
		d.log.Error("live sessions", "err", err)
		return
	}
	for _, s := range ss {
		id := s.ID
		d.streams.armLocked(id, d.opts.Grace, func() { d.endSession(id, "did not reconnect after a restart") })
	}
}

// reconcile makes leases agree with the files, which win: a live lease on a
// task whose file is no longer claimed or verifying ends (a person edited
// it, or a crash came between the lease and the rename); a task whose file
// says claimed or verifying with no live lease gets a detached lease in its
// assignee's name, until that agent reconnects or a person releases it.
// With ids nil it looks at every task. d.mu must be held.
func (d *Daemon) reconcile(ctx context.Context, ids []string) {
	leases, err := d.p.DB.Leases(ctx)
	if err != nil {
		d.log.Error("reconcile", "err", err)
		return
	}
	byTask := map[string]index.Lease{}
	for _, l := range leases {
		byTask[l.TaskID] = l
	}
	var rows []*index.Row
	if ids == nil {
		page, err := d.p.DB.List(ctx, index.Filter{Statuses: []queue.Status{queue.StatusClaimed, queue.StatusVerifying}, Limit: 1 << 30})
		if err != nil {
			d.log.Error("reconcile", "err", err)
			return
		}
		rows = page.Rows
		held := map[string]bool{}
		for _, r := range rows {
			held[r.ID] = true
		}
		for id := range byTask {
			if !held[id] {
				ids = append(ids, id)
			}
		}
	}
	for _, id := range ids {
		it, err := d.p.DB.Get(ctx, queue.Ref{ID: id})
		if err != nil {
			continue // gone from the files (moved out, other branch): the lease stays
		}
		rows = append(rows, &it.Row)
	}
	var live []index.Session // read once, when a lease is to be re-derived
	for _, r := range rows {
		if r.State != index.StateOK || r.Stale {
			continue
		}
		l, leased := byTask[r.ID]
		holding := r.Status == queue.StatusClaimed || r.Status == queue.StatusVerifying
		switch {
		case leased && !holding:
			why := fmt.Sprintf("the file says %s (edited by hand)", r.Status)
			d.p.DB.Update(ctx, func(tx *index.Tx) error {
				tx.End(r.ID, why)
				return tx.Audit(index.AuditEntry{Actor: queue.Person, Action: "lease_end", TaskID: r.ID, Outcome: "ok",
					Detail: l.Holder + ": " + why})
			})
			d.hub.publish("lease", map[string]any{"task": r.Key, "ended": true, "reason": why})
		case !leased && holding:
			holder := r.Assignee
			if holder == "" {
				holder = "unknown"
			}
			// A live session of that name gets the lease back (a person
			// saved from a buffer older than its release); otherwise it
			// is detached until the agent reconnects under the name.
			var sid int64
			if live == nil {
				live, _ = d.p.DB.LiveSessions(ctx)
			}
			for _, s := range live {
				if s.Name == holder {
					sid = s.ID
				}
			}
			d.p.DB.Update(ctx, func(tx *index.Tx) error {
				if _, err := tx.Grant(r.ID, sid, holder, sid == 0); err != nil {
					return err
				}
				action, detail := "lease_detached", "the file says "+string(r.Status)+" with no live lease"
				if sid != 0 {
					action, detail = "lease_restored", "the file says "+string(r.Status)+" by "+holder+", who is connected"
				}
				return tx.Audit(index.AuditEntry{Actor: queue.System, Agent: holder, Action: action, TaskID: r.ID,
					SessionID: sid, Outcome: "ok", Detail: detail})
			})
		}
	}
}

// IdleAfter is how long a session goes without a tool call, with nothing
// in flight, before it is shown as idle.
const IdleAfter = 5 * time.Minute

// sessionView is a live session as GET /sessions gives it: the row and
// what snagd sees of it now.
type sessionView struct {
	index.Session
	Activity index.Activity `json:"activity"`
}

// activities says what each live session is doing, by session id.
func (d *Daemon) activities(ss []index.Session) map[int64]index.Activity {
	now := time.Now()
	var web map[int64]mcpState
	if d.mcp != nil {
		web = d.mcp.states()
	}
	out := make(map[int64]index.Activity, len(ss))
	for _, s := range ss {
		var a index.Activity
		if v, ok := d.calls.Load(s.ID); ok {
			a.LastCall = v.(time.Time)
		}
		last := a.LastCall
		if last.IsZero() {
			last = s.Started
		}
		since := now.Sub(last).Round(time.Second)
		st, isWeb := web[s.ID]
		switch {
		case !isWeb:
			a.Idle = since >= IdleAfter
			a.Note = "connected (holds its stream)"
			if !d.streams.isOpen(s.ID) {
				a.Note = "holds no stream: it ends only when its process is gone or a person ends it"
			}
		case st.Stream:
			a.Stream, a.Working = "open", st.Working
			a.Idle = !st.Working && since >= IdleAfter
			a.Note = "connected (holds its GET stream)"
		case st.Working:
			a.Stream, a.Working = "none", true
			if st.Held {
				a.Stream = "closed"
			}
			a.Note = "answering a request"
		case st.Held:
			a.Stream, a.Idle, a.EndsAt = "closed", true, st.Ends
			a.Note = fmt.Sprintf("its GET stream closed %s ago and no request came since: the client has gone without ending its session; it ends in %s unless a request comes",
				ago(now, st.Last), until(now, st.Ends))
		default:
			a.Stream, a.Idle, a.EndsAt = "none", true, st.Ends
			a.Note = fmt.Sprintf("no request for %s and no GET stream: it ends in %s unless a request comes", ago(now, st.Last), until(now, st.Ends))
		}
		if a.Idle && a.Stream != "closed" && a.Stream != "none" {
			a.Note = fmt.Sprintf("idle: no tool call for %s; %s", since, a.Note)
		}
		out[s.ID] = a
	}
	return out
}

func ago(now, t time.Time) time.Duration { return max(now.Sub(t), 0).Round(time.Second) }

func until(now, t time.Time) time.Duration { return max(t.Sub(now), 0).Round(time.Second) }

// endByPerson ends a live session for a person (an agent that is gone
// without saying so, or one to stop): its tasks go back to the queue, its
// MCP session over HTTP, if any, is closed, and the audit log says who.
func (d *Daemon) endByPerson(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(SessionHeader) != "" {
		writeError(w, &apiError{http.StatusForbidden, "person_only", "a person ends an agent's session; an agent ends its own by disconnecting"})
		return
	}
	var req endRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, &apiError{http.StatusBadRequest, "bad_session", "session id: want a number (snag agents lists them)"})
		return
	}
	name, released, e := d.endForPerson(r.Context(), id, req.By, req.Reason)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, api.Ended{ID: id, Name: name, Ended: true, Released: released})
}

// endForPerson ends live session id for a person, by, with a reason, and
// returns its name and how many tasks went back to the queue.
func (d *Daemon) endForPerson(ctx context.Context, id int64, by, reason string) (string, int, *apiError) {
	s, err := d.p.DB.SessionByID(ctx, id)
	if err != nil || !s.Ended.IsZero() {
		return "", 0, &apiError{http.StatusNotFound, "no_session", fmt.Sprintf("no live session %d: snag agents lists the live ones", id)}
	}
	held, _ := d.p.DB.LeasesOf(ctx, id)
	if by == "" {
		by = "person"
	}
	why := "ended by " + by
	if reason != "" {
		why += ": " + reason
	}
	d.audit(ctx, index.AuditEntry{SessionID: id, Actor: queue.Person, Agent: by, Action: "session_end",
		Outcome: "ok", Detail: fmt.Sprintf("%s (holding %d): %s", s.Name, len(held), why)})
	if d.mcp != nil {
		d.mcp.closeSession(id) // its client's next request gets 404
	}
	d.endSession(id, why)
	return s.Name, len(held), nil
}

func (d *Daemon) listSessions(w http.ResponseWriter, r *http.Request) {
	ss, err := d.p.DB.LiveSessions(r.Context())
	if err != nil {
		d.fail(w, err)
		return
	}
	leases, err := d.p.DB.Leases(r.Context())
	if err != nil {
		d.fail(w, err)
		return
	}
	acts := d.activities(ss)
	views := make([]sessionView, 0, len(ss))
	for _, s := range ss {
		views = append(views, sessionView{Session: s, Activity: acts[s.ID]})
	}
	writeJSON(w, http.StatusOK, sessionsAnswer(views, leases))
}

func (d *Daemon) auditLog(w http.ResponseWriter, r *http.Request) {
	q := readQuery(r, "after", "limit")
	after, limit := q.int("after", 0, 1<<62, 0), min(q.int("limit", 0, 1<<30, 0), 1000)
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	es, err := d.p.DB.AuditLog(r.Context(), int64(after), limit)
	if err != nil {
		d.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, auditLog(es))
}
