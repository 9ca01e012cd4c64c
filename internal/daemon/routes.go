package daemon

import (
	"cmp"
	"context"
	"fmt"
	"image"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
)

func (d *Daemon) routes(ctx context.Context) http.Handler {
	mux := http.NewServeMux()
	d.guard.pair = newPairing(d.home(), d.root, d.port, d.log)
	mux.HandleFunc("GET /health", d.health)
	// Browsers ask for /favicon.ico on every page of the board, without
	// the token: nothing, rather than a 401 in the console.
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=86400")
		w.WriteHeader(http.StatusNoContent)
	})
	d.svc = newService(d)
	d.serveOps(mux, d.svc)
	mux.HandleFunc("POST /tasks", handle(d, route{}, d.addTask))
	mux.HandleFunc("POST /captures", handle(d, route{}, d.addCapture))
	mux.HandleFunc("POST /pairing-codes", handle(d, route{caller: person, refusal: "a person pairs the browser extension: snag pair"}, d.pairingCode))
	mux.HandleFunc("POST /pair", d.pair)
	mux.HandleFunc("GET /capture-credentials", handle(d, route{caller: person, refusal: "a person lists the paired extensions: snag pair --list"}, d.listCredentials))
	mux.HandleFunc("DELETE /capture-credentials", handle(d, route{caller: person, refusal: "a person revokes the extension's credentials: snag pair --revoke"}, d.revokeCredentials))
	mux.HandleFunc("POST /tasks/{ref}/{action}", handle(d, route{ref: true}, d.moveTask))
	mux.HandleFunc("GET /search", handle(d, route{}, d.search))
	mux.HandleFunc("POST /tasks/{ref}/claim", handle(d, route{ref: true, caller: agent}, d.claim))
	mux.HandleFunc("POST /claim", handle(d, route{caller: agent}, d.claim))
	mux.HandleFunc("POST /tasks/{ref}/release", handle(d, route{ref: true}, d.release))
	mux.HandleFunc("POST /tasks/{ref}/resolve", handle(d, route{ref: true, caller: agent, refusal: resolveRefusal}, d.verify))
	mux.HandleFunc("POST /tasks/{ref}/accept", handle(d, route{ref: true, caller: person, refusal: acceptRefusal}, d.accept))
	mux.HandleFunc("POST /tasks/{ref}/edit", handle(d, route{ref: true, caller: person,
		refusal: "a person edits a task's fields (snag edit): an agent adds what it found to the inbox"}, d.editTask))
	mux.HandleFunc("POST /verify/{ref}", handle(d, route{ref: true}, d.verify))
	mux.HandleFunc("GET /verify/{ref}", handle(d, route{ref: true}, d.getVerify))
	mux.HandleFunc("GET /sessions/{id}/stream", d.ready503(func(w http.ResponseWriter, r *http.Request) { d.stream(ctx, w, r) }))
	mux.HandleFunc("POST /reindex", handle(d, route{}, d.reindex))
	mux.HandleFunc("POST /rescan", handle(d, route{}, func(ctx context.Context, c *call[struct{}]) (answer, error) {
		// A full rescan now, as the watcher's timer would run it: for a
		// person who wants the index to have seen their latest edits.
		d.e.Rescan(ctx)
		return ok(api.Rescanned{Done: true}), nil
	}))
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) { d.serveEvents(ctx, w, r) })
	d.mcp = d.mcpHandler(ctx)
	mux.Handle(MCPPath, d.mcp) // MCP over Streamable HTTP: POST, GET (its SSE stream), DELETE
	noOAuth := func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "snagd has no OAuth: send Authorization: Bearer with the token in " + d.guard.tokenFile})
	}
	mux.HandleFunc("/.well-known/", noOAuth)
	mux.HandleFunc(MCPPath+"/.well-known/", noOAuth)
	if d.servesBoard() {
		mux.HandleFunc("/", d.mountBoard(mux))
	} else {
		// A browser names no worktree: the board is the main worktree's
		// view's, and the other views keep no board (about a megabyte each).
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no such endpoint: " + r.Method + " " + r.URL.Path +
				" (the board is the main worktree's: snag open)"})
		})
	}
	public := func(r *http.Request) bool {
		return r.URL.Path == "/health" || r.URL.Path == "/favicon.ico" || wellKnown(r)
	}
	used := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !public(r) {
			d.lastUse.Store(time.Now().UnixNano())
		}
		mux.ServeHTTP(w, r)
	})
	return d.guard.wrap(public, used)
}

// servesBoard reports whether this view mounts the board: the main
// worktree's view and the primary (the first opened), which between them
// are every view a request naming no worktree reaches.
func (d *Daemon) servesBoard() bool {
	return d.host == nil || d == d.host.primary || d.root == d.host.mainRoot()
}

// ready503 answers 503 with Retry-After until the first full rescan is done,
// so nothing is served from an index that may not match the files.
func (d *Daemon) ready503(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !d.e.Ready() {
			writeError(w, &apiError{Status: http.StatusServiceUnavailable, Code: "starting", Message: "snagd is reading the task files: try again in a moment"})
			return
		}
		h(w, r)
	}
}

func (d *Daemon) health(w http.ResponseWriter, r *http.Request) {
	h := Health{Service: "snagd", Root: d.root, GitCommonDir: d.gitCommon, PID: os.Getpid(), Port: d.port,
		Version: d.opts.Version}
	if d.host != nil {
		h.Repository, h.Worktrees = d.host.state, d.host.roots()
		if asked, ok := r.Context().Value(askedKey{}).(string); ok {
			h.Worktree = asked
		}
	}
	if err := d.failure(); err != nil {
		h.Error = err.Error()
	}
	if d.opened.Load() && d.e.Ready() {
		h.Ready, h.Polling = true, d.e.Polling()
		c, _ := d.e.Counts(r.Context())
		h.Counts = c
		if r.URL.Query().Get("progress") != "" {
			p := d.e.Progress()
			h.Progress = &api.Progress{Sweeps: p.Sweeps, Batches: p.Batches, SettlesDue: p.SettlesDue, Settles: p.Settles, Reconciles: p.Reconciles}
		}
	}
	if n := r.URL.Query().Get("nonce"); n != "" && len(n) <= 256 {
		h.Proof = d.tok.Proof(n)
	}
	writeJSON(w, http.StatusOK, h)
}

// maxList is the most tasks one GET /tasks answers; the next page follows
// from its cursor.
const maxList = 10000

// newTask reads an add's request: its kind, severity and files are checked.
func newTask(req api.AddRequest) (engine.NewTask, error) {
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

func (d *Daemon) addTask(ctx context.Context, c *call[addRequest]) (answer, error) {
	req := c.body
	nt, err := newTask(req)
	if err != nil {
		return answer{}, err
	}
	// A person's task is vetted and open; an agent's (a request with its
	// session) is unvetted and goes to the inbox until a person promotes it.
	actor, who := queue.Person, req.By
	if c.session != nil {
		actor, who = queue.Agent, c.session.Name
	}
	t, path, err := d.e.Add(ctx, nt, actor, who)
	if err != nil {
		return answer{}, err
	}
	out := added(t, project.Rel(path))
	if actor == queue.Person {
		out.Warnings = d.e.AddWarnings(ctx, t)
	}
	return answer{http.StatusCreated, out}, nil
}

// addCapture makes a capture an inbox task (engine.AddCapture).
func (d *Daemon) addCapture(ctx context.Context, c *call[api.CaptureRequest]) (answer, error) {
	req := c.body
	ext := fromExtension(c.r)
	if ext != "" && req.AllowHost {
		return answer{}, &apiError{Status: http.StatusForbidden, Code: "capture_only", Message: "the browser extension cannot widen browser.allowed_hosts: add the page's host to browser.allowed_hosts in .snag/config.json, or capture it with snag capture --allow-host"}
	}
	nt, err := newTask(api.AddRequest{Title: "capture", Kind: req.Kind, Severity: req.Severity, Files: req.Files})
	if err != nil {
		return answer{}, err
	}
	in := engine.Capture{URL: req.URL, Title: req.Title, Viewport: req.Viewport, UserAgent: req.UserAgent,
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
	if in.Screenshot, err = engine.DecodeImageData(req.Screenshot); err != nil {
		return answer{}, err
	}
	if req.Crop != "" {
		if in.Crop, err = engine.DecodeImageData(req.Crop); err != nil {
			return answer{}, err
		}
	}
	who := req.By
	switch {
	case c.session != nil:
		who = c.session.Name
	case ext != "":
		who = "browser extension"
	}
	t, path, err := d.e.AddCapture(ctx, in, who)
	if err != nil {
		return answer{}, err
	}
	out := api.Captured{Added: added(t, project.Rel(path)), Source: t.Source}
	if tc := t.Capture; tc != nil {
		out.Screenshot, out.Crop = tc.Screenshots[0], tc.Crop
	}
	return answer{http.StatusCreated, out}, nil
}

// networkError is a failed request as a capture's frontmatter lists it:
// "500 GET URL", or "failed GET URL: why".
func networkError(ne api.NetworkError) string {
	method := cmp.Or(strings.ToUpper(ne.Method), "GET")
	if ne.Status >= 400 {
		return fmt.Sprintf("%d %s %s", ne.Status, method, ne.URL)
	}
	return fmt.Sprintf("failed %s %s: %s", method, ne.URL, cmp.Or(ne.Error, "no answer"))
}

var personMoves = map[string]queue.Action{
	"promote": queue.ActPromote, "reject": queue.ActReject, "cancel": queue.ActCancel, "reopen": queue.ActReopen,
}

func (d *Daemon) moveTask(ctx context.Context, c *call[moveRequest]) (answer, error) {
	action, found := personMoves[c.r.PathValue("action")]
	if !found {
		return answer{}, &engine.Error{Kind: engine.ErrNotFound, Code: "not_found", Message: "no such move: " + c.r.PathValue("action")}
	}
	t, err := d.e.PersonMove(ctx, c.ref, action, c.body.By)
	if err != nil {
		return answer{}, err
	}
	return ok(moved(t)), nil
}

// editTask is POST /tasks/{ref}/edit: a person's change of a task's fields.
func (d *Daemon) editTask(ctx context.Context, c *call[editRequest]) (answer, error) {
	ed, err := taskEdit(c.body)
	if err != nil {
		return answer{}, err
	}
	out, err := d.e.Edit(ctx, c.ref, ed, c.body.By)
	if err != nil {
		return answer{}, err
	}
	return ok(edited(ctx, d.e, out)), nil
}

// taskEdit reads an edit's values, refusing a kind, severity or file that
// no task may have.
func taskEdit(req api.EditRequest) (engine.TaskEdit, error) {
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

func (d *Daemon) search(ctx context.Context, c *call[struct{}]) (answer, error) {
	qs := readQuery(c.r, "q", "limit")
	q, limit := qs.str("q"), min(qs.int("limit", 0, 1<<30, 0), 100)
	if qs.err != nil {
		return answer{}, qs.err
	}
	hits, err := d.e.Search(ctx, q, limit)
	if err != nil {
		return answer{}, &apiError{Status: http.StatusBadRequest, Code: "bad_query", Message: err.Error()}
	}
	out := searchResult(hits)
	notes, err := d.e.SearchNotes(ctx, q, max(limit, 5))
	if err != nil {
		return answer{}, err
	}
	if len(notes) > 0 {
		out.Notes = notesWire(notes)
	}
	return ok(out), nil
}

// ToolHeader names the MCP tool a request serves, for the audit log: the
// bridge sends it, with the session, on every request a tool call makes.
const ToolHeader = api.ToolHeader

// reindex rebuilds the index from the task files, as snag reindex does
// when no daemon runs; live state is kept and leases are reconciled with
// what the files now say.
func (d *Daemon) reindex(ctx context.Context, c *call[moveRequest]) (answer, error) {
	st, err := d.e.Reindex(ctx, c.body.By)
	if err != nil {
		return answer{}, err
	}
	return ok(api.Reindexed{Files: st.Files, Failed: st.Failed, MS: st.Duration.Milliseconds()}), nil
}
