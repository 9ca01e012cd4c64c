package daemon

import (
	"context"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/queue"
)

// An agent that no connection stands for (MCP 2026-07-28 over /mcp) is a
// session held by its handles: it lives while calls name them, for
// Options.HandleIdle after the last, and its leases end with it. A
// restarted bridge, or an agent that lost its context, names the lease
// handle its claim answered to act on that lease again.

// handleIdle is how long an agent known by its handle lives after the
// last call that named it.
func (d *Daemon) handleIdle() time.Duration {
	if d.opts.HandleIdle > 0 {
		return d.opts.HandleIdle
	}
	return DefaultHandleIdle
}

// heldEvery is how often an agent's expiry is written to snag.db as calls
// name it: a restart gives it what was written, at least the grace.
const heldEvery = 30 * time.Second

// holdAgent moves session id's end, an agent known by its handle, to
// HandleIdle from now.
func (d *Daemon) holdAgent(ctx context.Context, id int64) {
	idle := d.handleIdle()
	d.w.Sessions.Hold(id, idle)
	now := time.Now()
	if last, ok := d.held.Load(id); ok && now.Sub(last.(time.Time)) < heldEvery {
		return
	}
	d.held.Store(id, now)
	if err := d.e.Hold(ctx, id, now.Add(idle)); err != nil {
		d.log.Warn("record an agent's idle end", "session", id, "err", err)
	}
}

// registerAgent registers an agent that no connection stands for, named
// from its client, holds it for HandleIdle and answers its session with
// the agent handle that names it from now on (bound to cred).
func (d *Daemon) registerAgent(ctx context.Context, client, version, cred string) (index.Session, string, error) {
	if client == "" {
		client = "mcp"
	}
	idle := d.handleIdle()
	s, err := d.e.Register(ctx, index.Session{Client: client, ClientVersion: version, PID: os.Getpid(), Transport: "http",
		Expires: time.Now().Add(idle)})
	if err != nil {
		return s, "", d.answer(err)
	}
	d.held.Store(s.ID, time.Now())
	d.w.Sessions.Hold(s.ID, idle)
	h, err := d.e.MintHandle(ctx, index.HandleAgent, s.ID, "", 0, cred)
	if err != nil {
		d.e.EndSession(s.ID, "its handle could not be made")
		return s, "", d.answer(err)
	}
	return s, h, nil
}

// revokeStale forgets, once the view's engine is ready, the handles made
// with a credential of kind ("local:", "hosted:") other than keep, the one
// in force: a token replaced while snagd was down. The agents known only
// by them end, and their leases go back.
func (d *Daemon) revokeStale(ctx context.Context, kind, keep string) {
	whenReady(ctx, d, func() {
		n, err := d.e.RevokeHandlesBut(ctx, kind, keep)
		switch {
		case err != nil:
			d.log.Error("revoke the handles of a replaced token", "err", err)
		case n > 0:
			d.log.Info("the handles of a token replaced while snagd was down are revoked", "kind", kind, "agents_ended", n)
		}
	})
}

// revokeHandles forgets the handles made with cred, a token that changed,
// and ends the agents known only by them.
func (d *Daemon) revokeHandles(cred string) {
	if d.e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := d.e.RevokeHandles(ctx, cred)
	if err != nil {
		d.log.Error("revoke the handles of a rotated token", "err", err)
		return
	}
	d.log.Info("handles of the old token revoked", "agents_ended", n)
}

type handleKey struct{}

// handleIn is the handle an operation's caller named, once admitted; nil
// when it named none.
func handleIn(ctx context.Context) *index.Handle {
	h, _ := ctx.Value(handleKey{}).(*index.Handle)
	return h
}

// leaseOps are what a lease handle may be named for: its lease's own
// operations. For anything else an agent names itself by its agent
// handle: a lease handle passed to another agent to finish one task does
// not hand over the whole agent.
var leaseOps = map[string]bool{
	ops.Release.Name: true, ops.Resolve.Name: true, ops.PlanVerify.Name: true, ops.Handoff.Name: true,
	ops.ClaimFiles.Name: true, ops.ReleaseFiles.Name: true, ops.CheckFiles.Name: true,
}

// admitHandle reads the handle c names and admits op for it: with no
// session, c acts for the handle's agent; a lease handle is good only for
// its lease's operations (leaseOps). Only once op is admitted (who) does
// naming the handle act: it keeps its agent alive, and a lease handle
// held by another session of the same credential (the agent's bridge
// restarted) brings the lease to c's session. Calls of a session that name
// a handle are taken one at a time, so two of them cannot both move the
// lease.
func (s *service) admitHandle(ctx context.Context, op string, c ops.Caller) (context.Context, ops.Caller, error) {
	d := s.d
	if c.Session != 0 {
		d.takeMu.Lock()
		defer d.takeMu.Unlock()
	}
	h, owner, err := d.e.Handle(ctx, c.Handle, c.Cred)
	if err != nil {
		return ctx, c, d.answer(err)
	}
	if h.Kind == index.HandleLease && !leaseOps[op] {
		return ctx, c, &apiError{Status: http.StatusBadRequest, Code: "bad_handle", Message: "a lease handle acts on its lease only " +
			"(release, resolve, handoff, file claims): name yourself with your agent handle (agent: ah_...) for anything else"}
	}
	acting := c
	if acting.Session == 0 {
		acting.Session = h.SessionID
	}
	if err := s.who(op, acting); err != nil {
		return ctx, c, err
	}
	if !owner.Expires.IsZero() {
		d.holdAgent(ctx, h.SessionID)
	}
	if c.Session != 0 && c.Session != h.SessionID && h.Kind == index.HandleLease {
		if h, err = d.bringBack(ctx, h, owner, c.Session); err != nil {
			return ctx, c, err
		}
	}
	return context.WithValue(ctx, handleKey{}, &h), acting, nil
}

// bringBack moves the lease handle h names from its session, from, to
// session to (the agent's new connection) under a new epoch, and answers
// the handle as it now stands.
func (d *Daemon) bringBack(ctx context.Context, h index.Handle, from index.Session, to int64) (index.Handle, error) {
	toS, err := d.e.Session(ctx, to)
	if err != nil {
		return h, &apiError{Status: http.StatusGone, Code: "session_ended", Message: err.Error()}
	}
	l, err := d.e.TakeBack(ctx, queue.Ref{ID: h.TaskID}, h.Epoch, from, toS)
	if err != nil {
		return h, d.answer(err)
	}
	h.SessionID, h.Epoch = toS.ID, l.Epoch
	if err := d.e.MoveHandle(ctx, h); err != nil {
		d.log.Warn("move a handle with its lease", "err", err)
	}
	return h, nil
}

// leaseOf is the task and epoch a holder's request acts on: the lease
// handle's, when the caller named one (ref, when given, must be its
// task), else ref and epoch as sent.
func (d *Daemon) leaseOf(ctx context.Context, ref string, epoch int64) (queue.Ref, int64, error) {
	h := handleIn(ctx)
	if h == nil || h.Kind != index.HandleLease {
		r, err := taskRef(ref)
		return r, epoch, err
	}
	if strings.TrimSpace(ref) != "" {
		r, err := taskRef(ref)
		if err != nil {
			return r, 0, err
		}
		it, err := d.e.Get(ctx, r)
		if err != nil {
			return queue.Ref{}, 0, err
		}
		if it.ID != h.TaskID {
			key := h.TaskID
			if held, err := d.e.Get(ctx, queue.Ref{ID: h.TaskID}); err == nil {
				key = held.Key
			}
			return queue.Ref{}, 0, &apiError{Status: http.StatusConflict, Code: "stale_handle",
				Message: "the handle names your lease of " + key + ", not " + it.Key + ": send that task's id with it, or the handle its own claim answered"}
		}
	}
	return queue.Ref{ID: h.TaskID}, h.Epoch, nil
}
