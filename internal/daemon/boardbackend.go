package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/board"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// This file mounts the web board (package board) on snagd's port. The
// board calls snagd's operations in process (d.svc, as a person) and
// reads through boardBackend what is not an operation of the API: whether
// snagd is ready, the counts, the problems, the team and the shots folder.

// LoginCodesPath is where a holder of the token (snag open) asks for a
// one-time login link to the board.
const LoginCodesPath = "/login-codes"

// mountBoard adds the board's routes to mux and hands the guard the
// board's gate, which lets a browser with a board session in to them. It
// returns the handler for a path nothing else serves: a page for a
// browser, JSON for everyone else.
func (d *Daemon) mountBoard(mux *http.ServeMux) http.HandlerFunc {
	srv, err := board.NewServer(d.svc, boardBackend{d}, board.Options{Port: d.port, Log: d.log, Unauthorized: d.guard.unauthorized})
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
	var req api.MoveRequest
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

func (b boardBackend) Team(ctx context.Context) (board.Team, error) {
	tb := b.d.w.Brief.TeamBoard(ctx)
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

// boardErr is err as the board reads a failure: an *ops.Error, worded as
// the API answers it (answerOf).
func boardErr(err error) error {
	if err == nil {
		return nil
	}
	return answerOf(err)
}
