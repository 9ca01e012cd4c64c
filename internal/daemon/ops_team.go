package daemon

import (
	"context"
	"net/http"
	"time"

	"github.com/snagdev/snag/internal/engine/fileclaims"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/snag"
)

// teamOps are the operations of team coordination: an agent's context,
// file claims, the commit guard, reports and handoffs. Each is a thin
// reading of its request around one engine call; an agent's own (context,
// claim_files, release_files, report) is only admitted with its session.
func (d *Daemon) teamOps(hs ops.Handlers) {
	ops.Handle(hs, ops.TeamContext, d.teamContext)
	ops.Handle(hs, ops.ListFiles, d.listFiles)
	ops.Handle(hs, ops.ClaimFiles, d.claimFiles)
	ops.Handle(hs, ops.ReleaseFiles, d.releaseFiles)
	ops.Handle(hs, ops.CheckFiles, d.checkFiles)
	ops.Handle(hs, ops.ForceReleaseFiles, d.forceReleaseFiles)
	ops.Handle(hs, ops.Guard, d.commitGuard)
	ops.Handle(hs, ops.Report, d.report)
	ops.Handle(hs, ops.Reports, d.messages(index.MessageReport))
	ops.Handle(hs, ops.Handoff, d.handoff)
	ops.Handle(hs, ops.Handoffs, d.messages(index.MessageHandoff))
}

func (d *Daemon) teamContext(ctx context.Context, req ops.ContextRequest) (ops.Context, error) {
	out, _, err := d.contextOf(ctx, *sessionIn(ctx), req.Name)
	return out, err
}

func (d *Daemon) listFiles(ctx context.Context, _ ops.None) (ops.FileClaims, error) {
	out, err := d.w.FileClaims.List(ctx)
	if err != nil {
		return ops.FileClaims{}, err
	}
	return ops.FileClaims{Claims: orEmpty(out)}, nil
}

func (d *Daemon) claimFiles(ctx context.Context, req ops.FilesRequest) (ops.FilesClaimed, error) {
	got, err := d.w.FileClaims.Claim(ctx, *sessionIn(ctx), fileclaims.Request{Paths: req.Paths, Task: req.Task,
		TTL: time.Duration(req.TTLSec) * time.Second, Shared: req.Shared})
	return filesClaimed(got, err)
}

func (d *Daemon) releaseFiles(ctx context.Context, req ops.FilesRequest) (ops.FilesReleased, error) {
	out, err := d.w.FileClaims.Release(ctx, *sessionIn(ctx), req.Paths)
	if err != nil {
		return ops.FilesReleased{}, err
	}
	return ops.FilesReleased{Released: orEmpty(out)}, nil
}

func (d *Daemon) checkFiles(ctx context.Context, req ops.FilesRequest) (ops.FilesChecked, error) {
	if len(req.Paths) == 0 {
		return ops.FilesChecked{}, &apiError{Status: http.StatusBadRequest, Code: "no_paths", Message: "check: name the paths to check"}
	}
	out, err := d.w.FileClaims.Check(ctx, sessionIn(ctx), req.Paths)
	if err != nil {
		return ops.FilesChecked{}, err
	}
	return ops.FilesChecked{Checks: wireChecks(out)}, nil
}

// forceReleaseFiles is a person's release of a claimed path from whoever
// holds it.
func (d *Daemon) forceReleaseFiles(ctx context.Context, req ops.ForceReleaseRequest) (ops.FilesReleased, error) {
	by := req.By
	if by == "" {
		by = "person"
	}
	out, err := d.w.FileClaims.PersonRelease(ctx, req.Path, by, req.Reason)
	if err != nil {
		return ops.FilesReleased{}, err
	}
	return ops.FilesReleased{Released: orEmpty(out)}, nil
}

func (d *Daemon) commitGuard(ctx context.Context, req ops.GuardRequest) (ops.Guarded, error) {
	out, err := d.w.FileClaims.Guard(ctx, req.Committer, req.Paths)
	if err != nil {
		return ops.Guarded{}, err
	}
	return ops.Guarded{Blocked: wireChecks(out)}, nil
}

func (d *Daemon) report(ctx context.Context, req ops.ReportRequest) (snag.Message, error) {
	m, err := d.w.Brief.Report(ctx, *sessionIn(ctx), req.Message, req.Task, req.Detail)
	if err != nil {
		return snag.Message{}, err
	}
	return m.Wire(), nil
}

// Of GET /reports and GET /handoffs: a page is 20 messages unless the
// query asks for another limit, and at most maxMessages.
const (
	defMessages = 20
	maxMessages = 200
)

// messages is the latest messages of kind (index.MessageReport or
// index.MessageHandoff), newest first.
func (d *Daemon) messages(kind string) func(ctx context.Context, q ops.MessageQuery) (ops.Messages, error) {
	return func(ctx context.Context, q ops.MessageQuery) (ops.Messages, error) {
		limit := defMessages
		if q.Limit > 0 {
			limit = min(q.Limit, maxMessages)
		}
		ms, err := d.w.Brief.Messages(ctx, kind, q.To, limit)
		if err != nil {
			return ops.Messages{}, err
		}
		return ops.Messages{Messages: index.WireMessages(ms)}, nil
	}
}

// handoff leaves a note to an agent by name, an agent's (with its
// session) or a person's, and moves a task's lease to it when asked.
func (d *Daemon) handoff(ctx context.Context, req ops.HandoffRequest) (ops.HandedOff, error) {
	by := req.By
	if by == "" {
		by = "person"
	}
	got, err := d.w.Graph.Handoff(ctx, sessionIn(ctx), by, req)
	if err != nil {
		return ops.HandedOff{}, err
	}
	return ops.HandedOff{Message: got.Message.Wire(), Moved: got.Moved, Key: got.Key,
		Epoch: got.Epoch, Live: got.Live, Host: got.Host}, nil
}
