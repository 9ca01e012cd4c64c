// Package board is the web board: the pages snagd serves to a person in a
// browser (the queue by status, the inbox review, a task, the activity log,
// the agents and the problems), their forms, and the login that lets a
// browser in. The pages are html/template files, a stylesheet and a small
// script, all embedded in the binary.
//
// A [Server] serves the pages and forms over snagd's operations (an
// [ops.Service], called as a person, as the CLI and the MCP tools call
// them) and a [Backend], the interface this package declares for the few
// things the pages read that are not operations of the API (the counts,
// the problems, the team, the shots folder); snagd gives both and mounts
// the server on its port. A [Gate] is the board's way in: one-time
// login codes traded for a session cookie, and the CSRF token every form
// carries. snagd's guard (the Host and Origin checks, the bearer token)
// runs before the gate.
//
// # Captures and visual verify
//
// A task made by a capture (snag capture, the browser extension, POST
// /captures) shows on its page what the person saw: the page's screenshot
// with the element they pointed at outlined on it, the element's crop
// beside it, and the page's URL, title, window, browser and element, its
// console errors and its failed requests, one per line. All of it is
// marked as captured, unvetted data and drawn as text: a URL is never a
// link, a console error that is markup shows as the markup. The outline is
// an SVG over the image whose viewBox is the screenshot's size in CSS
// pixels of the page (the viewport's width, and the height the image's
// shape gives), so it scales with the image at any width. A capture keeps
// no scroll position, so the element's box (in CSS pixels of the page) is
// placed as if the screenshot were taken at the page's top: an element
// that starts below the window's height is not outlined, and the page says
// it was below the fold and lets the crop show it.
//
// After a verify that compared pixels, the page shows before (the crop as
// captured), after (the crop the run took) and diff side by side, stacked
// on a phone, with how much of the element changed ("12.5% of the
// element's pixels changed", or that it looks exactly as captured). A task
// the comparison sent to needs_review has Resolve and Reopen beside the
// pictures: the same forms as the moves at the page's top.
//
// The inbox review shows each capture with a thumbnail, at most 160 by
// 120 CSS pixels, beside its Promote and Reject: the element's crop, else
// the page's screenshot.
//
// Task text reaches a page only through html/template's escaping, through
// [Markdown], which escapes every byte of its source, or through
// graphdraw's SVG, which escapes every string of the graph it draws.
//
// board imports queue and api for their data types, and graphdraw to draw
// the decision graph; it must not import index, project, daemon, engine,
// cli, client, mcp or watch.
package board

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/queue"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Static is the board's stylesheet and script, served as they are.
func Static() fs.FS {
	sub, _ := fs.Sub(staticFS, "static")
	return sub
}

// Views holds the parsed pages. It is safe for concurrent use.
type Views struct {
	pages map[string]*template.Template
}

// The pages Views renders, by name.
const (
	PageBoard    = "board"
	PageInbox    = "inbox"
	PageTask     = "task"
	PageActivity = "activity"
	PageAgents   = "agents"
	PageProblems = "problems"
	PagePlans    = "plans"
	PagePlan     = "plan"
	PageNotes    = "notes"
	PageNote     = "note"
	PageGraph    = "graph"
	PageMessage  = "message" // a sentence and a way on: 401, 404, a refused action
)

// New parses the embedded templates.
func New() (*Views, error) {
	v := &Views{pages: map[string]*template.Template{}}
	for _, name := range []string{PageBoard, PageInbox, PageTask, PageActivity, PageAgents, PageProblems,
		PagePlans, PagePlan, PageNotes, PageNote, PageGraph, PageMessage} {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("board: parse %s: %w", name, err)
		}
		v.pages[name] = t
	}
	return v, nil
}

// Render writes one page. data is the page's type: *BoardPage for
// PageBoard, and so on.
func (v *Views) Render(w io.Writer, page string, data any) error {
	t, ok := v.pages[page]
	if !ok {
		return fmt.Errorf("board: no page %q", page)
	}
	return t.ExecuteTemplate(w, "layout", data)
}

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"ago": Ago,
	"label": func(s any) string {
		return strings.ReplaceAll(fmt.Sprint(s), "_", " ")
	},
	"join": strings.Join,
	// short is a commit's first 12 hex digits: enough to name it in
	// git, short enough to read.
	"short": func(s string) string { return s[:min(len(s), 12)] },
	"pair":  func(c Card, csrf string) cardForm { return cardForm{c, csrf} },
	// brief is the first line of a check's reason, cut to a glance: an
	// older run's whole output would repeat itself down the page.
	"brief": func(s string) string {
		line, _, more := strings.Cut(strings.TrimSpace(s), "\n")
		if r := []rune(line); len(r) > 160 {
			return string(r[:159]) + "…"
		} else if more {
			return line + " …"
		}
		return line
	},
	// long reports whether a reason is more than its brief.
	"long": func(s string) bool {
		s = strings.TrimSpace(s)
		return strings.Contains(s, "\n") || len([]rune(s)) > 160
	},
}

// cardForm is a card with the page's CSRF token, for a card that carries forms.
type cardForm struct {
	A Card
	B string
}

// Ago says how long ago t was, in the words a person uses at a glance.
func Ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t)
	switch {
	case d < 0:
		return "just now"
	case d < 10*time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%d s ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}

// Page is what every page has around its content.
type Page struct {
	// Head is the document's title, before " · snag".
	Head string
	Nav  string // the tab shown as current: a Page* name
	// CSRF is the token every form on the page sends back; "" on a page
	// shown to someone not logged in.
	CSRF string
	// Live: the page follows /events and refreshes what changed.
	Live bool
	// Inbox and Problems are counts the tabs show.
	Inbox, Problems int
	// Flash is a sentence from the last action, shown once.
	Flash string
}

// Card is one task as the board shows it.
type Card struct {
	ID        string
	Key       string
	Title     string
	Status    queue.Status
	Trust     queue.Trust
	Severity  queue.Severity
	Kind      queue.Kind
	Wave      int
	Plan      string
	Assignee  string
	BlockedBy []string
	Path      string // the task file, relative to .snag/
	Problem   string // why the file is not clean, when it is not
	Stale     bool
	// Team, in team mode, is the lease of an agent of another clone that
	// holds the task; nil when none does.
	Team *TeamHold
}

// CardOf makes a card of a task as the API gives it.
func CardOf(r api.Task) Card {
	c := Card{ID: r.ID, Key: r.Key, Title: r.Title, Status: r.Status, Trust: r.Trust, Severity: r.Severity,
		Kind: r.Kind, Wave: r.Wave, Plan: r.Plan, Assignee: r.Assignee, BlockedBy: r.BlockedBy, Path: r.Path, Stale: r.Stale}
	if r.State != api.StateOK {
		c.Problem = r.Error
	}
	if r.Duplicate && c.Problem == "" {
		c.Problem = "another file has the same id or alias"
	}
	return c
}

// Ref is how a link names the task: its alias, else its id.
func (c Card) Ref() string {
	if c.Key != "" {
		return c.Key
	}
	return c.ID
}

// Blocked reports whether a dependency of the task is unresolved.
func (c Card) Blocked() bool { return len(c.BlockedBy) > 0 }

// Unvetted reports whether no person has vouched for the task yet.
func (c Card) Unvetted() bool { return c.Trust == queue.TrustUnvetted }

// Column is one status's cards.
type Column struct {
	Status queue.Status
	Title  string
	Cards  []Card
	// Note says what the column leaves out ("the 12 resolved in the last
	// 7 days"), when it does.
	Note string
}

// Filter narrows the board; zero values mean any.
type Filter struct {
	Wave int
	Kind string
	Plan string
}

// Any reports whether the filter narrows anything.
func (f Filter) Any() bool { return f.Wave != 0 || f.Kind != "" || f.Plan != "" }

// BoardPage is the queue by status.
type BoardPage struct {
	Page
	Columns []Column
	Filter  Filter
	// The choices the filter offers: what the queue has.
	Waves []int
	Kinds []queue.Kind
	Plans []string
	// Broken counts files that never parsed: they are on the problems page.
	Broken int
	// Severities are the choices of the form that adds a task (with Kinds,
	// and Plans as suggestions).
	Severities []queue.Severity
}

// InboxItem is one unvetted item with its text, shown as data.
type InboxItem struct {
	Card
	Body    string
	Capture *queue.Capture
	Files   []queue.FileRef
	Created time.Time
	// Thumb is a capture's picture, small, beside the item's moves: the
	// element's crop, else the page's screenshot; ThumbAlt says which.
	// A screenshot is loaded when it scrolls into view (ThumbLazy); a
	// crop, a few kilobytes, at once.
	Thumb     *Picture
	ThumbAlt  string
	ThumbLazy bool
}

// InboxPage is the review of what agents and captures added.
type InboxPage struct {
	Page
	Items      []InboxItem
	Severities []queue.Severity
}

// Action is a move a person may make on a task from its page.
type Action struct {
	Name   string // promote, reject, cancel, reopen, accept (Mark done)
	Label  string
	Danger bool
}

// Verify is a task's verify state and runs.
type Verify struct {
	Running bool
	Outcome string
	Reason  string
	LastAt  time.Time
	History []api.VerifyRun
}

// Entry is one audit log line, with its task's alias.
type Entry struct {
	api.AuditEntry
	Task string // the alias, else the id
}

// Who is the agent or the person that acted.
func (e Entry) Who() string {
	if e.Agent != "" {
		return e.Agent
	}
	return string(e.Actor)
}

// TaskPage is one task in full.
type TaskPage struct {
	Page
	Card
	Task *queue.Task // nil for a file that never parsed
	File string      // the task file, as a person finds it from the project root
	Body template.HTML
	// Capture is what a capture brought, drawn for a person: the
	// screenshot with the element outlined, its crop, the page's errors.
	// nil for a task with no capture block.
	Capture *CaptureView
	// Shots are the URLs of the capture's other screenshots (the first is
	// Capture.Shot).
	Shots []string
	// Visual is the latest visual verify's before, after and diff; nil
	// when no run compared pixels.
	Visual     *VisualView
	Verify     Verify
	Audit      []Entry
	Actions    []Action
	Severities []queue.Severity
	// Notes are the notes that name the task, newest first.
	Notes []api.Note
	// Edit is what the form that edits the task's fields starts from;
	// nil for a file that does not parse (a person mends it by hand).
	Edit *TaskForm
	// Kinds are the kinds the edit form offers.
	Kinds []queue.Kind
	// DependsOn is the task's depends_on as people read it: by key.
	DependsOn []string
}

// TaskForm is the fields of a task as the edit form shows them.
type TaskForm struct {
	Title     string
	Severity  queue.Severity
	Kind      queue.Kind
	Wave      int
	Plan      string
	Files     string // one suspect file a line, path or path:A-B
	DependsOn string // the keys it depends on, comma-separated
}

// ActivityPage is the audit log, newest first.
type ActivityPage struct {
	Page
	Entries []Entry
	// Filters and the choices they offer.
	Agent, Action  string
	Agents, Acts   []string
	Shown, Scanned int
}

// Held is a task a session holds.
type Held struct {
	Key, Title string
	Epoch      int64
	Acquired   time.Time
	Detached   bool
	Holder     string
	Files      []queue.FileRef
}

// Agent is one live session and what it holds.
type Agent struct {
	api.Session
	Held     []Held
	Activity api.Activity
	// Files are its live file claims; LastReport its latest report.
	Files      []api.FileClaim
	LastReport *api.Message
}

// PlansPage lists the plans.
type PlansPage struct {
	Page
	Plans []api.Plan
}

// PlanPage is one plan, with its body and the moves a person may make.
type PlanPage struct {
	Page
	Plan    *api.PlanDetail
	Body    template.HTML
	Actions []PlanAction
}

// PlanAction is a button on a plan's page: the status it sets.
type PlanAction struct {
	Name   string // activate, done, archive, draft
	Label  string
	Status queue.PlanStatus
}

// NotesPage lists the notes.
type NotesPage struct {
	Page
	Notes []api.Note
}

// NotePage is one note with its body and its edges both ways.
type NotePage struct {
	Page
	Note *api.NoteDetail
	Body template.HTML
	// Out are the note's links to others; In the links of others to it.
	Out, In []NoteLink
}

// NoteLink is an edge as a page lists it: the link, and the note at its
// other end.
type NoteLink struct {
	api.Link
	// Key and Title name the note at the other end: the one a link out
	// points at, the one a link in is written in. Title is "" when no
	// note that reads cleanly has the key.
	Key, Title string
}

// GraphFilter narrows the graph page; zero values mean any.
type GraphFilter struct {
	Branch string
	Type   string
	Plan   string // a plan's slug: the notes that name a task of the plan
	Task   string // a task's key: the notes that name it
}

// Any reports whether the filter narrows anything.
func (f GraphFilter) Any() bool { return f != GraphFilter{} }

// GraphPage is the decision graph: drawn as a picture, and the same notes
// and edges as text.
type GraphPage struct {
	Page
	Filter GraphFilter
	// The choices the filters offer: what the notes have.
	Branches, Types, Plans, Tasks []string
	// Picture is the graph drawn by graphdraw, which escapes every
	// string of the graph in it.
	Picture template.HTML
	// Fit: the picture is narrow enough to shrink to a wide window's
	// width rather than scroll.
	Fit bool
	// Nodes are the notes drawn, oldest first, each with its links to
	// the others drawn.
	Nodes []GraphNode
	// Links counts the edges drawn; Total the notes of the whole graph.
	Links, Total int
}

// GraphNode is one note of the graph, with its links out.
type GraphNode struct {
	api.Note
	Out []NoteLink
}

// AgentsPage lists the connected agents.
type AgentsPage struct {
	Page
	Agents   []Agent
	Detached []Held // leases no live session holds (re-derived from the files)
	// Team is the other clones' agents, in team mode.
	Team Team
}

// Team is what the board shows of the repository's other clones in team
// mode, as the coordination store has it (source: team). The zero Team is
// snagd running alone.
type Team struct {
	// On is set when snagd runs in team mode.
	On bool
	// Unreachable, when set, says why the other clones are not shown.
	Unreachable string
	// Clones are the other live clones.
	Clones []TeamClone
	// Agents are the other clones' live agents, by name.
	Agents []TeamAgent
}

// Holds maps the id of each task an agent of another clone holds to its
// lease.
func (t Team) Holds() map[string]*TeamHold {
	m := map[string]*TeamHold{}
	for _, a := range t.Agents {
		for _, h := range a.Held {
			m[h.ID] = &TeamHold{Holder: a.Name, Host: a.Host, Branch: a.Branch, Epoch: h.Epoch, Since: h.Acquired}
		}
	}
	return m
}

// TeamClone is another snagd of the repository: its machine, folder and
// branch.
type TeamClone struct {
	Host, Root, Branch string
	// Agents counts its live agents.
	Agents int
}

// TeamAgent is a live agent of another clone and what it holds there.
type TeamAgent struct {
	Name, Client string
	// Host, Root and Branch are its clone's machine, folder and branch.
	Host, Root, Branch string
	Held               []TeamHeld
	// Files are its live file claims.
	Files []api.FileClaim
}

// TeamHeld is a task an agent of another clone holds.
type TeamHeld struct {
	Held
	// ID is the task's id.
	ID string
	// Here is set when this clone's files have the task: Title is then
	// its title here, and the task has a page.
	Here bool
}

// TeamHold is a task's lease held through another clone: by whom, on
// which machine and branch, under which epoch.
type TeamHold struct {
	Holder, Host, Branch string
	Epoch                int64
	Since                time.Time
}

// String names the holder with its machine: "LYNX on build-2".
func (h TeamHold) String() string { return h.Holder + " on " + h.Host }

// Problem is one thing wrong with the task files.
type Problem struct {
	Path    string
	Kind    string
	Message string
}

// ProblemsPage lists the task files snag cannot use as they are.
type ProblemsPage struct {
	Page
	// Found are the problems; the Page's Problems is the tab's count.
	Found []Problem
}

// MessagePage is a sentence and a way on.
type MessagePage struct {
	Page
	Status  int
	Heading string
	Message string
	// Command, when set, is shown as the thing to run.
	Command string
	Back    string // a link back, when there is somewhere to go
}
