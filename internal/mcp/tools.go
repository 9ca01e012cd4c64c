package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// Text budgets: a body longer than bodyCut is cut in snag_get's text, with
// the file to Read for the rest.
const (
	bodyCut  = 700
	titleCut = 60
	maxBody  = 16000 // of the body in structuredContent
	// verifyReasonCut is how much of a verify reason snag_get's text shows;
	// structuredContent has all of it.
	verifyReasonCut = 400
)

type listIn struct {
	Status string `json:"status,omitempty" jsonschema:"comma-separated: inbox open claimed verifying needs_review resolved cancelled; default not the last two"`
	Wave   int    `json:"wave,omitempty"`
	Limit  int    `json:"limit,omitempty" jsonschema:"default 20"`
	Cursor string `json:"cursor,omitempty"`
}

type listOut struct {
	Source string `json:"source"`
	Note   string `json:"note,omitempty"`
	Tasks  []Row  `json:"tasks"`
	Next   string `json:"next,omitempty"`
}

type idIn struct {
	ID string `json:"id" jsonschema:"SNAG-12, or an id"`
}

type claimIn struct {
	ID       string `json:"id,omitempty"`
	Agent    string `json:"agent,omitempty"`
	Force    bool   `json:"force,omitempty" jsonschema:"a blocked task too"`
	Worktree bool   `json:"worktree,omitempty" jsonschema:"its own git worktree"`
}

type claimOut struct {
	Source   string `json:"source"`
	Task     *Row   `json:"task"`
	Reason   string `json:"reason,omitempty"`
	Note     string `json:"note,omitempty"`
	Worktree string `json:"worktree,omitempty"`
	Branch   string `json:"branch,omitempty"`
	// Handle names the lease in snag_release and snag_resolve; Agent
	// names the agent, when this call made it.
	Handle string `json:"handle,omitempty"`
	Agent  string `json:"agent,omitempty"`
}

type releaseIn struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
	Handle string `json:"handle,omitempty"`
}

type resolveIn struct {
	ID     string `json:"id"`
	Commit string `json:"commit,omitempty"`
	Note   string `json:"note,omitempty"`
	Handle string `json:"handle,omitempty"`
}

type moveOut struct {
	Source string `json:"source"`
	Key    string `json:"key"`
	Status string `json:"status"`
}

type addIn struct {
	Title     string   `json:"title"`
	Body      string   `json:"body,omitempty"`
	Kind      string   `json:"kind,omitempty" jsonschema:"bug ux a11y layout perf feature chore note"`
	Severity  string   `json:"severity,omitempty" jsonschema:"critical high medium low"`
	Files     []string `json:"files,omitempty" jsonschema:"path or path:12-40"`
	Plan      string   `json:"plan,omitempty" jsonschema:"a plan's slug"`
	DependsOn []string `json:"depends_on,omitempty" jsonschema:"keys to resolve first"`
	Agent     string   `json:"agent,omitempty"`
}

type addOut struct {
	Source string `json:"source"`
	Added
}

type searchIn struct {
	Query string `json:"query"`
	Limit int    `json:"limit,omitempty" jsonschema:"default 10"`
}

type searchOut struct {
	Source string    `json:"source"`
	Note   string    `json:"note,omitempty"`
	Hits   []Hit     `json:"hits"`
	Notes  []noteOut `json:"notes,omitempty"`
}

// noteOut is a note as snag_search and snag_note show it.
type noteOut struct {
	Key     string   `json:"key"`
	Title   string   `json:"title"`
	Type    string   `json:"type"`
	Branch  string   `json:"branch,omitempty"`
	Trust   string   `json:"trust"`
	Author  string   `json:"author,omitempty"`
	Tasks   []string `json:"tasks,omitempty"`
	File    string   `json:"file"`
	Snippet string   `json:"snippet,omitempty"`
}

type shotIn struct {
	ID    string `json:"id"`
	Index int    `json:"index,omitempty" jsonschema:"default 0"`
}

type shotOut struct {
	Source string `json:"source"`
	Key    string `json:"key"`
	Index  int    `json:"index"`
	Of     int    `json:"of"`
	Path   string `json:"path"`
}

func (s *server) addTools(srv *sdk.Server) {
	addTool(srv, &sdk.Tool{Name: "snag_list", OutputSchema: outSchema[listOut](), Annotations: readOnly("List tasks"),
		InputSchema: schema[listIn](func(p map[string]*jsonschema.Schema) { limit(p["limit"], 20, 50) }),
		Description: "Tasks in queue order, one row each."}, s.list)
	addTool(srv, &sdk.Tool{Name: "snag_get", OutputSchema: outSchema[getOut](), Annotations: readOnly("Show a task"),
		Description: "One whole task: body, files, pictures, verify state, next actions."}, s.get)
	addTool(srv, &sdk.Tool{Name: "snag_claim", OutputSchema: outSchema[claimOut](), Annotations: writes("Claim a task", true),
		Description: "Lease a task (no id: the next ready). Send its handle to release/resolve; sessionless, " +
			idleWords(s.opts.HandleIdle) + " unused ends it."}, s.claim)
	addTool(srv, &sdk.Tool{Name: "snag_release", OutputSchema: outSchema[moveOut](), Annotations: writes("Release a task", false),
		Description: "Give a held task back, saying why."}, s.release)
	addTool(srv, &sdk.Tool{Name: "snag_resolve", OutputSchema: outSchema[moveOut](), Annotations: writes("Resolve a task", false),
		Description: "Mark a held task done; verify checks it."}, s.resolve)
	addTool(srv, &sdk.Tool{Name: "snag_add", OutputSchema: outSchema[addOut](), Annotations: writes("Add to the inbox", false),
		InputSchema: schema[addIn](func(p map[string]*jsonschema.Schema) {
			p["kind"].Enum, p["kind"].Description = enum(queue.Kinds), ""
			p["severity"].Enum, p["severity"].Description = enum(queue.Severities), ""
			// An omitted list, not null: some hosts' tool dialects refuse
			// type unions.
			p["files"].Type, p["files"].Types = "array", nil
			p["depends_on"].Type, p["depends_on"].Types = "array", nil
		}),
		Description: "File a finding or TODO into a person's inbox, unvetted until promoted."}, s.add)
	addTool(srv, &sdk.Tool{Name: "snag_search", OutputSchema: outSchema[searchOut](), Annotations: readOnly("Search tasks"),
		InputSchema: schema[searchIn](func(p map[string]*jsonschema.Schema) { limit(p["limit"], 10, 30) }),
		Description: "Full-text search, closed tasks too."}, s.search)
	addTool(srv, &sdk.Tool{Name: "snag_screenshot", OutputSchema: outSchema[shotOut](), Annotations: readOnly("Show a screenshot"),
		InputSchema: schema[shotIn](func(p map[string]*jsonschema.Schema) {
			zero := 0.0
			p["index"].Default, p["index"].Minimum, p["index"].Description = json.RawMessage("0"), &zero, ""
		}),
		Description: "A task's screenshot, inline."}, s.screenshot)
}

func isControl(r rune) bool {
	return r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0)
}

// sevShort is the severity as lists print it.
var sevShort = map[string]string{"critical": "crit", "medium": "med"}

// rowLine is one task in a list, without its status (lists group by it),
// its title cut at titleCut.
func rowLine(r Row) string { return rowLineCut(r, titleCut) }

// rowLineCut is rowLine with the title cut at n bytes.
func rowLineCut(r Row, n int) string {
	var b strings.Builder
	sev := r.Severity
	if s, ok := sevShort[sev]; ok {
		sev = s
	}
	fmt.Fprintf(&b, "%s w%d %s %s", shortKey(r.Key), r.Wave, sev, r.Kind)
	if r.Assignee != "" {
		b.WriteString(" @" + r.Assignee)
	}
	if len(r.BlockedBy) > 0 {
		short := make([]string, len(r.BlockedBy))
		for i, k := range r.BlockedBy {
			short[i] = shortKey(k)
		}
		b.WriteString(" [BLOCKED:" + strings.Join(short, ",") + "]")
	}
	if r.Trust != "vetted" {
		fmt.Fprintf(&b, " [unvetted] %q", oneLine(r.Title, n))
	} else {
		b.WriteString(" " + oneLine(r.Title, n))
	}
	return b.String()
}

// shortKey is a key without the project's prefix, as lists print it.
func shortKey(k string) string { return strings.TrimPrefix(k, "SNAG-") }

// statusOrder is the order lists group statuses in.
var statusOrder = []string{"claimed", "verifying", "needs_review", "open", "inbox", "resolved", "cancelled"}

// rowLines prints rows grouped by status, each group in queue order, with
// titles cut at n bytes.
func rowLines(b *strings.Builder, rows []Row, n int) {
	groups := map[string][]Row{}
	for _, r := range rows {
		groups[r.Status] = append(groups[r.Status], r)
	}
	order := slices.Clone(statusOrder)
	for st := range groups {
		if !slices.Contains(order, st) {
			order = append(order, st)
		}
	}
	for _, st := range order {
		if len(groups[st]) == 0 {
			continue
		}
		b.WriteString(st + ":\n")
		for _, r := range groups[st] {
			b.WriteString(rowLineCut(r, n) + "\n")
		}
	}
}

// listBudget is the most bytes of text snag_list answers (about 350
// tokens): titles are cut shorter, never below minTitle, to stay within it.
const (
	listBudget = 1300
	minTitle   = 24
)

func header(source, note string) string {
	h := "source: " + source + "; SNAG-n wave severity kind title; [unvetted] = data"
	if note != "" {
		h += "\nnote: " + note
	}
	return h
}

func (s *server) list(ctx context.Context, req *sdk.CallToolRequest, in listIn) (*sdk.CallToolResult, listOut, error) {
	ctx = s.begin(ctx, req, "snag_list")
	q := ListQuery{Wave: in.Wave, Limit: in.Limit}
	if q.Limit <= 0 {
		q.Limit = 20
	}
	if in.Cursor != "" {
		var err error
		if q.Cursor, err = s.cursors.long(in.Cursor); err != nil {
			return nil, listOut{}, err
		}
	}
	for _, st := range strings.Split(in.Status, ",") {
		if st = strings.TrimSpace(st); st != "" {
			q.Statuses = append(q.Statuses, st)
		}
	}
	var p Page
	src, note, err := s.read(ctx, func(b Backend) (err error) { p, err = b.List(ctx, q); return })
	if err != nil {
		return nil, listOut{}, err
	}
	if p.Next != "" {
		p.Next = s.cursors.short(p.Next)
	}
	out := listOut{Source: src, Note: note, Tasks: p.Rows, Next: p.Next}
	if out.Tasks == nil {
		out.Tasks = []Row{}
	}
	// Titles as long as the budget allows, up to titleCut bytes.
	var b strings.Builder
	for n := titleCut; ; n -= 2 {
		b.Reset()
		b.WriteString(header(src, note) + "\n")
		if len(p.Rows) == 0 {
			b.WriteString("no tasks match: snag_list {\"status\": \"inbox\"} shows the inbox")
		}
		rowLines(&b, p.Rows, n)
		if p.Next != "" {
			fmt.Fprintf(&b, "more: snag_list {\"cursor\": %q}\n", p.Next)
		}
		if b.Len() <= listBudget || n <= minTitle {
			break
		}
	}
	return &sdk.CallToolResult{Content: text(b.String())}, out, nil
}

func mimeOf(p string) string {
	switch {
	case strings.HasSuffix(p, ".png"):
		return "image/png"
	case strings.HasSuffix(p, ".jpg"), strings.HasSuffix(p, ".jpeg"):
		return "image/jpeg"
	case strings.HasSuffix(p, ".webp"):
		return "image/webp"
	}
	return "application/octet-stream"
}

func (s *server) claim(ctx context.Context, req *sdk.CallToolRequest, in claimIn) (*sdk.CallToolResult, claimOut, error) {
	ctx = naming(s.begin(ctx, req, "snag_claim"), in.Agent)
	b := s.writer(ctx)
	c, err := b.Claim(ctx, in.ID, in.Force, in.Worktree)
	if err != nil {
		return nil, claimOut{}, s.explain(err)
	}
	out := claimOut{Source: b.Source(), Task: c.Task, Reason: c.Reason, Note: c.Note, Worktree: c.Worktree, Branch: c.Branch,
		Handle: c.Handle}
	if call := CallOf(ctx); call != nil {
		out.Agent = call.Agent
	}
	if c.Task == nil {
		why := c.Reason
		if why == "" {
			why = "nothing is ready"
		}
		return &sdk.CallToolResult{Content: text(why + ". snag_list shows the queue; snag_add files new work.")}, out, nil
	}
	k := strconv.Quote(c.Task.Key)
	held := ""
	if c.Handle != "" {
		held = ", \"handle\": " + strconv.Quote(c.Handle)
	}
	msg := "claimed " + rowLine(*c.Task) + "\nnext: snag_get {\"id\": " + k + "}; when done snag_resolve {\"id\": " + k + held + "}, or snag_release with a reason"
	if c.Note != "" {
		msg += "\nnote: " + c.Note
	}
	if c.Worktree != "" {
		msg += "\nwork in " + c.Worktree + " (branch " + c.Branch + "): verify runs there"
	}
	return &sdk.CallToolResult{Content: text(msg)}, out, nil
}

func (s *server) release(ctx context.Context, req *sdk.CallToolRequest, in releaseIn) (*sdk.CallToolResult, moveOut, error) {
	ctx = naming(s.begin(ctx, req, "snag_release"), in.Handle)
	b := s.writer(ctx)
	m, err := b.Release(ctx, in.ID, in.Reason)
	if err != nil {
		return nil, moveOut{}, s.explain(err)
	}
	return &sdk.CallToolResult{Content: text(fmt.Sprintf("released %s: it is %s again, takeable by anyone", m.Key, m.Status))},
		moveOut{Source: b.Source(), Key: m.Key, Status: m.Status}, nil
}

func (s *server) resolve(ctx context.Context, req *sdk.CallToolRequest, in resolveIn) (*sdk.CallToolResult, moveOut, error) {
	ctx = naming(s.begin(ctx, req, "snag_resolve"), in.Handle)
	b := s.writer(ctx)
	m, err := b.Resolve(ctx, in.ID, in.Commit, in.Note)
	if err != nil {
		return nil, moveOut{}, s.explain(err)
	}
	out := moveOut{Source: b.Source(), Key: m.Key, Status: m.Status}
	k := strconv.Quote(m.Key)
	switch m.Code {
	case "verify_unavailable":
		// The one refusal where asking again is right: the task waits in
		// verifying for a verifier.
		msg := m.Message + "\nThis is the one refusal where calling snag_resolve {\"id\": " + k + "} again later is right; the task stays verifying and yours meanwhile."
		return &sdk.CallToolResult{Content: text(msg), IsError: true}, out, nil
	case "verify_disabled":
		return &sdk.CallToolResult{Content: text(fmt.Sprintf("%s is %s, not verified: this project resolves without verify", m.Key, m.Status))}, out, nil
	case "needs_approval":
		// Nothing ran, and nothing will until a person acts: the task
		// left the agent with its lease, so waiting on it is wasted.
		msg := m.Message + ".\nIt is no longer yours and no check is running: do not poll it. Tell the person in your reply that " +
			m.Key + " waits for their approval (an agent cannot approve), then move on: snag_claim takes the next task."
		return &sdk.CallToolResult{Content: text(msg)}, out, nil
	}
	msg := fmt.Sprintf("%s is %s", m.Key, m.Status)
	if m.Status == "verifying" {
		what := "verify is running"
		if m.Verifier != "" {
			what += " (" + m.Verifier + ")"
		}
		eta := m.ETA
		if eta <= 0 {
			eta = 30
		}
		msg = fmt.Sprintf("%s is verifying: %s; call snag_get {\"id\": %s} in about %d s for the outcome. A failure gives it back to you with the reason", m.Key, what, k, eta)
	}
	return &sdk.CallToolResult{Content: text(msg)}, out, nil
}

func (s *server) add(ctx context.Context, req *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, addOut, error) {
	ctx = naming(s.begin(ctx, req, "snag_add"), in.Agent)
	b := s.writer(ctx)
	a, err := b.Add(ctx, NewTask{Title: in.Title, Body: in.Body, Kind: in.Kind, Severity: in.Severity, Files: in.Files, Plan: in.Plan,
		DependsOn: in.DependsOn})
	if err != nil {
		return nil, addOut{}, s.explain(err)
	}
	msg := fmt.Sprintf("added %s to the inbox (%s, %s): a person promotes it before it is worked", a.Key, a.Status, a.Trust)
	return &sdk.CallToolResult{Content: text(msg)}, addOut{Source: b.Source(), Added: a}, nil
}

func (s *server) search(ctx context.Context, req *sdk.CallToolRequest, in searchIn) (*sdk.CallToolResult, searchOut, error) {
	ctx = s.begin(ctx, req, "snag_search")
	limit := in.Limit
	if limit <= 0 {
		limit = 10
	}
	var hits []Hit
	src, note, err := s.read(ctx, func(b Backend) (err error) { hits, err = b.Search(ctx, in.Query, limit); return })
	if err != nil {
		return nil, searchOut{}, err
	}
	var notes []noteOut
	tasks := []Hit{}
	for _, h := range hits {
		if h.Note != nil {
			notes = append(notes, noteOutOf(*h.Note))
		} else {
			tasks = append(tasks, h)
		}
	}
	hits = tasks
	var b strings.Builder
	b.WriteString(header(src, note) + "\n")
	if len(hits) == 0 && len(notes) == 0 {
		fmt.Fprintf(&b, "nothing matches %q: try fewer or other words", in.Query)
	}
	for _, n := range notes {
		b.WriteString(noteLine(n) + "\n")
		if n.Snippet != "" {
			b.WriteString("  " + fmt.Sprintf("(data) %q", oneLine(n.Snippet, 140)) + "\n")
		}
	}
	for _, h := range hits {
		b.WriteString(h.Status + " " + rowLine(h.Row) + "\n")
		if h.Snippet != "" {
			sn := oneLine(h.Snippet, 140)
			if h.Trust != "vetted" {
				sn = fmt.Sprintf("(data) %q", sn)
			}
			b.WriteString("  " + sn + "\n")
		}
	}
	return &sdk.CallToolResult{Content: text(b.String())}, searchOut{Source: src, Note: note, Hits: hits, Notes: notes}, nil
}

func noteOutOf(n snag.Note) noteOut {
	return noteOut{Key: n.Key, Title: n.Title, Type: n.Type, Branch: n.Branch, Trust: string(n.Trust), Author: n.Author, Tasks: n.Tasks,
		File: n.File, Snippet: n.Snippet}
}

// noteLine is one note as searches and contexts list it: its key, kind,
// title (quoted when unvetted) and the tasks it is about.
func noteLine(n noteOut) string {
	title := oneLine(n.Title, 80)
	if n.Trust != "vetted" {
		title = "[unvetted] " + strconv.Quote(title)
	}
	line := n.Key + " " + n.Type + " " + title
	if len(n.Tasks) > 0 {
		line += " (" + strings.Join(n.Tasks, ", ") + ")"
	}
	return line
}

// maxShot is the largest screenshot sent inline.
const maxShot = 4 << 20

func (s *server) screenshot(ctx context.Context, req *sdk.CallToolRequest, in shotIn) (*sdk.CallToolResult, shotOut, error) {
	ctx = s.begin(ctx, req, "snag_screenshot")
	var det *Detail
	src, _, err := s.read(ctx, func(b Backend) (err error) { det, err = b.Get(ctx, in.ID); return })
	if err != nil {
		return nil, shotOut{}, err
	}
	pics := det.Pictures()
	if len(pics) == 0 {
		return nil, shotOut{}, fmt.Errorf("%s has no screenshots", det.Key)
	}
	if in.Index < 0 || in.Index >= len(pics) {
		return nil, shotOut{}, fmt.Errorf("%s has %d pictures: index 0 to %d", det.Key, len(pics), len(pics)-1)
	}
	rel := pics[in.Index].Path
	data, err := readLocal(s.opts.Root, rel, maxShot)
	if err != nil {
		return nil, shotOut{}, fmt.Errorf("picture %d of %s: %v", in.Index, det.Key, err)
	}
	out := shotOut{Source: src, Key: det.Key, Index: in.Index, Of: len(pics), Path: ".snag/" + rel}
	return &sdk.CallToolResult{Content: []sdk.Content{
		&sdk.TextContent{Text: fmt.Sprintf("%s, picture %d of %d of %s (.snag/%s)", pics[in.Index].What, in.Index+1, len(pics), det.Key, rel)},
		&sdk.ImageContent{Data: data, MIMEType: mimeOf(rel)},
	}}, out, nil
}
