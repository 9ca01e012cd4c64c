package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snagdev/snag/internal/gitdir"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/snag"
)

// Graph is what the graph toolset needs of snagd, beside Team.
type Graph interface {
	Notes(ctx context.Context, q ops.NoteQuery) (ops.NoteList, error)
	Note(ctx context.Context, ref string) (ops.NoteDetail, error)
	Link(ctx context.Context, r ops.LinkRequest) (ops.NoteDetail, error)
	Activity(ctx context.Context, branches int) (ops.ActivityFeed, error)
}

// Where says where a bridge works: the git branch checked out in its
// worktree (git rev-parse --abbrev-ref HEAD; "-" outside git) and HEAD's
// commit, so every graph write carries them without the agent's guess.
type Where func(ctx context.Context) (branch, commit string)

// GitWhere is the Where of a bridge whose project root is root: it asks
// git, and reads .git's files when git cannot answer (no commit yet, or no
// git installed).
func GitWhere(root string) Where {
	return func(ctx context.Context) (string, string) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		// --abbrev-ref holds for the arguments after it: HEAD's commit,
		// then its branch.
		cmd := exec.CommandContext(ctx, "git", "rev-parse", "HEAD", "--abbrev-ref", "HEAD")
		cmd.Dir = root
		if out, err := cmd.Output(); err == nil {
			if f := strings.Fields(string(out)); len(f) == 2 {
				return f[1], f[0]
			}
		}
		top := gitdir.Top(root)
		if top == "" {
			return "-", ""
		}
		if b, c, ok := gitdir.Head(top); ok {
			return b, c
		}
		return "-", ""
	}
}

// where fills a graph write's branch, commit and worktree from the
// bridge's git; an agent's branch that is not the one checked out is
// refused. Over HTTP (no Where) the agent's branch is sent as it is, and
// snagd refuses a write without one.
func (s *server) where(ctx context.Context, branch string) (b, commit, tree string, err error) {
	if s.opts.Where == nil {
		return strings.TrimSpace(branch), "", "", nil
	}
	b, commit = s.opts.Where(ctx)
	if branch = strings.TrimSpace(branch); branch != "" && branch != b {
		return "", "", "", fmt.Errorf("you are on branch %s (git), not %s: omit branch; a note records the branch it was written on", b, branch)
	}
	return b, commit, s.opts.Root, nil
}

type nodesIn struct {
	Query  string `json:"query,omitempty"`
	Type   string `json:"type,omitempty"`
	Branch string `json:"branch,omitempty"`
	ID     string `json:"id,omitempty" jsonschema:"one node, with its edges"`
	Limit  int    `json:"limit,omitempty"`
}

type linkIn struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Kind   string `json:"kind"`
	Why    string `json:"why,omitempty"`
	Branch string `json:"branch,omitempty"`
	Agent  string `json:"agent,omitempty"`
}

type activityIn struct {
	Branches int `json:"branches,omitempty"`
}

// nodeOut is a node as snag_nodes shows it.
type nodeOut struct {
	Key     string    `json:"key"`
	Type    string    `json:"type"`
	Title   string    `json:"title"`
	Branch  string    `json:"branch,omitempty"`
	Trust   string    `json:"trust"`
	Author  string    `json:"author,omitempty"`
	Tasks   []string  `json:"tasks,omitempty"`
	File    string    `json:"file"`
	Links   []edgeOut `json:"links,omitempty"`
	In      []edgeOut `json:"in,omitempty"`
	Body    string    `json:"body,omitempty"`
	Snippet string    `json:"snippet,omitempty"`
}

type edgeOut struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Kind  string `json:"kind"`
	Why   string `json:"why,omitempty"`
	Trust string `json:"trust"`
}

type nodesOut struct {
	Source   string    `json:"source"`
	Advisory string    `json:"advisory,omitempty"`
	Nodes    []nodeOut `json:"nodes"`
}

type activityOut struct {
	Source        string                `json:"source"`
	Advisory      string                `json:"advisory,omitempty"`
	Workspace     string                `json:"workspace,omitempty"`
	Tasks         []snag.TaskLease      `json:"tasks,omitempty"`
	Files         []claimOutRow         `json:"files,omitempty"`
	BranchLeases  []snag.BranchLease    `json:"branch_leases,omitempty"`
	Recent        []snag.BranchActivity `json:"recent,omitempty"`
	BranchesTotal int                   `json:"branches_total"`
}

func (s *server) addGraphTools(srv *sdk.Server) {
	addTool(srv, &sdk.Tool{Name: "snag_nodes", OutputSchema: outSchema[nodesOut](), Annotations: readOnly("Decision graph"),
		InputSchema: schema[nodesIn](func(p map[string]*jsonschema.Schema) {
			p["type"].Enum = noteTypes()
			lo, hi := 1.0, 100.0
			p["limit"].Default, p["limit"].Minimum, p["limit"].Maximum = json.RawMessage("20"), &lo, &hi
		}),
		Description: "Find notes on every branch, or read one with its links."}, s.nodes)
	addTool(srv, &sdk.Tool{Name: "snag_link", OutputSchema: outSchema[nodesOut](), Annotations: writes("Link notes", true),
		InputSchema: schema[linkIn](func(p map[string]*jsonschema.Schema) {
			p["kind"].Enum = []any{"took_from", "led_to", "chose", "rejected", "blocks", "relates"}
		}),
		Description: "Link a note of yours to another."}, s.link)
	addTool(srv, &sdk.Tool{Name: "snag_activity", OutputSchema: outSchema[activityOut](), Annotations: readOnly("Activity"),
		InputSchema: schema[activityIn](func(p map[string]*jsonschema.Schema) {
			lo, hi := 1.0, 200.0
			p["branches"].Default, p["branches"].Minimum, p["branches"].Maximum = json.RawMessage("20"), &lo, &hi
		}),
		Description: "Who holds what now, and recent work by branch."}, s.activity)
}

func noteTypes() []any {
	return []any{"goal", "decision", "option", "action", "observation", "outcome", "question"}
}

// graphCall runs f on the graph backend, or answers the advisory text
// when no snagd coordinates, as teamCall does for a team tool.
func (s *server) graphCall(ctx context.Context, f func(g Graph) error) (advice string, err error) {
	return s.teamCall(ctx, func(t Team) error {
		g, ok := t.(Graph)
		if !ok {
			return ErrNoDaemon
		}
		return f(g)
	})
}

// trustMark is how a row shows an item's trust: nothing when vetted, "u"
// (an agent's, unvetted: its words are data) else.
func trustMark(t string) string {
	if t == "vetted" {
		return ""
	}
	return " u"
}

func nodeOutOf(n snag.Note) nodeOut {
	o := nodeOut{Key: n.Key, Type: n.Type, Title: n.Title, Branch: n.Branch, Trust: string(n.Trust), Author: n.Author,
		Tasks: n.Tasks, File: n.File, Snippet: n.Snippet}
	for _, l := range n.Links {
		o.Links = append(o.Links, edgeOut{From: n.Key, To: l.To, Kind: l.Kind, Why: l.Why, Trust: string(l.Trust)})
	}
	return o
}

// nodeRow is one node on one line: key, type, branch, trust (u: an
// agent's, whose title is data) and title, cut to fit twenty rows in 400
// tokens; the full title is in the structured result.
func nodeRow(n nodeOut) string {
	branch := n.Branch
	if branch == "" {
		branch = "-" // a note written before notes had branches
	}
	return n.Key + " " + n.Type + " " + shortBranch(branch, 16) + trustMark(n.Trust) + " " + oneLine(n.Title, 30)
}

func (s *server) nodes(ctx context.Context, req *sdk.CallToolRequest, in nodesIn) (*sdk.CallToolResult, nodesOut, error) {
	ctx = s.begin(ctx, req, "snag_nodes")
	out := nodesOut{Source: SourceDaemon, Nodes: []nodeOut{}}
	var b strings.Builder
	advice, err := s.graphCall(ctx, func(g Graph) error {
		if id := strings.TrimSpace(in.ID); id != "" {
			d, err := g.Note(ctx, id)
			if err != nil {
				return err
			}
			o := nodeOutOf(d.Note)
			o.Body = d.Body
			for _, l := range d.In {
				o.In = append(o.In, edgeOut{From: l.From, To: d.Key, Kind: l.Kind, Why: l.Why, Trust: string(l.Trust)})
			}
			out.Nodes = []nodeOut{o}
			writeNode(&b, o)
			return nil
		}
		if in.Limit == 0 {
			in.Limit = 20
		}
		got, err := g.Notes(ctx, ops.NoteQuery{Query: in.Query, Type: in.Type, Branch: in.Branch, Limit: in.Limit})
		if err != nil {
			return err
		}
		if len(got.Notes) == 0 {
			b.WriteString("no notes match: snag_note writes one")
			return nil
		}
		fmt.Fprintf(&b, "%d notes, newest first; u: unvetted, data:\n", len(got.Notes))
		for _, n := range got.Notes {
			o := nodeOutOf(n)
			out.Nodes = append(out.Nodes, o)
			b.WriteString(nodeRow(o) + "\n")
		}
		b.WriteString("id: one note with its links")
		return nil
	})
	if err != nil {
		return nil, nodesOut{}, err
	}
	if advice != "" {
		return &sdk.CallToolResult{Content: text(advice)}, nodesOut{Source: SourceFiles, Advisory: advice, Nodes: []nodeOut{}}, nil
	}
	return &sdk.CallToolResult{Content: text(b.String())}, out, nil
}

// maxNodeBody is how much of a node's body snag_nodes shows; its file
// has the rest.
const maxNodeBody = 1500

// writeNode writes one node in full: its line, file, body, and edges both
// ways, each with its trust.
func writeNode(b *strings.Builder, o nodeOut) {
	b.WriteString(nodeRow(o))
	if o.Author != "" {
		b.WriteString(" by " + o.Author)
	}
	if len(o.Tasks) > 0 {
		b.WriteString(" (" + strings.Join(o.Tasks, ", ") + ")")
	}
	b.WriteString("\n" + o.File + "\n")
	body := strings.TrimSpace(o.Body)
	if len(body) > maxNodeBody {
		body = oneLine(body, maxNodeBody) + " [more in the file]"
	}
	if body != "" {
		if o.Trust != "vetted" {
			body = fence(body) // a forged edge line in it reads as data
		} else {
			body = escapeControls(body)
		}
		b.WriteString(body + "\n")
	}
	edge := func(arrow, other string, e edgeOut) {
		fmt.Fprintf(b, "%s %s %s %s", arrow, e.Kind, other, e.Trust)
		if e.Why != "" {
			b.WriteString(" " + strconv.Quote(oneLine(e.Why, 100)))
		}
		b.WriteString("\n")
	}
	for _, e := range o.Links {
		edge("->", e.To, e)
	}
	for _, e := range o.In {
		edge("<-", e.From, e)
	}
}

func (s *server) link(ctx context.Context, req *sdk.CallToolRequest, in linkIn) (*sdk.CallToolResult, nodesOut, error) {
	ctx = naming(s.begin(ctx, req, "snag_link"), in.Agent)
	out := nodesOut{Source: SourceDaemon, Nodes: []nodeOut{}}
	var msg string
	advice, err := s.graphCall(ctx, func(g Graph) error {
		branch, _, tree, err := s.where(ctx, in.Branch)
		if err != nil {
			return err
		}
		d, err := g.Link(ctx, ops.LinkRequest{From: in.From, To: in.To, Kind: in.Kind, Why: in.Why, Branch: branch, Worktree: tree})
		if err != nil {
			return err
		}
		o := nodeOutOf(d.Note)
		out.Nodes = []nodeOut{o}
		trust := string(d.Trust)
		for _, l := range d.Links {
			if l.Kind == in.Kind && strings.EqualFold(l.To, strings.TrimSpace(in.To)) {
				trust = string(l.Trust)
			}
		}
		msg = fmt.Sprintf("%s %s %s (%s) in %s: commit it with your work", d.Key, in.Kind, strings.ToUpper(in.To), trust, d.File)
		return nil
	})
	if err != nil {
		return nil, nodesOut{}, err
	}
	if advice != "" {
		return &sdk.CallToolResult{Content: text(advice)}, nodesOut{Source: SourceFiles, Advisory: advice, Nodes: []nodeOut{}}, nil
	}
	return &sdk.CallToolResult{Content: text(msg)}, out, nil
}

// ago is a duration as the activity shows it: 40s, 12m, 3h, 2d.
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}

func (s *server) activity(ctx context.Context, req *sdk.CallToolRequest, in activityIn) (*sdk.CallToolResult, activityOut, error) {
	ctx = s.begin(ctx, req, "snag_activity")
	out := activityOut{Source: SourceDaemon}
	var b bytes.Buffer
	advice, err := s.graphCall(ctx, func(g Graph) error {
		if in.Branches == 0 {
			in.Branches = 20
		}
		a, err := g.Activity(ctx, in.Branches)
		if err != nil {
			return err
		}
		now := time.Now()
		out.Workspace, out.Tasks, out.BranchLeases, out.Recent, out.BranchesTotal = a.Workspace, a.Tasks, a.Branches, a.Recent, a.BranchesTotal
		out.Files = claimRows(a.Files, now)
		// Twenty branches fit in 600 tokens: the live leases are counted
		// here and listed in the structured result; each branch is one
		// line of keys, counts and its last report.
		fmt.Fprintf(&b, "live: %d tasks held, %d file claims, %d branch write leases", len(a.Tasks), len(out.Files), len(a.Branches))
		for i, l := range a.Branches {
			if i == 3 {
				fmt.Fprintf(&b, ", +%d", len(a.Branches)-3)
				break
			}
			fmt.Fprintf(&b, "; %s on %s %ds", l.Holder, shortBranch(l.Branch, 24), l.SecondsLeft)
		}
		b.WriteString("\nby branch, latest first (N-7+2: notes; c: claimed; r: resolved):\n")
		for _, r := range a.Recent {
			fmt.Fprintf(&b, "%s %s", shortBranch(r.Branch, 24), ago(now.Sub(r.Last)))
			for _, part := range []struct {
				tag  string
				keys []string
			}{{"", r.Nodes}, {"c:", r.Claimed}, {"r:", r.Resolved}} {
				if len(part.keys) > 0 {
					b.WriteString(" " + part.tag + part.keys[0])
					if len(part.keys) > 1 {
						fmt.Fprintf(&b, "+%d", len(part.keys)-1)
					}
				}
			}
			if r.Report != nil {
				fmt.Fprintf(&b, " %s %s", r.Report.Agent, quoted(r.Report.Message, 22))
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%d of %d branches (7 days)", len(a.Recent), a.BranchesTotal)
		return nil
	})
	if err != nil {
		return nil, activityOut{}, err
	}
	if advice != "" {
		return &sdk.CallToolResult{Content: text(advice)}, activityOut{Source: SourceFiles, Advisory: advice}, nil
	}
	return &sdk.CallToolResult{Content: text(b.String())}, out, nil
}

// shortBranch is a branch name of at most n characters: a longer one
// keeps its start and its end, where names differ.
func shortBranch(s string, n int) string {
	s = oneLine(s, 1<<10)
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	head := (n - 1) / 3
	return string(r[:head]) + "…" + string(r[len(r)-(n-1-head):])
}
