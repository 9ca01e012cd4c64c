package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/board"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// This file mounts the web board (package board) on snagd's port and meets
// its Backend: each method is a mapping onto the daemon's reads and writes,
// the same code paths the JSON API's handlers take, with the index's values
// turned into the API's (index/wire.go) and errors into the board's kinds.

// LoginCodesPath is where a holder of the token (snag open) asks for a
// one-time login link to the board.
const LoginCodesPath = "/login-codes"

// mountBoard adds the board's routes to mux and hands the guard the
// board's gate, which lets a browser with a board session in to them. It
// returns the handler for a path nothing else serves: a page for a
// browser, JSON for everyone else.
func (d *Daemon) mountBoard(mux *http.ServeMux) http.HandlerFunc {
	srv, err := board.NewServer(boardBackend{d}, board.Options{Port: d.port, Log: d.log, Unauthorized: d.guard.unauthorized})
	if err != nil {
		panic(err) // the templates are embedded: a test parses them
	}
	srv.Mount(mux)
	d.guard.board = srv.Gate()
	mux.HandleFunc("POST "+LoginCodesPath, d.loginCode)
	return func(w http.ResponseWriter, r *http.Request) {
		if board.WantsPage(r) {
			srv.NotFound(w, r)
			return
		}
		writeError(w, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no such endpoint: " + r.Method + " " + r.URL.Path})
	}
}

// loginCode mints a one-time login link for a holder of the token: snag
// open asks for one.
func (d *Daemon) loginCode(w http.ResponseWriter, r *http.Request) {
	var req moveRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if r.Header.Get(SessionHeader) != "" {
		writeError(w, &apiError{Status: http.StatusForbidden, Code: "person_only", Message: "the board is for people: an agent has the MCP tools"})
		return
	}
	by := req.By
	if by == "" {
		by = "person"
	}
	link, expires := d.guard.board.LoginURL(by)
	writeJSON(w, http.StatusCreated, api.LoginCode{URL: link, Expires: expires.UTC()})
}

// boardPerson is who a login code minted at start is for: the person who
// started snagd.
func boardPerson() string {
	for _, k := range []string{"SNAG_USER", "USER", "USERNAME"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "person"
}

// boardBackend is the daemon as the board's Backend.
type boardBackend struct{ d *Daemon }

func (b boardBackend) Ready() bool { return b.d.e.Ready() }

func (b boardBackend) Tasks(ctx context.Context, statuses ...queue.Status) ([]api.Task, error) {
	pg, err := b.d.e.List(ctx, index.Filter{Statuses: statuses, All: len(statuses) == 0, Limit: maxList})
	if err != nil {
		return nil, boardErr(err)
	}
	return index.WireRows(pg.Rows), nil
}

func (b boardBackend) Task(ctx context.Context, ref queue.Ref) (*api.TaskDetail, error) {
	it, err := b.d.e.Get(ctx, ref)
	if err != nil {
		return nil, boardErr(err)
	}
	out := taskDetail(ctx, b.d.e, it, nil)
	return &out, nil
}

func (b boardBackend) Verify(ctx context.Context, ref queue.Ref) (*api.VerifyState, error) {
	st, _, err := b.d.e.Verification(ctx, ref)
	if err != nil {
		return nil, boardErr(err)
	}
	return &st, nil
}

func (b boardBackend) Counts(ctx context.Context) (api.Counts, error) {
	c, err := b.d.e.Counts(ctx)
	return c, boardErr(err)
}

func (b boardBackend) Problems(ctx context.Context) ([]board.Problem, error) {
	rows, err := b.d.e.Problems(ctx)
	if err != nil {
		return nil, boardErr(err)
	}
	var out []board.Problem
	for _, row := range rows {
		kind := "invalid"
		switch {
		case row.State == snag.StateConflict:
			kind = "conflict"
		case row.State == snag.StateMissing:
			kind = "missing"
		case row.State == snag.StateOK && row.Duplicate:
			kind = "duplicate"
		}
		msg := row.Error
		if msg == "" && row.Duplicate {
			msg = "another file has the same id or alias " + row.Key + ": a key two tasks share is settled by snagd (the task made first keeps it, the other gets a new key); a file copied with its id is for a person: snag doctor says which"
		}
		out = append(out, board.Problem{Path: project.Rel(row.Path), Kind: kind, Message: msg})
	}
	// Dependencies that point nowhere: the index keeps them, a person fixes
	// the file.
	if tasks, _, err := b.d.e.Snapshot(ctx); err == nil {
		all := make([]*queue.Task, len(tasks))
		for i, l := range tasks {
			all[i] = l.Task
		}
		lookup := queue.NewLookup(all)
		for _, l := range tasks {
			for _, dep := range l.Task.DependsOn {
				if _, ok := lookup.Find(dep); !ok {
					out = append(out, board.Problem{Path: project.Rel(l.File), Kind: "dangling",
						Message: fmt.Sprintf("%s depends on %s, which no task file has: fix or remove that depends_on entry", l.Task.Key, dep)})
				}
			}
		}
	}
	return out, nil
}

func (b boardBackend) Audit(ctx context.Context, n int) ([]api.AuditEntry, error) {
	es, err := b.d.e.AuditTail(ctx, n)
	if err != nil {
		return nil, boardErr(err)
	}
	return orEmpty(es), nil
}

func (b boardBackend) Sessions(ctx context.Context) (api.Sessions, error) {
	ss, err := b.d.e.Sessions(ctx)
	if err != nil {
		return api.Sessions{}, boardErr(err)
	}
	leases, err := b.d.e.Leases(ctx)
	if err != nil {
		return api.Sessions{}, boardErr(err)
	}
	acts := b.d.activities(ss)
	views := make([]sessionView, len(ss))
	for i, s := range ss {
		views[i] = sessionView{Session: s, Activity: acts[s.ID]}
	}
	return sessionsAnswer(views, leases), nil
}

func (b boardBackend) Team(ctx context.Context) (board.Team, error) {
	tb := b.d.e.TeamBoard(ctx)
	out := board.Team{On: tb.On, Unreachable: tb.Unreachable}
	agents := map[int64]int{}
	for _, a := range tb.Agents {
		agents[a.Clone]++
	}
	for _, c := range tb.Clones {
		out.Clones = append(out.Clones, board.TeamClone{Host: c.Host, Root: c.Root, Branch: c.Branch, Agents: agents[c.ID]})
	}
	for _, a := range tb.Agents {
		v := board.TeamAgent{Name: a.Name, Client: a.Client, Host: a.Host, Root: a.Root, Branch: a.Branch,
			Files: orEmpty(a.Files)}
		for _, h := range a.Tasks {
			v.Held = append(v.Held, board.TeamHeld{ID: h.ID, Here: h.Here,
				Held: board.Held{Key: h.Key, Title: h.Title, Epoch: h.Epoch, Acquired: h.Since, Holder: a.Holder()}})
		}
		out.Agents = append(out.Agents, v)
	}
	return out, nil
}

func (b boardBackend) Shots() string { return filepath.Join(b.d.root, project.Folder, "shots") }

func (b boardBackend) Promote(ctx context.Context, ref queue.Ref, sev queue.Severity, wave int, by string) (*queue.Task, error) {
	t, err := b.d.e.Promote(ctx, ref, sev, wave, by)
	return t, boardErr(err)
}

func (b boardBackend) Move(ctx context.Context, ref queue.Ref, act queue.Action, by string) (*queue.Task, error) {
	t, err := b.d.e.PersonMove(ctx, ref, act, by)
	return t, boardErr(err)
}

func (b boardBackend) Accept(ctx context.Context, ref queue.Ref, by string) (*queue.Task, error) {
	t, err := b.d.e.Accept(ctx, ref, by)
	return t, boardErr(err)
}

func (b boardBackend) Add(ctx context.Context, req api.AddRequest) (api.Added, error) {
	nt, err := newTask(req)
	if err != nil {
		return api.Added{}, boardErr(err)
	}
	t, path, err := b.d.e.Add(ctx, nt, queue.Person, req.By)
	if err != nil {
		return api.Added{}, boardErr(err)
	}
	out := added(t, project.Rel(path))
	out.Warnings = b.d.e.AddWarnings(ctx, t)
	return out, nil
}

func (b boardBackend) Edit(ctx context.Context, ref queue.Ref, req api.EditRequest) (api.Edited, error) {
	ed, err := taskEdit(req)
	if err != nil {
		return api.Edited{}, boardErr(err)
	}
	out, err := b.d.e.Edit(ctx, ref, ed, req.By)
	if err != nil {
		return api.Edited{}, boardErr(err)
	}
	return edited(ctx, b.d.e, out), nil
}

func (b boardBackend) EndSession(ctx context.Context, id int64, by, reason string) (string, int, error) {
	name, released, err := b.d.endForPerson(ctx, id, by, reason)
	return name, released, boardErr(err)
}

// boardErr marks an error of the engine with the board's kind of failure,
// by the status the API answers it with; a busy or changing store says so
// in a sentence.
func boardErr(err error) error {
	if err == nil {
		return nil
	}
	a := answerOf(err)
	switch {
	case a.Status == http.StatusNotFound:
		return board.Because(board.ErrNotFound, err)
	case a.Status == http.StatusServiceUnavailable:
		return board.Because(board.ErrBusy, errors.New(a.Message))
	case a.Status < http.StatusInternalServerError:
		return board.Because(board.ErrRefused, err)
	}
	return err
}

func (b boardBackend) Files(ctx context.Context) ([]api.FileClaim, error) {
	cs, err := b.d.e.FileClaims(ctx)
	return orEmpty(cs), boardErr(err)
}

func (b boardBackend) Reports(ctx context.Context, n int) ([]api.Message, error) {
	ms, err := b.d.e.Messages(ctx, index.MessageReport, "", n)
	return index.WireMessages(ms), boardErr(err)
}

func (b boardBackend) Plans(ctx context.Context) ([]api.Plan, error) {
	vs, err := b.d.e.Plans(ctx)
	out := make([]api.Plan, len(vs))
	for i, v := range vs {
		out[i] = planWire(v)
	}
	return out, boardErr(err)
}

func (b boardBackend) Plan(ctx context.Context, slug string) (*api.PlanDetail, error) {
	v, err := b.d.e.Plan(ctx, slug)
	if err != nil {
		return nil, boardErr(err)
	}
	d := planDetail(v)
	return &d, nil
}

func (b boardBackend) SetPlanStatus(ctx context.Context, slug string, status queue.PlanStatus, by string) error {
	_, err := b.d.e.UpdatePlan(ctx, queue.Person, by, slug, engine.PlanEdit{Status: status})
	return boardErr(err)
}

func (b boardBackend) Notes(ctx context.Context, q api.NoteQuery) ([]api.Note, error) {
	ns, err := b.d.e.Notes(ctx, engine.NoteFilter{Type: q.Type, Branch: q.Branch, Task: q.Task, Limit: q.Limit})
	return notesWire(ns), boardErr(err)
}

func (b boardBackend) Graph(ctx context.Context, q api.NoteQuery) (api.Graph, error) {
	ns, ls, err := b.d.e.Graph(ctx, engine.NoteFilter{Type: q.Type, Branch: q.Branch, Task: q.Task, Limit: q.Limit})
	if err != nil {
		return api.Graph{}, boardErr(err)
	}
	return graphWire(ns, ls), nil
}

func (b boardBackend) Note(ctx context.Context, ref string) (*api.NoteDetail, error) {
	n, err := b.d.e.Note(ctx, ref)
	if err != nil {
		return nil, boardErr(err)
	}
	d := nodeWire(n)
	return &d, nil
}
