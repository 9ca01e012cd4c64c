package daemon

import (
	"context"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/snag"
)

// sessionOps are the operations on agents' sessions: register, the live
// sessions, a person's end of one, and the audit log.
func (d *Daemon) sessionOps(hs ops.Handlers) {
	ops.Handle(hs, ops.Register, d.register)
	ops.Handle(hs, ops.ListSessions, d.listSessions)
	ops.Handle(hs, ops.EndSession, d.endSession)
	ops.Handle(hs, ops.Audit, d.auditLog)
}

func (d *Daemon) register(ctx context.Context, req ops.Registration) (snag.Session, error) {
	s, err := d.e.Register(ctx, index.Session{Name: req.Name, Client: req.Client, ClientVersion: req.ClientVersion,
		PID: req.PID, Host: req.Host, Transport: req.Transport, Root: req.Root})
	if err != nil {
		return snag.Session{}, err
	}
	return s.Wire(), nil
}

// listSessions is the live sessions, each with what snagd sees of it now
// (activities), and every live lease.
func (d *Daemon) listSessions(ctx context.Context, _ ops.None) (ops.Sessions, error) {
	ss, err := d.e.Sessions(ctx)
	if err != nil {
		return ops.Sessions{}, err
	}
	leases, err := d.e.Leases(ctx)
	if err != nil {
		return ops.Sessions{}, err
	}
	acts := d.activities(ss)
	views := make([]sessionView, 0, len(ss))
	for _, s := range ss {
		views = append(views, sessionView{Session: s, Activity: acts[s.ID]})
	}
	return sessionsAnswer(views, leases), nil
}

// endSession ends a live session for a person (an agent that is gone
// without saying so, or one to stop): its tasks go back to the queue, its
// MCP session over HTTP, if any, is closed, and the audit log says who.
func (d *Daemon) endSession(ctx context.Context, req ops.EndRequest) (ops.Ended, error) {
	name, released, err := d.endForPerson(ctx, req.ID, req.By, req.Reason)
	if err != nil {
		return ops.Ended{}, err
	}
	return ops.Ended{ID: req.ID, Name: name, Ended: true, Released: released}, nil
}

// maxAudit is the most entries one GET /audit answers: a larger limit or
// tail is read as this.
const maxAudit = 1000

// auditLog is the audit log after an entry, or its latest entries (tail,
// which wins over after and limit).
func (d *Daemon) auditLog(ctx context.Context, q ops.AuditQuery) (ops.AuditLog, error) {
	var es []snag.AuditEntry
	var err error
	if tail := min(q.Tail, maxAudit); tail > 0 {
		es, err = d.e.AuditTail(ctx, tail)
	} else {
		es, err = d.e.AuditLog(ctx, q.After, min(q.Limit, maxAudit))
	}
	if err != nil {
		return ops.AuditLog{}, err
	}
	return auditLog(es), nil
}
