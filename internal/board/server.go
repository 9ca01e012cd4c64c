package board

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/queue"
)

// Server serves the board's pages and forms over snagd's operations and a
// Backend, behind its [Gate]. Make one with [NewServer] and add its routes
// to snagd's mux with [Server.Mount]. It is safe for concurrent use.
type Server struct {
	svc   ops.Service
	b     Backend
	views *Views
	gate  *Gate
	log   *slog.Logger
}

// Options configure a Server.
type Options struct {
	// Port is the port snagd serves on: login links name it, and the
	// session cookie's name carries it (cookies are not kept apart by
	// port).
	Port int
	// Log gets the board's faults; nil: discard.
	Log *slog.Logger
	// Unauthorized answers a request to /events with neither the token
	// nor a board session, as snagd answers a request without the token
	// (alt is another way in, for its message).
	Unauthorized func(w http.ResponseWriter, r *http.Request, alt string)
}

// NewServer makes the board's server over snagd's operations svc (called
// as a person, ops.Caller's Via "board") and b.
func NewServer(svc ops.Service, b Backend, opts Options) (*Server, error) {
	views, err := New()
	if err != nil {
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{svc: svc, b: b, views: views, gate: newGate(opts.Port), log: opts.Log}
	s.gate.unauthorized = opts.Unauthorized
	s.gate.open = func(r *http.Request) bool {
		return r.Method == http.MethodGet && (r.URL.Path == "/login" || strings.HasPrefix(r.URL.Path, "/board/static/"))
	}
	s.gate.refuse = func(w http.ResponseWriter, r *http.Request, status int, heading, message string) {
		cmd := ""
		if status == http.StatusUnauthorized {
			cmd = "snag open"
		}
		s.answer(w, r, status, heading, message, cmd)
	}
	return s, nil
}

// Gate is the server's way in, for snagd's guard to pass requests without
// the token to, and for minting login codes.
func (s *Server) Gate() *Gate { return s.gate }

// pagePath matches the paths of the board's pages, forms and assets: the
// paths a board session opens.
var pagePath = regexp.MustCompile(`^/(|inbox|activity|agents|problems|login|logout|task/[^/]+|team/.+|board/.+)$`)

// Mount adds the board's routes to mux, and has the gate cover them, GET
// /events, and a browser opening a path mux serves only with its catch-all
// "/" pattern (which the caller registers, answering with
// [Server.NotFound] when [WantsPage]).
func (s *Server) Mount(mux *http.ServeMux) {
	s.gate.covers = func(r *http.Request) bool {
		if r.URL.Path == "/events" {
			return r.Method == http.MethodGet
		}
		if pagePath.MatchString(r.URL.Path) {
			return true
		}
		// A browser opening a path snagd does not serve gets the board's
		// page saying so (or its login page), not the API's 401 in JSON.
		_, pattern := mux.Handler(r)
		return pattern == "/" && WantsPage(r)
	}
	mux.HandleFunc("GET /{$}", s.ready(s.boardPage))
	mux.HandleFunc("GET /inbox", s.ready(s.inboxPage))
	mux.HandleFunc("GET /task/{ref}", s.ready(s.taskPage))
	mux.HandleFunc("GET /activity", s.ready(s.activityPage))
	mux.HandleFunc("GET /agents", s.ready(s.agentsPage))
	mux.HandleFunc("GET /problems", s.ready(s.problemsPage))
	mux.HandleFunc("GET /team/plans", s.ready(s.plansPage))
	mux.HandleFunc("GET /team/plans/{slug}", s.ready(s.planPage))
	mux.HandleFunc("GET /team/notes", s.ready(s.notesPage))
	mux.HandleFunc("GET /team/notes/{ref}", s.ready(s.notePage))
	mux.HandleFunc("GET /team/graph", s.ready(s.graphPage))
	mux.HandleFunc("POST /board/plans/{slug}/{action}", s.ready(s.planAct))
	mux.HandleFunc("GET /login", s.login)
	mux.HandleFunc("POST /logout", s.logout)
	mux.Handle("GET /board/static/", http.StripPrefix("/board/static/", s.static()))
	mux.HandleFunc("GET /board/shots/{name}", s.ready(s.shot))
	mux.HandleFunc("POST /board/tasks", s.ready(s.addTask))
	mux.HandleFunc("POST /board/tasks/{ref}/{action}", s.ready(s.act))
	mux.HandleFunc("POST /board/bulk", s.ready(s.bulk))
	mux.HandleFunc("POST /board/sessions/{id}/end", s.ready(s.endAgent))
}

// NotFound answers a browser that opened a path snagd serves no page at.
func (s *Server) NotFound(w http.ResponseWriter, r *http.Request) {
	s.answer(w, r, http.StatusNotFound, "No such page", "snagd serves no page at "+r.URL.Path+".", "")
}

// WantsPage reports whether a browser is opening the address as a page:
// a GET that accepts HTML. The snag CLI, the MCP bridge and scripts ask
// for JSON.
func WantsPage(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		strings.Contains(r.Header.Get("Accept"), "text/html") && !wantsJSON(r)
}

// wantsJSON reports whether the board's script sent the request: it reads
// JSON answers; a plain form post gets a page or a redirect.
func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// formAnswer is the JSON the board's script reads after a form.
type formAnswer struct {
	OK       bool   `json:"ok"`
	Message  string `json:"message"`
	Redirect string `json:"redirect,omitempty"`
}

func (s *Server) render(w http.ResponseWriter, status int, page string, data any) {
	var buf bytes.Buffer
	if err := s.views.Render(&buf, page, data); err != nil {
		s.log.Error("board: render", "page", page, "err", err)
		http.Error(w, "the board could not draw this page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	securityHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// answer tells the person how a request went: JSON for the script, a page
// for a plain form.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, status int, heading, message, command string) {
	if wantsJSON(r) {
		securityHeaders(w.Header())
		writeJSON(w, status, formAnswer{OK: status < 400, Message: message})
		return
	}
	p := &MessagePage{Page: Page{Head: heading}, Status: status, Heading: heading, Message: message, Command: command}
	if ss := SessionOf(r); ss != nil && status != http.StatusUnauthorized {
		if s.b.Ready() {
			p.Page = s.page(r, heading, "") // the tabs' counts, as on every page
			p.Live = false
		}
		p.CSRF = ss.CSRF
		p.Back = "/"
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	s.render(w, status, PageMessage, p)
}

// ready answers with a page saying so until the first full rescan is done.
func (s *Server) ready(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.b.Ready() {
			s.answer(w, r, http.StatusServiceUnavailable, "Starting", "snagd is reading the task files: reload in a moment.", "")
			return
		}
		h(w, r)
	}
}

func (s *Server) static() http.Handler {
	files := http.FileServerFS(Static())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// page fills what every page has: the session's CSRF token and the counts
// the tabs show.
func (s *Server) page(r *http.Request, title, nav string) Page {
	p := Page{Head: title, Nav: nav, Live: true}
	if ss := SessionOf(r); ss != nil {
		p.CSRF = ss.CSRF
	}
	ctx := r.Context()
	if inbox, err := s.tasks(ctx, queue.StatusInbox); err == nil {
		p.Inbox = len(inbox)
	}
	if c, err := s.b.Counts(ctx); err == nil {
		p.Problems = c.Problems + c.Dangling // what the Problems page lists
	}
	return p
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := statusOf(err)
	if status == http.StatusInternalServerError {
		s.log.Error("board: request failed", "path", r.URL.Path, "err", err)
	}
	s.answer(w, r, status, http.StatusText(status), err.Error(), "")
}

// The columns of the board, in order.
var columns = []struct {
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

func (s *Server) boardPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	f := Filter{Kind: q.Get("kind"), Plan: q.Get("plan")}
	f.Wave, _ = strconv.Atoi(q.Get("wave"))
	rows, err := s.tasks(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := &BoardPage{Page: s.page(r, "Board", PageBoard), Filter: f, Kinds: queue.Kinds, Severities: queue.Severities}
	cols := map[queue.Status]*Column{}
	for _, c := range columns {
		out.Columns = append(out.Columns, Column{Status: c.status, Title: c.title})
	}
	for i := range out.Columns {
		cols[out.Columns[i].Status] = &out.Columns[i]
	}
	waves, plans := map[int]bool{}, map[string]bool{}
	var resolved []api.Task
	holds := s.team(ctx).Holds()
	for _, row := range rows {
		if row.ID == "" && row.State != api.StateOK {
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
		card, st := CardOf(row), row.Status
		if card.Team = holds[row.ID]; card.Team != nil && st == queue.StatusOpen {
			// Claimed through another clone: this clone's file says open
			// until git brings that clone's commit, but no clone may claim
			// it, so it stands with the claimed tasks.
			st = queue.StatusClaimed
		}
		if c := cols[st]; c != nil {
			c.Cards = append(c.Cards, card)
		}
	}
	res := cols[queue.StatusResolved]
	res.Cards, res.Note = s.recent(ctx, resolved)
	for wv := range waves {
		out.Waves = append(out.Waves, wv)
	}
	sort.Ints(out.Waves)
	for pl := range plans {
		out.Plans = append(out.Plans, pl)
	}
	sort.Strings(out.Plans)
	s.render(w, http.StatusOK, PageBoard, out)
}

// recent picks the most recently updated of the resolved tasks. Tasks
// come in queue order, so it reads up to resolvedLooked of them to find
// their update times.
func (s *Server) recent(ctx context.Context, rows []api.Task) ([]Card, string) {
	type dated struct {
		row api.Task
		at  time.Time
	}
	var ds []dated
	for _, row := range rows[:min(len(rows), resolvedLooked)] {
		d := dated{row: row}
		if it, err := s.task(ctx, row.ID); err == nil && it.Task != nil {
			d.at = it.Task.Updated
		}
		ds = append(ds, d)
	}
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].at.After(ds[j].at) })
	var cards []Card
	for _, d := range ds[:min(len(ds), recentResolved)] {
		cards = append(cards, CardOf(d.row))
	}
	note := ""
	if len(rows) > len(cards) {
		note = fmt.Sprintf("the %d most recent of %d (snag list --status resolved shows all)", len(cards), len(rows))
	}
	return cards, note
}

func (s *Server) inboxPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rows, err := s.tasks(ctx, queue.StatusInbox)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := &InboxPage{Page: s.page(r, "Inbox", PageInbox), Severities: queue.Severities}
	pics := openShots(s.b.Shots())
	defer pics.Close()
	for _, row := range rows {
		item := InboxItem{Card: CardOf(row)}
		if it, err := s.task(ctx, row.ID); err == nil && it.Task != nil {
			item.Body = strings.TrimSpace(string(it.Task.Body))
			item.Capture = it.Task.Capture
			item.Files = it.Task.SuspectFiles
			item.Created = it.Task.Created
			item.Thumb, item.ThumbAlt, item.ThumbLazy = pics.thumb(it.Task.Capture)
		}
		out.Items = append(out.Items, item)
	}
	s.render(w, http.StatusOK, PageInbox, out)
}

func (s *Server) taskPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ref := r.PathValue("ref")
	if _, err := queue.ParseRef(ref); err != nil {
		s.answer(w, r, http.StatusNotFound, "No such task", err.Error(), "")
		return
	}
	it, err := s.task(ctx, ref)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := &TaskPage{Page: s.page(r, it.Row.Key+" "+it.Row.Title, ""), Card: CardOf(it.Row), Task: it.Task,
		File: it.TaskFile, Severities: queue.Severities, Kinds: queue.Kinds, DependsOn: it.DependsOn}
	if t := it.Task; t != nil && it.Row.State == api.StateOK && !it.Row.Duplicate {
		files := make([]string, len(t.SuspectFiles))
		for i, f := range t.SuspectFiles {
			files[i] = f.String()
		}
		out.Edit = &TaskForm{Title: t.Title, Severity: t.Severity, Kind: t.Kind, Wave: t.Wave, Plan: t.Plan,
			Files: strings.Join(files, "\n"), DependsOn: strings.Join(it.DependsOn, ", ")}
	}
	if out.Card.Key == "" {
		out.Head = it.Row.Path
	}
	pics := openShots(s.b.Shots())
	defer pics.Close()
	var capture *queue.Capture
	if it.Task != nil {
		out.Body = Markdown(it.Task.Body, it.Row.Trust != queue.TrustUnvetted)
		if capture = it.Task.Capture; capture != nil {
			out.Capture = pics.captureView(capture)
			for _, sh := range capture.Screenshots[min(1, len(capture.Screenshots)):] {
				if p := pics.picture(sh, 1); p != nil {
					out.Shots = append(out.Shots, p.URL)
				}
			}
		}
	}
	if st, err := call(ctx, s, ops.VerifyStatus, ops.TaskRef{Ref: ref}); err == nil {
		out.Verify = Verify{Running: st.Running, Outcome: st.Outcome, Reason: st.Reason, LastAt: st.LastAt, History: st.History}
		out.Visual = pics.visualView(&st, capture, it.Row.Status)
	}
	if es, err := s.audit(ctx); err == nil {
		for _, e := range slices.Backward(es) {
			if e.TaskID == it.Row.ID && it.Row.ID != "" {
				out.Audit = append(out.Audit, Entry{AuditEntry: e, Task: it.Row.Key})
			}
		}
	}
	out.Actions = personActions(it.Row.Status)
	if it.Row.ID != "" {
		out.Card.Team = s.team(ctx).Holds()[it.Row.ID]
	}
	if it.Row.Key != "" {
		if ns, err := call(ctx, s, ops.ListNotes, ops.NoteQuery{Task: it.Row.Key, Limit: 200}); err == nil {
			out.Notes = ns.Notes
		}
	}
	s.render(w, http.StatusOK, PageTask, out)
}

func (s *Server) activityPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	es, err := s.audit(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	keys := s.keys(ctx)
	out := &ActivityPage{Page: s.page(r, "Activity", PageActivity),
		Agent: r.URL.Query().Get("agent"), Action: r.URL.Query().Get("action"), Scanned: len(es)}
	agents, acts := map[string]bool{}, map[string]bool{}
	for _, e := range slices.Backward(es) {
		en := Entry{AuditEntry: e, Task: keys[e.TaskID]}
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
	s.render(w, http.StatusOK, PageActivity, out)
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
func (s *Server) keys(ctx context.Context) map[string]string {
	m := map[string]string{}
	if rows, err := s.tasks(ctx); err == nil {
		for _, row := range rows {
			if row.Key != "" {
				m[row.ID] = row.Key
			}
		}
	}
	return m
}

func (s *Server) agentsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	live, err := call(ctx, s, ops.ListSessions, ops.None{})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := &AgentsPage{Page: s.page(r, "Agents", PageAgents)}
	bySession := map[int64][]Held{}
	for _, l := range live.Leases {
		h := Held{Key: l.TaskID, Epoch: l.Epoch, Acquired: l.Acquired, Detached: l.Detached, Holder: l.Holder}
		if it, err := s.task(ctx, l.TaskID); err == nil {
			h.Key, h.Title = it.Row.Key, it.Row.Title
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
	files, err := call(ctx, s, ops.ListFiles, ops.None{})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	msgs, err := call(ctx, s, ops.Reports, ops.MessageQuery{Limit: 100})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	reports := msgs.Messages
	for _, ls := range live.Sessions {
		a := Agent{Session: ls.Session, Held: bySession[ls.ID], Activity: ls.Activity}
		for _, f := range files.Claims {
			if f.SessionID == ls.ID {
				a.Files = append(a.Files, f)
			}
		}
		for i := range reports {
			if reports[i].From == ls.Name {
				a.LastReport = &reports[i]
				break
			}
		}
		out.Agents = append(out.Agents, a)
	}
	out.Team = s.team(ctx)
	s.render(w, http.StatusOK, PageAgents, out)
}

// team reads what the other clones have in team mode. A failure leaves
// the page with this clone's state alone, and says why.
func (s *Server) team(ctx context.Context) Team {
	t, err := s.b.Team(ctx)
	if err != nil {
		s.log.Warn("board: read the other clones' agents", "err", err)
		return Team{On: true, Unreachable: "the other clones' agents could not be read: " + err.Error()}
	}
	return t
}

func (s *Server) problemsPage(w http.ResponseWriter, r *http.Request) {
	ps, err := s.b.Problems(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, http.StatusOK, PageProblems, &ProblemsPage{Page: s.page(r, "Problems", PageProblems), Found: ps})
}

// shotName is the shape of a screenshot file the board serves from .snag/shots/.
var shotName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.(png|jpe?g|webp|gif)$`)

// shot serves a capture's screenshot from the Backend's shots folder: a
// plain file by a plain name, never a symlink, never outside the folder.
func (s *Server) shot(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !shotName.MatchString(name) {
		s.answer(w, r, http.StatusNotFound, "No such screenshot", "screenshots are image files in .snag/shots/", "")
		return
	}
	root, err := os.OpenRoot(s.b.Shots())
	if err != nil {
		s.answer(w, r, http.StatusNotFound, "No such screenshot", "this project has no .snag/shots/ folder", "")
		return
	}
	defer root.Close()
	fi, err := root.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() {
		s.answer(w, r, http.StatusNotFound, "No such screenshot", "no plain file "+name+" in .snag/shots/", "")
		return
	}
	f, err := root.Open(name)
	if err != nil {
		s.answer(w, r, http.StatusNotFound, "No such screenshot", err.Error(), "")
		return
	}
	defer f.Close()
	securityHeaders(w.Header())
	w.Header().Set("Content-Type", mime.TypeByExtension(filepath.Ext(name)))
	http.ServeContent(w, r, name, fi.ModTime(), f)
}

// login trades a one-time code for a session cookie and goes to the board.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	cookie, ok := s.gate.login(r.URL.Query().Get("code"))
	if !ok {
		s.answer(w, r, http.StatusUnauthorized, "This login link does not work",
			"A login link works once, for 10 minutes. Run this in the project for a fresh one:", "snag open")
		return
	}
	securityHeaders(w.Header())
	http.SetCookie(w, cookie)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, s.gate.logout(r))
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, formAnswer{OK: true, Message: "logged out", Redirect: "/"})
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) plansPage(w http.ResponseWriter, r *http.Request) {
	plans, err := call(r.Context(), s, ops.ListPlans, ops.None{})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, http.StatusOK, PagePlans, &PlansPage{Page: s.page(r, "Plans", PagePlans), Plans: plans.Plans})
}

// planActions are the moves a person makes on a plan, by the status it
// is in.
var planActions = []PlanAction{
	{"activate", "Activate", queue.PlanActive},
	{"done", "Mark done", queue.PlanDone},
	{"archive", "Archive", queue.PlanArchived},
	{"draft", "Back to draft", queue.PlanDraft},
}

func (s *Server) planPage(w http.ResponseWriter, r *http.Request) {
	p, err := call(r.Context(), s, ops.GetPlan, ops.PlanRef{Slug: r.PathValue("slug")})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := &PlanPage{Page: s.page(r, p.Title, PagePlans), Plan: &p,
		Body: Markdown([]byte(p.Body), p.Trust != queue.TrustUnvetted)}
	if out.Head == "" {
		out.Head = p.Slug
	}
	for _, a := range planActions {
		if a.Status != p.Status && p.Problem == "" {
			out.Actions = append(out.Actions, a)
		}
	}
	s.render(w, http.StatusOK, PagePlan, out)
}

func (s *Server) notesPage(w http.ResponseWriter, r *http.Request) {
	notes, err := call(r.Context(), s, ops.ListNotes, ops.NoteQuery{Limit: 200})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, http.StatusOK, PageNotes, &NotesPage{Page: s.page(r, "Notes", PageNotes), Notes: notes.Notes})
}
