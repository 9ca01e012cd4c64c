package daemon

import (
	"cmp"
	"context"
	"fmt"
	"image"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/engine/capture"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// taskOps are the operations on tasks: list, get, add, search, claim,
// release, resolve, verify, capture and a person's moves.
func (d *Daemon) taskOps(hs ops.Handlers) {
	ops.Handle(hs, ops.ListTasks, d.listTasks)
	ops.Handle(hs, ops.GetTask, d.getTask)
	ops.Handle(hs, ops.AddTask, d.addTask)
	ops.Handle(hs, ops.Search, d.search)
	ops.Handle(hs, ops.ClaimTask, d.claim)
	ops.Handle(hs, ops.Release, d.release)
	ops.Handle(hs, ops.TakeBack, d.takeBack)
	ops.Handle(hs, ops.Edit, d.editTask)
	ops.Handle(hs, ops.Move, d.moveTask)
	ops.Handle(hs, ops.Capture, d.capture)
	ops.Handle(hs, ops.Reindex, d.reindex)
	ops.Handle(hs, ops.Rescan, d.rescan)
	d.verifyOps(hs)
}

// taskRef reads a request's task reference.
func taskRef(s string) (queue.Ref, error) {
	ref, err := queue.ParseRef(s)
	if err != nil {
		return ref, &apiError{Status: http.StatusBadRequest, Code: "bad_ref", Message: err.Error()}
	}
	return ref, nil
}

func (d *Daemon) listTasks(ctx context.Context, q ops.ListQuery) (ops.TaskList, error) {
	f := index.Filter{Plan: q.Plan, All: q.All, Cursor: q.Cursor, Wave: q.Wave, Limit: q.Limit, Statuses: q.Statuses, Kind: q.Kind}
	for _, st := range q.Statuses {
		if !st.Valid() {
			return ops.TaskList{}, &apiError{Status: http.StatusBadRequest, Code: "bad_status",
				Message: "unknown status " + strconv.Quote(string(st)) + " (want one of " + joinStrings(queue.Statuses) + ")"}
		}
	}
	if q.Kind != "" && !slices.Contains(queue.Kinds, q.Kind) {
		return ops.TaskList{}, &apiError{Status: http.StatusBadRequest, Code: "bad_kind",
			Message: "unknown kind " + strconv.Quote(string(q.Kind)) + " (want one of " + joinStrings(queue.Kinds) + ")"}
	}
	page, err := d.e.List(ctx, f)
	if err != nil {
		return ops.TaskList{}, err
	}
	return taskList(page), nil
}

func (d *Daemon) getTask(ctx context.Context, req ops.TaskRef) (snag.TaskDetail, error) {
	ref, err := taskRef(req.Ref)
	if err != nil {
		return snag.TaskDetail{}, err
	}
	st, it, err := d.w.Verifier.Verification(ctx, ref) // it: the row as the runs agree with
	if err != nil {
		return snag.TaskDetail{}, err
	}
	var v *snag.VerifyState
	if st.Running || st.Outcome != "" {
		st.History = nil // GET /verify/{ref} has it
		v = &st
	}
	return taskDetail(ctx, d.e, it, v), nil
}

// newTask reads an add's request: its kind, severity and files are checked.
func newTask(req ops.AddRequest) (engine.NewTask, error) {
	nt := engine.NewTask{Title: req.Title, Body: []byte(req.Body), Wave: req.Wave, Plan: req.Plan, DependsOn: req.DependsOn}
	if req.Kind != "" {
		if !slices.Contains(queue.Kinds, queue.Kind(req.Kind)) {
			return nt, &engine.Error{Kind: engine.ErrInvalid, Code: "bad_kind", Message: "unknown kind " + strconv.Quote(req.Kind)}
		}
		nt.Kind = queue.Kind(req.Kind)
	}
	if req.Severity != "" {
		if !slices.Contains(queue.Severities, queue.Severity(req.Severity)) {
			return nt, &engine.Error{Kind: engine.ErrInvalid, Code: "bad_severity", Message: "unknown severity " + strconv.Quote(req.Severity)}
		}
		nt.Severity = queue.Severity(req.Severity)
	}
	for _, f := range req.Files {
		ref, err := queue.ParseFileRef(f)
		if err != nil {
			return nt, &engine.Error{Kind: engine.ErrInvalid, Code: "bad_file", Message: err.Error()}
		}
		nt.Files = append(nt.Files, ref)
	}
	return nt, nil
}

// addTask files a task: a person's is vetted and open; an agent's (a
// request with its session) is unvetted and goes to the inbox until a
// person promotes it.
func (d *Daemon) addTask(ctx context.Context, req ops.AddRequest) (ops.Added, error) {
	nt, err := newTask(req)
	if err != nil {
		return ops.Added{}, err
	}
	actor, who := queue.Person, req.By
	if s := sessionIn(ctx); s != nil {
		actor, who = queue.Agent, s.Name
	}
	t, path, err := d.e.Add(ctx, nt, actor, who)
	if err != nil {
		return ops.Added{}, err
	}
	out := added(t, project.Rel(path))
	if actor == queue.Person {
		out.Warnings = d.e.AddWarnings(ctx, t)
	}
	return out, nil
}

func (d *Daemon) search(ctx context.Context, q ops.SearchQuery) (ops.SearchResult, error) {
	limit := min(q.Limit, 100)
	hits, err := d.e.Search(ctx, q.Q, limit)
	if err != nil {
		return ops.SearchResult{}, &apiError{Status: http.StatusBadRequest, Code: "bad_query", Message: err.Error()}
	}
	out := searchResult(hits)
	notes, err := d.w.Graph.SearchNotes(ctx, q.Q, max(limit, 5))
	if err != nil {
		return ops.SearchResult{}, err
	}
	if len(notes) > 0 {
		out.Notes = notesWire(notes)
	}
	return out, nil
}

// claim leases a task to the caller's session: the one req names, or the
// next ready one when it names none.
func (d *Daemon) claim(ctx context.Context, req ops.ClaimRequest) (ops.Claim, error) {
	var ref *queue.Ref
	if req.Ref != "" {
		r, err := taskRef(req.Ref)
		if err != nil {
			return ops.Claim{}, err
		}
		ref = &r
	}
	got, err := d.w.Worktrees.Claim(ctx, *sessionIn(ctx), ref, req.Force, req.Worktree, req.Base)
	if err != nil {
		return ops.Claim{}, err
	}
	if got.Task == nil {
		return ops.Claim{Reason: got.Reason}, nil
	}
	out := claimed(got.Task, got.Epoch)
	out.Worktree, out.Branch, out.Note = got.Worktree, got.Branch, got.Note
	if out.Handle, err = d.e.MintHandle(ctx, index.HandleLease, sessionIn(ctx).ID, got.Task.ID, got.Epoch, ops.CallerOf(ctx).Cred); err != nil {
		d.log.Warn("make a lease handle", "task", got.Task.Key, "err", err)
	}
	return out, nil
}

// release is the holder's release, fenced by its epoch (its lease
// handle's, when it names one).
func (d *Daemon) release(ctx context.Context, req ops.LeaseRequest) (ops.Released, error) {
	ref, epoch, err := d.leaseOf(ctx, req.Ref, req.Epoch)
	if err != nil {
		return ops.Released{}, err
	}
	got, err := d.e.Release(ctx, *sessionIn(ctx), ref, epoch, req.Reason)
	if err != nil {
		return ops.Released{}, err
	}
	return released(got.Key, got.Status), nil
}

// takeBack is a person's release of a task from whoever holds it.
func (d *Daemon) takeBack(ctx context.Context, req ops.TaskMove) (ops.Released, error) {
	if req.Severity != "" || req.Wave != 0 {
		return ops.Released{}, errPromoteOnly
	}
	ref, err := taskRef(req.Ref)
	if err != nil {
		return ops.Released{}, err
	}
	got, err := d.e.PersonRelease(ctx, ref, req.By, req.Reason)
	if err != nil {
		return ops.Released{}, err
	}
	return released(got.Key, got.Status), nil
}

// editTask is a person's change of a task's fields.
func (d *Daemon) editTask(ctx context.Context, req ops.EditRequest) (ops.Edited, error) {
	ref, err := taskRef(req.Ref)
	if err != nil {
		return ops.Edited{}, err
	}
	ed, err := taskEdit(req)
	if err != nil {
		return ops.Edited{}, err
	}
	out, err := d.e.Edit(ctx, ref, ed, req.By)
	if err != nil {
		return ops.Edited{}, err
	}
	return edited(ctx, d.e, out), nil
}

// taskEdit reads an edit's values, refusing a kind, severity or file that
// no task may have.
func taskEdit(req ops.EditRequest) (engine.TaskEdit, error) {
	ed := engine.TaskEdit{Title: req.Title, Wave: req.Wave, Plan: req.Plan, AddDeps: req.AddDeps, RemoveDeps: req.RemoveDeps}
	if req.Kind != nil {
		k := queue.Kind(*req.Kind)
		ed.Kind = &k
	}
	if req.Severity != nil {
		s := queue.Severity(*req.Severity)
		ed.Severity = &s
	}
	if req.Files != nil {
		files := []queue.FileRef{}
		for _, f := range *req.Files {
			ref, err := queue.ParseFileRef(f)
			if err != nil {
				return ed, &engine.Error{Kind: engine.ErrInvalid, Code: "bad_file", Message: err.Error()}
			}
			files = append(files, ref)
		}
		ed.Files = &files
	}
	return ed, nil
}

// capture makes a capture an inbox task (the capture service's Add): a person's
// (snag capture), an agent's, or the paired browser extension's.
func (d *Daemon) capture(ctx context.Context, req ops.CaptureRequest) (ops.Captured, error) {
	ext := ops.CallerOf(ctx).Extension
	if ext != "" && req.AllowHost {
		return ops.Captured{}, &apiError{Status: http.StatusForbidden, Code: "capture_only", Message: "the browser extension cannot widen browser.allowed_hosts: add the page's host to browser.allowed_hosts in .snag/config.json, or capture it with snag capture --allow-host"}
	}
	in, err := captureOf(req)
	if err != nil {
		return ops.Captured{}, err
	}
	who := req.By
	switch s := sessionIn(ctx); {
	case s != nil:
		who = s.Name
	case ext != "":
		who = "browser extension"
	}
	t, path, err := d.w.Capture.Add(ctx, in, who)
	if err != nil {
		return ops.Captured{}, err
	}
	out := ops.Captured{Added: added(t, project.Rel(path)), Source: t.Source}
	if tc := t.Capture; tc != nil {
		out.Screenshot, out.Crop = tc.Screenshots[0], tc.Crop
	}
	return out, nil
}

// captureOf reads a capture's request: its kind, severity and files are
// checked and its pictures decoded.
func captureOf(req ops.CaptureRequest) (capture.Capture, error) {
	nt, err := newTask(ops.AddRequest{Title: "capture", Kind: req.Kind, Severity: req.Severity, Files: req.Files})
	if err != nil {
		return capture.Capture{}, err
	}
	in := capture.Capture{URL: req.URL, Title: req.Title, Viewport: req.Viewport, UserAgent: req.UserAgent,
		ConsoleErrors: req.ConsoleErrors, Note: req.Note, Summary: req.Summary,
		Kind: nt.Kind, Severity: nt.Severity, Files: nt.Files, AllowWiderHost: req.AllowHost}
	if a := req.Anchor; a != nil {
		in.Selector, in.AnchorText, in.Box = a.Selector, a.Text, a.Box
	}
	if s := req.Scroll; s != nil {
		in.Scroll = image.Pt(int(math.Round(s.X)), int(math.Round(s.Y)))
	}
	for _, ne := range req.NetworkErrors {
		in.NetworkErrors = append(in.NetworkErrors, networkError(ne))
	}
	if in.Screenshot, err = capture.DecodeImageData(req.Screenshot); err != nil {
		return capture.Capture{}, err
	}
	if req.Crop != "" {
		if in.Crop, err = capture.DecodeImageData(req.Crop); err != nil {
			return capture.Capture{}, err
		}
	}
	return in, nil
}

// networkError is a failed request as a capture's frontmatter lists it:
// "500 GET URL", or "failed GET URL: why".
func networkError(ne ops.NetworkError) string {
	method := cmp.Or(strings.ToUpper(ne.Method), "GET")
	if ne.Status >= 400 {
		return fmt.Sprintf("%d %s %s", ne.Status, method, ne.URL)
	}
	return fmt.Sprintf("failed %s %s: %s", method, ne.URL, cmp.Or(ne.Error, "no answer"))
}

var personMoves = map[string]queue.Action{
	"promote": queue.ActPromote, "reject": queue.ActReject, "cancel": queue.ActCancel, "reopen": queue.ActReopen,
}

// moveTask is a person's promote, reject, cancel or reopen; any other
// action is no route (404).
func (d *Daemon) moveTask(ctx context.Context, req ops.TaskMove) (ops.Moved, error) {
	ref, err := taskRef(req.Ref)
	if err != nil {
		return ops.Moved{}, err
	}
	action, found := personMoves[req.Action]
	if !found {
		return ops.Moved{}, &engine.Error{Kind: engine.ErrNotFound, Code: "not_found", Message: "no such move: " + req.Action}
	}
	if req.Severity != "" || req.Wave != 0 {
		return d.promote(ctx, ref, action, req)
	}
	t, err := d.e.PersonMove(ctx, ref, action, req.By)
	if err != nil {
		return ops.Moved{}, err
	}
	return moved(t), nil
}

// errPromoteOnly refuses a promote's severity or wave on another move.
var errPromoteOnly = &apiError{Status: http.StatusBadRequest, Code: "bad_json",
	Message: "severity and wave: only a promote sets them (snag edit changes a task's fields)"}

// promote is a person's promote that sets the severity and wave they
// chose in the same write (the board's inbox does): the move and the
// file's fields under one turn of the writer's lock (engine.Promote).
// Another move refuses them.
func (d *Daemon) promote(ctx context.Context, ref queue.Ref, action queue.Action, req ops.TaskMove) (ops.Moved, error) {
	if action != queue.ActPromote {
		return ops.Moved{}, errPromoteOnly
	}
	sev := queue.Severity(req.Severity)
	if sev != "" && !slices.Contains(queue.Severities, sev) {
		return ops.Moved{}, &apiError{Status: http.StatusBadRequest, Code: "bad_severity",
			Message: "unknown severity " + strconv.Quote(req.Severity) + " (want one of " + joinStrings(queue.Severities) + ")"}
	}
	if req.Wave < 0 || req.Wave > 9999 {
		return ops.Moved{}, &apiError{Status: http.StatusBadRequest, Code: "bad_wave", Message: "wave: want a whole number from 1 to 9999"}
	}
	t, err := d.e.Promote(ctx, ref, sev, req.Wave, req.By)
	if err != nil {
		return ops.Moved{}, err
	}
	return moved(t), nil
}

// reindex rebuilds the index from the task files, as snag reindex does
// when no daemon runs; live state is kept and leases are reconciled with
// what the files now say.
func (d *Daemon) reindex(ctx context.Context, req ops.MoveRequest) (ops.Reindexed, error) {
	st, err := d.e.Reindex(ctx, req.By)
	if err != nil {
		return ops.Reindexed{}, err
	}
	return ops.Reindexed{Files: st.Files, Failed: st.Failed, MS: st.Duration.Milliseconds()}, nil
}

// rescan is a full rescan now, as the watcher's timer would run it: for a
// person who wants the index to have seen their latest edits.
func (d *Daemon) rescan(ctx context.Context, _ ops.None) (ops.Rescanned, error) {
	d.e.Rescan(ctx)
	return ops.Rescanned{Done: true}, nil
}
