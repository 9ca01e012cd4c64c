package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/snagdev/snag/board"
	"github.com/snagdev/snag/index"
	"github.com/snagdev/snag/project"
	"github.com/snagdev/snag/queue"
)

// The board is snagd's web page for a person: the queue by status, the
// inbox review, each task, the activity log, the agents and the problems.
// It is served on the API's port; the package board renders it and this
// file gathers what it shows and makes the changes it asks for, through the
// same code paths as the CLI's requests. A browser gets in with a one-time
// login code (see boardGate in guard.go).

// boardUI serves the board's pages and forms.
type boardUI struct {
	d     *Daemon
	views *board.Views
	gate  *boardGate
}

// LoginCodesPath is where a holder of the token (snag open) asks for a
// one-time login link to the board.
const LoginCodesPath = "/login-codes"

// boardPagePath matches the paths of the board's pages, forms and assets:
// the paths a board session opens.
var boardPagePath = regexp.MustCompile(`^/(|inbox|activity|agents|problems|login|logout|task/[^/]+|board/.+)$`)

// mountBoard adds the board's routes to mux and lets the guard admit a
// browser with a board session to them. It returns the handler for a path
// nothing else serves: a page for a browser, JSON for everyone else.
func (d *Daemon) mountBoard(mux *http.ServeMux) http.HandlerFunc {
	views, err := board.New()
	if err != nil {
		panic(err) // the templates are embedded: a test parses them
	}
	gate := newBoardGate(d.port)
	ui := &boardUI{d: d, views: views, gate: gate}
	gate.covers = func(r *http.Request) bool {
		if r.URL.Path == "/events" {
			return r.Method == http.MethodGet
		}
		if boardPagePath.MatchString(r.URL.Path) {
			return true
		}
		// A browser opening a path snagd does not serve gets the board's
		// page saying so (or its login page), not the API's 401 in JSON.
		_, pattern := mux.Handler(r)
		return pattern == "/" && wantsPage(r)
	}
	gate.open = func(r *http.Request) bool {
		return r.Method == http.MethodGet && (r.URL.Path == "/login" || strings.HasPrefix(r.URL.Path, "/board/static/"))
	}
	gate.refuse = func(w http.ResponseWriter, r *http.Request, status int, heading, message string) {
		cmd := ""
		if status == http.StatusUnauthorized {
			cmd = "snag open"
		}
		ui.answer(w, r, status, heading, message, cmd)
	}
	gate.unauthorized = d.guard.unauthorized
	d.guard.board = gate

	mux.HandleFunc("GET /{$}", ui.ready(ui.boardPage))
	mux.HandleFunc("GET /inbox", ui.ready(ui.inboxPage))
	mux.HandleFunc("GET /task/{ref}", ui.ready(ui.taskPage))
	mux.HandleFunc("GET /activity", ui.ready(ui.activityPage))
	mux.HandleFunc("GET /agents", ui.ready(ui.agentsPage))
	mux.HandleFunc("GET /problems", ui.ready(ui.problemsPage))
	mux.HandleFunc("GET /login", ui.login)
	mux.HandleFunc("POST /logout", ui.logout)
	mux.Handle("GET /board/static/", http.StripPrefix("/board/static/", ui.static()))
	mux.HandleFunc("GET /board/shots/{name}", ui.ready(ui.shot))
	mux.HandleFunc("POST /board/tasks/{ref}/{action}", ui.ready(ui.act))
	mux.HandleFunc("POST /board/bulk", ui.ready(ui.bulk))
	mux.HandleFunc("POST /board/sessions/{id}/end", ui.ready(ui.endAgent))
	mux.HandleFunc("POST "+LoginCodesPath, ui.loginCode)
	return func(w http.ResponseWriter, r *http.Request) {
		if wantsPage(r) {
			ui.answer(w, r, http.StatusNotFound, "No such page", "snagd serves no page at "+r.URL.Path+".", "")
			return
		}
		writeError(w, &apiError{http.StatusNotFound, "not_found", "no such endpoint: " + r.Method + " " + r.URL.Path})
	}
}

// wantsPage reports whether a browser is opening the address as a page:
// a GET that accepts HTML. The snag CLI, the MCP bridge and scripts ask
// for JSON.
func wantsPage(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		strings.Contains(r.Header.Get("Accept"), "text/html") && !wantsJSON(r)
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

// loginURL mints a login code and returns the link that uses it.
func (g *boardGate) loginURL(by string) string {
	code, _ := g.mint(by)
	return fmt.Sprintf("http://127.0.0.1:%d/login?code=%s", g.port, code)
}

// securityHeaders go on every page: no script but the board's own file, no
// framing, no referrer (a login link must not leak), no sniffing.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
}

func (ui *boardUI) render(w http.ResponseWriter, status int, page string, data any) {
	var buf bytes.Buffer
	if err := ui.views.Render(&buf, page, data); err != nil {
		ui.d.log.Error("board: render", "page", page, "err", err)
		http.Error(w, "the board could not draw this page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	securityHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// wantsJSON reports whether the board's script sent the request: it reads
// JSON answers; a plain form post gets a page or a redirect.
func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

// answer tells the person how a request went: JSON for the script, a page
// for a plain form.
func (ui *boardUI) answer(w http.ResponseWriter, r *http.Request, status int, heading, message, command string) {
	if wantsJSON(r) {
		securityHeaders(w.Header())
		writeJSON(w, status, map[string]any{"ok": status < 400, "message": message})
		return
	}
	p := &board.MessagePage{Page: board.Page{Head: heading}, Status: status, Heading: heading, Message: message, Command: command}
	if s := sessionOfBoard(r); s != nil && status != http.StatusUnauthorized {
		if ui.d.ready.Load() {
			p.Page = ui.page(r, heading, "") // the tabs' counts, as on every page
			p.Live = false
		}
		p.CSRF = s.CSRF
		p.Back = "/"
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	ui.render(w, status, board.PageMessage, p)
}

// ready answers with a page saying so until the first full rescan is done.
func (ui *boardUI) ready(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !ui.d.ready.Load() {
			ui.answer(w, r, http.StatusServiceUnavailable, "Starting", "snagd is reading the task files: reload in a moment.", "")
			return
		}
		h(w, r)
	}
}

func (ui *boardUI) static() http.Handler {
	files := http.FileServerFS(board.Static())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// page fills what every page has: the session's CSRF token and the counts
// the tabs show.
func (ui *boardUI) page(r *http.Request, title, nav string) board.Page {
	p := board.Page{Head: title, Nav: nav, Live: true}
	if s := sessionOfBoard(r); s != nil {
		p.CSRF = s.CSRF
	}
	ctx := r.Context()
	if inbox, err := ui.d.p.DB.List(ctx, index.Filter{Statuses: []queue.Status{queue.StatusInbox}, Limit: maxList}); err == nil {
		p.Inbox = len(inbox.Rows)
	}
	if c, err := ui.d.p.DB.Count(ctx); err == nil {
		p.Problems = c.Problems
	}
	return p
}

func (ui *boardUI) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := statusOf(err), err.Error()
	switch status {
	case http.StatusServiceUnavailable:
		msg = busyMessage
	case http.StatusInternalServerError:
		ui.d.log.Error("board: request failed", "path", r.URL.Path, "err", err)
	}
	ui.answer(w, r, status, http.StatusText(status), msg, "")
}

// The columns of the board, in order.
var boardColumns = []struct {
	status queue.Status
	title  string
}{
	{queue.StatusInbox, "Inbox"}, {queue.StatusOpen, "Open"}, {queue.StatusClaimed, "Claimed"},
	{queue.StatusVerifying, "Verifying"}, {queue.StatusNeedsReview, "Needs review"}, {queue.StatusResolved, "Resolved recently"},
}

// recentResolved is how many resolved tasks the board shows, newest first;
// resolvedLooked is how many it reads to find them.
const (
	recentResolved = 10
	resolvedLooked = 300
)

func (ui *boardUI) boardPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	f := board.Filter{Kind: q.Get("kind"), Plan: q.Get("plan")}
	f.Wave, _ = strconv.Atoi(q.Get("wave"))
	pg, err := ui.d.p.DB.List(ctx, index.Filter{All: true, Limit: maxList})
	if err != nil {
		ui.fail(w, r, err)
		return
	}
	out := &board.BoardPage{Page: ui.page(r, "Board", board.PageBoard), Filter: f, Kinds: queue.Kinds}
	cols := map[queue.Status]*board.Column{}
	for _, c := range boardColumns {
		out.Columns = append(out.Columns, board.Column{Status: c.status, Title: c.title})
	}
	for i := range out.Columns {
		cols[out.Columns[i].Status] = &out.Columns[i]
	}
	waves, plans := map[int]bool{}, map[string]bool{}
	var resolved []*index.Row
	for _, row := range pg.Rows {
		if row.ID == "" && row.State != index.StateOK {
			out.Broken++ // never parsed: no status to place it by
			continue
		}
		if row.Status != queue.StatusCancelled {
			waves[row.Wave] = true
			if row.Plan != "" {
				plans[row.Plan] = true
			}
		}
		if (f.Wave != 0 && row.Wave != f.Wave) || (f.Kind != "" && string(row.Kind) != f.Kind) || (f.Plan != "" && row.Plan != f.Plan) {
			continue
		}
		if row.Status == queue.StatusResolved {
			resolved = append(resolved, row)
			continue
		}
		if c := cols[row.Status]; c != nil {
			c.Cards = append(c.Cards, board.CardOf(row))
		}
	}
	res := cols[queue.StatusResolved]
	res.Cards, res.Note = ui.recent(ctx, resolved)
	for wv := range waves {
		out.Waves = append(out.Waves, wv)
	}
	sort.Ints(out.Waves)
	for pl := range plans {
		out.Plans = append(out.Plans, pl)
	}
	sort.Strings(out.Plans)
	ui.render(w, http.StatusOK, board.PageBoard, out)
}

// recent picks the most recently updated of the resolved tasks. The index
// lists tasks in queue order, so it reads up to resolvedLooked of them to
// find their update times.
func (ui *boardUI) recent(ctx context.Context, rows []*index.Row) ([]board.Card, string) {
	type dated struct {
		row *index.Row
		at  time.Time
	}
	var ds []dated
	for _, row := range rows[:min(len(rows), resolvedLooked)] {
		d := dated{row: row}
		if it, err := ui.d.p.DB.Get(ctx, queue.Ref{ID: row.ID}); err == nil && it.Task != nil {
			d.at = it.Task.Updated
		}
		ds = append(ds, d)
	}
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].at.After(ds[j].at) })
	var cards []board.Card
	for _, d := range ds[:min(len(ds), recentResolved)] {
		cards = append(cards, board.CardOf(d.row))
	}
	note := ""
	if len(rows) > len(cards) {
		note = fmt.Sprintf("the %d most recent of %d (snag list --status resolved shows all)", len(cards), len(rows))
	}
	return cards, note
}

func (ui *boardUI) inboxPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	pg, err := ui.d.p.DB.List(ctx, index.Filter{Statuses: []queue.Status{queue.StatusInbox}, Limit: maxList})
	if err != nil {
		ui.fail(w, r, err)
		return
	}
	out := &board.InboxPage{Page: ui.page(r, "Inbox", board.PageInbox), Severities: queue.Severities}
	for _, row := range pg.Rows {
		item := board.InboxItem{Card: board.CardOf(row)}
		if it, err := ui.d.p.DB.Get(ctx, queue.Ref{ID: row.ID}); err == nil && it.Task != nil {
			item.Body = strings.TrimSpace(string(it.Task.Body))
			item.Capture = it.Task.Capture
			item.Files = it.Task.SuspectFiles
			item.Created = it.Task.Created
		}
		out.Items = append(out.Items, item)
	}
	ui.render(w, http.StatusOK, board.PageInbox, out)
}

// auditScan is how many of the latest audit entries the activity and task
// pages read.
const auditScan = 2000

func (ui *boardUI) taskPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ref, err := queue.ParseRef(r.PathValue("ref"))
	if err != nil {
		ui.answer(w, r, http.StatusNotFound, "No such task", err.Error(), "")
		return
	}
	it, err := ui.d.p.DB.Get(ctx, ref)
	if err != nil {
		ui.fail(w, r, err)
		return
	}
	out := &board.TaskPage{Page: ui.page(r, it.Key+" "+it.Title, ""), Card: board.CardOf(&it.Row), Task: it.Task,
		File: ui.d.p.Rel(it.Path), Severities: queue.Severities}
	if out.Card.Key == "" {
		out.Head = it.Path
	}
	if it.Task != nil {
		out.Body = board.Markdown(it.Task.Body, it.Trust != queue.TrustUnvetted)
		if c := it.Task.Capture; c != nil {
			for _, s := range c.Screenshots {
				if name, ok := strings.CutPrefix(path.Clean(s), "shots/"); ok && shotName.MatchString(name) {
					out.Shots = append(out.Shots, "/board/shots/"+url.PathEscape(name))
				}
			}
		}
	}
	if st, _, err := ui.d.verifyState(ctx, it); err == nil {
		out.Verify = board.Verify{Running: st.Running, Outcome: st.Outcome, Reason: st.Reason, LastAt: st.LastAt, History: st.History}
	}
	if es, err := ui.d.p.DB.AuditTail(ctx, auditScan); err == nil {
		for _, e := range slices.Backward(es) {
			if e.TaskID == it.ID && it.ID != "" {
				out.Audit = append(out.Audit, board.Entry{AuditEntry: e, Task: it.Key})
			}
		}
	}
	out.Actions = personActions(it.Status)
	ui.render(w, http.StatusOK, board.PageTask, out)
}

// personActions are the moves a person may make from a status.
func personActions(s queue.Status) []board.Action {
	switch s {
	case queue.StatusInbox:
		return []board.Action{{Name: "promote", Label: "Promote"}, {Name: "reject", Label: "Reject", Danger: true}}
	case queue.StatusOpen, queue.StatusClaimed, queue.StatusVerifying:
		return []board.Action{{Name: "cancel", Label: "Cancel", Danger: true}}
	case queue.StatusNeedsReview:
		return []board.Action{{Name: "accept", Label: "Resolve"}, {Name: "reopen", Label: "Reopen"}, {Name: "cancel", Label: "Cancel", Danger: true}}
	case queue.StatusResolved, queue.StatusCancelled:
		return []board.Action{{Name: "reopen", Label: "Reopen"}}
	}
	return nil
}

func (ui *boardUI) activityPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	es, err := ui.d.p.DB.AuditTail(ctx, auditScan)
	if err != nil {
		ui.fail(w, r, err)
		return
	}
	keys := ui.keys(ctx)
	out := &board.ActivityPage{Page: ui.page(r, "Activity", board.PageActivity),
		Agent: r.URL.Query().Get("agent"), Action: r.URL.Query().Get("action"), Scanned: len(es)}
	agents, acts := map[string]bool{}, map[string]bool{}
	for _, e := range slices.Backward(es) {
		en := board.Entry{AuditEntry: e, Task: keys[e.TaskID]}
		if en.Task == "" {
			en.Task = e.TaskID
		}
		agents[en.Who()], acts[e.Action] = true, true
		if (out.Agent != "" && en.Who() != out.Agent) || (out.Action != "" && e.Action != out.Action) {
			continue
		}
		if len(out.Entries) < 500 {
			out.Entries = append(out.Entries, en)
		}
	}
	out.Shown = len(out.Entries)
	out.Agents, out.Acts = sortedKeys(agents), sortedKeys(acts)
	ui.render(w, http.StatusOK, board.PageActivity, out)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// keys maps task ids to aliases.
func (ui *boardUI) keys(ctx context.Context) map[string]string {
	m := map[string]string{}
	if pg, err := ui.d.p.DB.List(ctx, index.Filter{All: true, Limit: maxList}); err == nil {
		for _, row := range pg.Rows {
			if row.Key != "" {
				m[row.ID] = row.Key
			}
		}
	}
	return m
}

func (ui *boardUI) agentsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ss, err := ui.d.p.DB.LiveSessions(ctx)
	if err != nil {
		ui.fail(w, r, err)
		return
	}
	leases, err := ui.d.p.DB.Leases(ctx)
	if err != nil {
		ui.fail(w, r, err)
		return
	}
	out := &board.AgentsPage{Page: ui.page(r, "Agents", board.PageAgents)}
	bySession := map[int64][]board.Held{}
	for _, l := range leases {
		h := board.Held{Key: l.TaskID, Epoch: l.Epoch, Acquired: l.Acquired, Detached: l.Detached, Holder: l.Holder}
		if it, err := ui.d.p.DB.Get(ctx, queue.Ref{ID: l.TaskID}); err == nil {
			h.Key, h.Title = it.Key, it.Title
			if it.Task != nil {
				h.Files = it.Task.SuspectFiles
			}
		}
		if l.Detached {
			out.Detached = append(out.Detached, h)
			continue
		}
		bySession[l.SessionID] = append(bySession[l.SessionID], h)
	}
	acts := ui.d.activities(ss)
	for _, s := range ss {
		out.Agents = append(out.Agents, board.Agent{Session: s, Held: bySession[s.ID], Activity: acts[s.ID]})
	}
	ui.render(w, http.StatusOK, board.PageAgents, out)
}

// endAgent ends an agent's session for the person logged in to the board:
// its tasks go back to the queue.
func (ui *boardUI) endAgent(w http.ResponseWriter, r *http.Request) {
	s := sessionOfBoard(r)
	if s == nil {
		ui.answer(w, r, http.StatusForbidden, "Refused", "the board's forms are for a board session: the CLI has snag agents end", "")
		return
	}
	if err := r.ParseForm(); err != nil {
		ui.answer(w, r, http.StatusBadRequest, "Refused", "the form could not be read: "+err.Error(), "")
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		ui.answer(w, r, http.StatusBadRequest, "Refused", "no such session: the agents page lists the live ones", "")
		return
	}
	name, released, e := ui.d.endForPerson(r.Context(), id, s.By, r.PostForm.Get("reason"))
	if e != nil {
		ui.answer(w, r, e.Status, "Refused", e.Message, "")
		return
	}
	ui.done(w, r, fmt.Sprintf("ended %s's session: %d task(s) back in the queue", name, released))
}

func (ui *boardUI) problemsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rows, err := ui.d.p.DB.Problems(ctx)
	if err != nil {
		ui.fail(w, r, err)
		return
	}
	out := &board.ProblemsPage{Page: ui.page(r, "Problems", board.PageProblems)}
	for _, row := range rows {
		kind := "invalid"
		switch {
		case row.State == index.StateConflict:
			kind = "conflict"
		case row.State == index.StateMissing:
			kind = "missing"
		case row.State == index.StateOK && row.Dup:
			kind = "duplicate"
		}
		msg := row.Error
		if msg == "" && row.Dup {
			msg = "another file has the same id or alias " + row.Key + ": give one of them a fresh one (snag doctor --fix)"
		}
		out.Problems = append(out.Problems, board.Problem{Path: ui.d.p.Rel(row.Path), Kind: kind, Message: msg})
	}
	// Dependencies that point nowhere: the index keeps them, a person fixes
	// the file.
	if tasks, _, err := ui.d.p.DB.Snapshot(ctx); err == nil {
		all := make([]*queue.Task, len(tasks))
		for i, l := range tasks {
			all[i] = l.Task
		}
		lookup := queue.NewLookup(all)
		for _, l := range tasks {
			for _, dep := range l.Task.DependsOn {
				if _, ok := lookup.Find(dep); !ok {
					out.Problems = append(out.Problems, board.Problem{Path: ui.d.p.Rel(l.File), Kind: "dangling",
						Message: fmt.Sprintf("%s depends on %s, which no task file has: fix or remove that depends_on entry", l.Task.Key, dep)})
				}
			}
		}
	}
	ui.render(w, http.StatusOK, board.PageProblems, out)
}

// shotName is the shape of a screenshot file the board serves from .snag/shots/.
var shotName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.(png|jpe?g|webp|gif)$`)

// shot serves a capture's screenshot from .snag/shots/: a plain file by a
// plain name, never a symlink, never outside the folder.
func (ui *boardUI) shot(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !shotName.MatchString(name) {
		ui.answer(w, r, http.StatusNotFound, "No such screenshot", "screenshots are image files in .snag/shots/", "")
		return
	}
	root, err := os.OpenRoot(filepath.Join(ui.d.root, project.Folder, "shots"))
	if err != nil {
		ui.answer(w, r, http.StatusNotFound, "No such screenshot", "this project has no .snag/shots/ folder", "")
		return
	}
	defer root.Close()
	fi, err := root.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() {
		ui.answer(w, r, http.StatusNotFound, "No such screenshot", "no plain file "+name+" in .snag/shots/", "")
		return
	}
	f, err := root.Open(name)
	if err != nil {
		ui.answer(w, r, http.StatusNotFound, "No such screenshot", err.Error(), "")
		return
	}
	defer f.Close()
	securityHeaders(w.Header())
	w.Header().Set("Content-Type", mime.TypeByExtension(filepath.Ext(name)))
	http.ServeContent(w, r, name, fi.ModTime(), f)
}

// login trades a one-time code for a session cookie and goes to the board.
func (ui *boardUI) login(w http.ResponseWriter, r *http.Request) {
	cookie, ok := ui.gate.login(r.URL.Query().Get("code"))
	if !ok {
		ui.answer(w, r, http.StatusUnauthorized, "This login link does not work",
			"A login link works once, for 10 minutes. Run this in the project for a fresh one:", "snag open")
		return
	}
	securityHeaders(w.Header())
	http.SetCookie(w, cookie)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (ui *boardUI) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, ui.gate.logout(r))
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "message": "logged out", "redirect": "/"})
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// loginCode mints a one-time login link for a holder of the token: snag
// open asks for one.
func (ui *boardUI) loginCode(w http.ResponseWriter, r *http.Request) {
	var req moveRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if r.Header.Get(SessionHeader) != "" {
		writeError(w, &apiError{http.StatusForbidden, "person_only", "the board is for people: an agent has the MCP tools"})
		return
	}
	by := req.By
	if by == "" {
		by = "person"
	}
	code, expires := ui.gate.mint(by)
	writeJSON(w, http.StatusCreated, map[string]any{
		"url":     fmt.Sprintf("http://127.0.0.1:%d/login?code=%s", ui.d.port, code),
		"expires": expires.UTC(),
	})
}

// back is where a plain form post returns to: a path on this board.
func back(r *http.Request) string {
	b := r.PostForm.Get("back")
	if !strings.HasPrefix(b, "/") || strings.HasPrefix(b, "//") || strings.HasPrefix(b, "/\\") || !boardPagePath.MatchString(strings.SplitN(b, "?", 2)[0]) {
		return "/"
	}
	return b
}

// done answers a form that worked: JSON for the script, a redirect back for
// a plain post.
func (ui *boardUI) done(w http.ResponseWriter, r *http.Request, message string) {
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "message": message})
		return
	}
	http.Redirect(w, r, back(r), http.StatusSeeOther)
}

// act makes one move on a task for the person logged in to the board.
func (ui *boardUI) act(w http.ResponseWriter, r *http.Request) {
	s := sessionOfBoard(r)
	if s == nil {
		ui.answer(w, r, http.StatusForbidden, "Refused", "the board's forms are for a board session: the CLI and scripts use the JSON API", "")
		return
	}
	if err := r.ParseForm(); err != nil {
		ui.answer(w, r, http.StatusBadRequest, "Refused", "the form could not be read: "+err.Error(), "")
		return
	}
	ref := r.PathValue("ref")
	msg, status := ui.move(r.Context(), ref, r.PathValue("action"), r.PostForm, s.By)
	if status != http.StatusOK {
		ui.answer(w, r, status, "Refused", msg, "")
		return
	}
	ui.done(w, r, msg)
}

// bulk makes one move on each selected task.
func (ui *boardUI) bulk(w http.ResponseWriter, r *http.Request) {
	s := sessionOfBoard(r)
	if s == nil {
		ui.answer(w, r, http.StatusForbidden, "Refused", "the board's forms are for a board session: the CLI and scripts use the JSON API", "")
		return
	}
	if err := r.ParseForm(); err != nil {
		ui.answer(w, r, http.StatusBadRequest, "Refused", "the form could not be read: "+err.Error(), "")
		return
	}
	refs := r.PostForm["ref"]
	action := r.PostForm.Get("move")
	if len(refs) == 0 {
		ui.answer(w, r, http.StatusBadRequest, "Nothing selected", "tick the items to "+action+" first", "")
		return
	}
	if action != "promote" && action != "reject" {
		ui.answer(w, r, http.StatusBadRequest, "Refused", "a bulk action is promote or reject", "")
		return
	}
	var ok, failed []string
	for _, ref := range refs[:min(len(refs), 500)] {
		msg, status := ui.move(r.Context(), ref, action, r.PostForm, s.By)
		if status == http.StatusOK {
			ok = append(ok, ref)
		} else {
			failed = append(failed, msg)
		}
	}
	msg := ""
	if len(ok) > 0 {
		msg = map[string]string{"promote": "promoted ", "reject": "rejected "}[action] + strings.Join(ok, ", ")
	}
	if len(failed) > 0 {
		msg = strings.TrimPrefix(msg+"; refused: "+strings.Join(failed, "; "), "; ")
		ui.answer(w, r, http.StatusConflict, "Some were refused", msg, "")
		return
	}
	ui.done(w, r, msg)
}

// move makes one move for a person. It returns a sentence for the person
// and 200, or why not and an HTTP status.
func (ui *boardUI) move(ctx context.Context, ref, action string, form url.Values, by string) (string, int) {
	if _, err := queue.ParseRef(ref); err != nil {
		return err.Error(), http.StatusBadRequest
	}
	switch action {
	case "promote":
		var sev queue.Severity
		if s := form.Get("severity"); s != "" {
			if !slices.Contains(queue.Severities, queue.Severity(s)) {
				return "unknown severity " + strconv.Quote(s), http.StatusBadRequest
			}
			sev = queue.Severity(s)
		}
		wave := 0
		if s := strings.TrimSpace(form.Get("wave")); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 9999 {
				return "wave: want a whole number from 1 to 9999", http.StatusBadRequest
			}
			wave = n
		}
		t, err := ui.d.promote(ctx, ref, sev, wave, by)
		if err != nil {
			return err.Error(), statusOf(err)
		}
		return fmt.Sprintf("%s promoted to open (%s, wave %d)", t.Key, t.Severity, t.Wave), http.StatusOK
	case "reject", "cancel", "reopen", "accept":
		r, err := queue.ParseRef(ref)
		if err != nil {
			return err.Error(), http.StatusBadRequest
		}
		var t *queue.Task
		if action == "accept" {
			t, err = ui.d.accept(ctx, r, by)
		} else {
			t, err = ui.d.personMove(ctx, r, personMoves[action], by)
		}
		if err != nil {
			return err.Error(), statusOf(err)
		}
		return fmt.Sprintf("%s is %s now", t.Key, strings.ReplaceAll(string(t.Status), "_", " ")), http.StatusOK
	}
	return "no such move: " + action, http.StatusNotFound
}

// statusOf is the HTTP status of a failed move.
func statusOf(err error) int {
	switch {
	case errors.Is(err, index.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, queue.ErrTransition), errors.Is(err, index.ErrAmbiguous), errors.Is(err, project.ErrNotClean):
		return http.StatusConflict
	case retryable(err), errors.Is(err, queue.ErrChanged):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// promote moves a task from the inbox to the queue for a person and, in
// the same turn of the writer's lock, sets the severity and wave they chose
// (zero values keep the file's).
func (d *Daemon) promote(ctx context.Context, ref string, sev queue.Severity, wave int, by string) (*queue.Task, error) {
	r, err := queue.ParseRef(ref)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := d.p.Move(ctx, r, queue.ActPromote, queue.Person, by)
	if err != nil {
		return nil, err
	}
	var fields []queue.Field
	var changed []string
	if sev != "" && sev != t.Severity {
		fields = append(fields, queue.Set("severity", string(sev)))
		changed = append(changed, "severity "+string(t.Severity)+" -> "+string(sev))
	}
	if wave != 0 && wave != t.Wave {
		fields = append(fields, queue.Set("wave", wave))
		changed = append(changed, fmt.Sprintf("wave %d -> %d", t.Wave, wave))
	}
	if len(fields) > 0 {
		it, err := d.p.DB.Get(ctx, queue.Ref{ID: t.ID})
		if err != nil {
			return nil, err
		}
		fields = append(fields, queue.Set("updated", time.Now().UTC().Truncate(time.Second)))
		_, _, err = d.p.Tasks.Update(project.Name(it), func(cur []byte) ([]byte, error) {
			return queue.Edit(cur, fields...)
		})
		if err != nil {
			return nil, fmt.Errorf("promoted %s, but setting %s failed: %w (edit the file)", t.Key, strings.Join(changed, ", "), err)
		}
		if _, err := d.p.DB.SyncFile(ctx, d.p.Tasks, project.Name(it)); err != nil {
			return nil, err
		}
		d.audit(ctx, index.AuditEntry{Actor: queue.Person, Agent: by, Action: "edit", TaskID: t.ID, Outcome: "ok",
			Detail: "on promotion from the board: " + strings.Join(changed, ", ")})
		if it, err := d.p.DB.Get(ctx, queue.Ref{ID: t.ID}); err == nil && it.Task != nil {
			t = it.Task
		}
	}
	d.writePlan(ctx)
	d.hub.publish("task", map[string]any{"key": t.Key, "status": t.Status})
	return t, nil
}
