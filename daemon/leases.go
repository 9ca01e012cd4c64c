package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/project"
	"github.com/snagdev/snag/queue"
)

// SessionHeader names the session a request acts for.
const SessionHeader = api.SessionHeader

func (d *Daemon) register(w http.ResponseWriter, r *http.Request) {
	var req registerRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	s := index.Session{Name: strings.ToUpper(strings.TrimSpace(req.Name)), Client: req.Client,
		ClientVersion: req.ClientVersion, PID: req.PID, Host: req.Host, Transport: req.Transport,
		Root: d.sessionRoot(req.Root)}
	if s.Host == "" {
		s.Host, _ = os.Hostname()
	}
	if local, _ := os.Hostname(); s.PID > 0 && s.Host == local {
		s.PIDStart = procStart(s.PID)
		s.BootID = bootID()
	}
	s, err := d.p.DB.Register(r.Context(), s)
	if err != nil {
		d.fail(w, err)
		return
	}
	d.audit(r.Context(), index.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: "session",
		Outcome: "ok", Detail: fmt.Sprintf("%s %s pid %d", s.Client, s.ClientVersion, s.PID)})
	d.hub.publish("session", map[string]any{"id": s.ID, "name": s.Name, "started": true})
	writeJSON(w, http.StatusCreated, s.Wire())
}

// sessionOf reads the session a request acts for.
func (d *Daemon) sessionOf(r *http.Request) (index.Session, *apiError) {
	id, err := strconv.ParseInt(r.Header.Get(SessionHeader), 10, 64)
	if err != nil {
		return index.Session{}, &apiError{http.StatusBadRequest, "no_session",
			"send " + SessionHeader + " with the id POST /sessions gave you"}
	}
	s, err := d.p.DB.SessionByID(r.Context(), id)
	if err != nil || !s.Ended.IsZero() {
		return index.Session{}, &apiError{http.StatusGone, "session_ended",
			"session " + strconv.FormatInt(id, 10) + " has ended (its leases were released): register again"}
	}
	return s, nil
}

// stream holds a session alive: the session's client keeps this request
// open for its whole life. When it closes and no other stream of the
// session comes back within the grace, the session ends and its leases are
// released.
func (d *Daemon) stream(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, &apiError{http.StatusBadRequest, "bad_session", "session id: want a number"})
		return
	}
	s, err := d.p.DB.SessionByID(r.Context(), id)
	if err != nil || !s.Ended.IsZero() {
		writeError(w, &apiError{http.StatusGone, "session_ended", "session has ended: register again"})
		return
	}
	fl, _ := w.(http.Flusher)
	d.streams.opened(id)
	defer d.streams.closed(id, d.opts.Grace, func() { d.endSession(id, "stream closed") })
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, ": session %d (%s)\n\n", s.ID, s.Name)
	if fl != nil {
		fl.Flush()
	}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.Context().Done():
			return
		case <-tick.C:
			d.p.DB.Touch(context.Background(), id)
			fmt.Fprint(w, ": alive\n\n")
			if fl != nil {
				fl.Flush()
			}
		}
	}
}

// endSession ends a session and gives back every task it held.
func (d *Daemon) endSession(id int64, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.p == nil {
		return
	}
	held, err := d.p.DB.EndSession(ctx, id, why)
	if err != nil {
		d.log.Error("end session", "id", id, "err", err)
		return
	}
	for _, l := range held {
		if d.verify.inFlight(l.TaskID) {
			// A check of its work is running: the outcome decides where the
			// task goes (a failure sends it back to the queue, as the holder
			// is gone); the lease has ended with the session.
			err := d.p.DB.Update(ctx, func(tx *index.Tx) error {
				if _, _, err := tx.End(l.TaskID, "holder gone during verify: "+why); err != nil {
					return err
				}
				return tx.Audit(index.AuditEntry{SessionID: id, Actor: queue.System, Agent: l.Holder, Action: "release",
					TaskID: l.TaskID, Outcome: "ok", Detail: "holder gone during verify (the outcome decides where the task goes): " + why})
			})
			if err != nil {
				d.log.Error("end a gone session's lease", "task", l.TaskID, "err", err)
			}
			continue
		}
		if err := d.releaseLocked(ctx, l.TaskID, 0, queue.System, l.Holder, "holder gone: "+why); err != nil {
			d.log.Error("release of a gone session's task", "task", l.TaskID, "err", err)
		}
	}
	d.hub.publish("session", map[string]any{"id": id, "ended": true, "reason": why, "released": len(held)})
	d.writePlan(ctx)
}

func (d *Daemon) claim(w http.ResponseWriter, r *http.Request) {
	s, e := d.sessionOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	var req claimRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	var ref queue.Ref
	next := r.PathValue("ref") == ""
	if !next {
		var err error
		if ref, err = queue.ParseRef(r.PathValue("ref")); err != nil {
			writeError(w, &apiError{http.StatusBadRequest, "bad_ref", err.Error()})
			return
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ctx := r.Context()
	if next {
		id, err := d.p.DB.NextReady(ctx)
		if err != nil {
			d.fail(w, err)
			return
		}
		if id == "" { // nothing is ready: Next says why
			row, rd, err := d.p.DB.Next(ctx)
			if err != nil {
				d.fail(w, err)
				return
			}
			if row == nil {
				writeJSON(w, http.StatusOK, api.Claim{Reason: rd.String()})
				return
			}
			id = row.ID
		}
		ref = queue.Ref{ID: id}
	}
	it, err := d.p.DB.Get(ctx, ref)
	if err != nil {
		d.fail(w, err)
		return
	}
	if it.State == index.StateMissing {
		writeError(w, &apiError{http.StatusConflict, "missing", fmt.Sprintf("%s is missing and cannot be claimed: %s; claim another task", it.Key, it.Error)})
		return
	}
	if len(it.BlockedBy) > 0 && !req.Force {
		writeError(w, &apiError{http.StatusConflict, "blocked", fmt.Sprintf("%s is blocked by %s: claim it with force, or claim another",
			it.Key, strings.Join(it.BlockedBy, ", "))})
		return
	}
	if l, err := d.p.DB.LeaseOf(ctx, it.ID); err == nil && l.SessionID == s.ID {
		// The holder claims its own task again (a retry, or a lease given
		// back to it by a person's save): it gets its lease, as it is.
		d.audit(ctx, index.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: "claim",
			TaskID: it.ID, Outcome: "ok", Detail: fmt.Sprintf("already held, epoch %d", l.Epoch)})
		writeJSON(w, http.StatusOK, claimed(&it.Row, l.Epoch))
		return
	}
	if e := d.atLimit(ctx, s); e != nil {
		d.audit(ctx, index.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: "claim",
			TaskID: it.ID, Outcome: "refused", Detail: e.Message})
		writeError(w, e)
		return
	}
	var lease index.Lease
	var moved *queue.Task
	err = d.p.DB.Update(ctx, func(tx *index.Tx) error {
		if lease, err = tx.Grant(it.ID, s.ID, s.Name, false); err != nil {
			return err
		}
		if moved, err = d.p.MoveFile(it, queue.ActClaim, queue.Agent, s.Name); err != nil {
			return err
		}
		if err := tx.SyncFile(d.p.Tasks, project.Name(it)); err != nil {
			return err
		}
		return tx.Audit(index.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: "claim",
			TaskID: it.ID, Outcome: "ok", Detail: fmt.Sprintf("epoch %d", lease.Epoch)})
	})
	if err != nil && !index.Busy(err) { // a busy index would keep the audit waiting too
		d.audit(ctx, index.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: "claim",
			TaskID: it.ID, Outcome: "refused", Detail: err.Error()})
	}
	if err != nil {
		d.fail(w, err)
		return
	}
	d.hub.publish("lease", map[string]any{"task": it.Key, "holder": s.Name, "epoch": lease.Epoch})
	d.writePlan(ctx)
	// A claim changes the file's status and assignee alone, and the row
	// was brought in step with the file in the transaction: the row as it
	// was, with those two, is the row as it is, without another read.
	row := it.Row
	row.Status, row.Assignee = moved.Status, moved.Assignee
	writeJSON(w, http.StatusOK, claimed(&row, lease.Epoch))
}

// atLimit refuses a claim by a session that holds as many tasks as the
// project allows one session (claim.max_per_session, 1 unless set), naming
// what it holds and the calls that free it. d.mu must be held: every grant
// is made under it, so the count cannot change before the claim's own.
func (d *Daemon) atLimit(ctx context.Context, s index.Session) *apiError {
	limit := d.p.Config.MaxPerSession()
	if limit == 0 {
		return nil
	}
	held, err := d.p.DB.LeasesOf(ctx, s.ID)
	if err != nil || len(held) < limit {
		return nil // a failed count leaves the claim to the grant's own checks
	}
	var names []string
	first, title := "", ""
	verifying := 0
	for _, l := range held {
		name := l.TaskID
		if it, err := d.p.DB.Get(ctx, queue.Ref{ID: l.TaskID}); err == nil {
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
	return &apiError{http.StatusConflict, "holding", what + how}
}

func (d *Daemon) release(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(SessionHeader) == "" {
		d.personRelease(w, r)
		return
	}
	d.holderMove(w, r, queue.ActRelease)
}

// personRelease is a person taking a task back from whoever holds it: the
// lease ends, its epoch moves on, and the holder's later writes are stale.
func (d *Daemon) personRelease(w http.ResponseWriter, r *http.Request) {
	var req moveRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	ref, ok := pathRef(w, r)
	if !ok {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ctx := r.Context()
	it, err := d.p.DB.Get(ctx, ref)
	if err != nil {
		d.fail(w, err)
		return
	}
	if it.Status != queue.StatusClaimed && it.Status != queue.StatusVerifying {
		if _, err := d.p.DB.LeaseOf(ctx, it.ID); err != nil {
			writeError(w, &apiError{http.StatusConflict, "not_held", fmt.Sprintf("%s is %s and held by no one: nothing to release", it.Key, it.Status)})
			return
		}
	}
	why := "released by " + req.By
	if req.Reason != "" {
		why += ": " + req.Reason
	}
	if err := d.releaseLocked(ctx, it.ID, 0, queue.Person, req.By, why); err != nil {
		d.fail(w, err)
		return
	}
	d.verify.stop(it.ID)
	d.hub.publish("lease", map[string]any{"task": it.Key, "ended": true, "reason": why})
	d.writePlan(ctx)
	writeJSON(w, http.StatusOK, released(it.Key, queue.StatusOpen))
}

// holderMove is a release by the session that holds the task, fenced by
// its epoch. (A holder's resolve goes through verify: startVerify.)
func (d *Daemon) holderMove(w http.ResponseWriter, r *http.Request, action queue.Action) {
	s, e := d.sessionOf(r)
	if e != nil {
		writeError(w, e)
		return
	}
	var req leaseRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if action == queue.ActRelease && strings.TrimSpace(req.Reason) == "" {
		writeError(w, &apiError{http.StatusBadRequest, "no_reason", "release needs a reason: say why the task goes back (blocked, out of scope, ...)"})
		return
	}
	ref, ok := pathRef(w, r)
	if !ok {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ctx := r.Context()
	it, err := d.p.DB.Get(ctx, ref)
	if err != nil {
		d.fail(w, err)
		return
	}
	var status queue.Status
	err = d.p.DB.Update(ctx, func(tx *index.Tx) error {
		l, err := tx.Check(it.ID, req.Epoch)
		if err != nil {
			return err
		}
		if l.SessionID != s.ID {
			return fmt.Errorf("%w: %s holds %s, not %s", index.ErrHeld, l.Holder, it.Key, s.Name)
		}
		t, err := d.p.MoveFile(it, action, queue.Agent, s.Name)
		if err != nil {
			return err
		}
		detail := req.Reason
		if action == queue.ActRelease {
			if _, _, err := tx.End(it.ID, string(action)+": "+detail); err != nil {
				return err
			}
		}
		status = t.Status
		if err := tx.SyncFile(d.p.Tasks, project.Name(it)); err != nil {
			return err
		}
		return tx.Audit(index.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: string(action),
			TaskID: it.ID, Outcome: "ok", Detail: detail})
	})
	if err != nil && !index.Busy(err) {
		d.audit(ctx, index.AuditEntry{SessionID: s.ID, Actor: queue.Agent, Agent: s.Name, Action: string(action),
			TaskID: it.ID, Outcome: "refused", Detail: err.Error()})
	}
	if err != nil {
		d.fail(w, err)
		return
	}
	d.hub.publish("lease", map[string]any{"task": it.Key, "action": action, "status": status})
	d.writePlan(ctx)
	writeJSON(w, http.StatusOK, released(it.Key, status))
}

// releaseLocked gives a task back to the queue on behalf of snag or a
// person (epoch 0: whatever lease is live). d.mu must be held.
func (d *Daemon) releaseLocked(ctx context.Context, taskID string, epoch int64, actor queue.Actor, who, why string) error {
	it, err := d.p.DB.Get(ctx, queue.Ref{ID: taskID})
	if errors.Is(err, index.ErrNotFound) || err == nil && it.State == index.StateMissing {
		// The file is gone (moved out, or on another branch): end the lease
		// alone, the file has nothing to change; the missing row goes with it.
		return d.p.DB.Update(ctx, func(tx *index.Tx) error {
			if _, _, err := tx.End(taskID, why); err != nil {
				return err
			}
			if it != nil {
				if err := tx.SyncFile(d.p.Tasks, project.Name(it)); err != nil {
					return err
				}
			}
			return tx.Audit(index.AuditEntry{Actor: actor, Agent: who, Action: "release", TaskID: taskID, Outcome: "ok",
				Detail: why + " (the task file is missing: the lease ended, no file changed)"})
		})
	}
	if err != nil {
		return err
	}
	return d.p.DB.Update(ctx, func(tx *index.Tx) error {
		if _, _, err := tx.End(taskID, why); err != nil {
			return err
		}
		if it.Status == queue.StatusClaimed || it.Status == queue.StatusVerifying {
			if _, err := d.p.MoveFile(it, queue.ActRelease, actor, who); err != nil {
				return err
			}
			if err := tx.SyncFile(d.p.Tasks, project.Name(it)); err != nil {
				return err
			}
		}
		return tx.Audit(index.AuditEntry{Actor: actor, Agent: who, Action: "release", TaskID: taskID, Outcome: "ok", Detail: why})
	})
}

func (d *Daemon) audit(ctx context.Context, e index.AuditEntry) {
	if err := d.p.DB.Audit(ctx, e); err != nil {
		d.log.Warn("audit", "err", err)
	}
}

// procStart reads a process's start time (clock ticks since boot) from
// /proc, or 0 where there is none.
func procStart(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces and parentheses: fields
	// are counted after its closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return 0
	}
	n, _ := strconv.ParseInt(fields[19], 10, 64) // field 22 overall
	return n
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// alive reports whether a session's process is still the one that
// registered: the same pid with the same start time, on this boot. A
// session of another host or boot is never judged: it counts as alive.
func alive(s index.Session) bool {
	if s.PID <= 0 || s.BootID == "" || s.BootID != bootID() {
		return true
	}
	start := procStart(s.PID)
	return start != 0 && start == s.PIDStart
}
