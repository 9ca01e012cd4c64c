package board

import (
	"cmp"
	"context"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/graphdraw"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/queue"
)

// This file is the decision graph on the board: the graph page, which
// draws the notes and their links (graphdraw) and lists them as text, and
// a note's page, which lists its links both ways.

// notePath is the address of a note's page.
func notePath(key string) string { return "/team/notes/" + url.PathEscape(key) }

func (s *Server) graphPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	f := GraphFilter{Branch: strings.TrimSpace(q.Get("branch")), Type: strings.TrimSpace(q.Get("type")),
		Plan: strings.TrimSpace(q.Get("plan")), Task: strings.ToUpper(strings.TrimSpace(q.Get("task")))}
	all, err := call(ctx, s, ops.GetGraph, ops.NoteQuery{})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	g := all
	if f.Branch != "" || f.Type != "" || f.Task != "" {
		if g, err = call(ctx, s, ops.GetGraph, ops.NoteQuery{Branch: f.Branch, Type: f.Type, Task: f.Task}); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	plans, err := call(ctx, s, ops.ListPlans, ops.None{})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if f.Plan != "" {
		if g, err = s.ofPlan(ctx, g, f.Plan); err != nil {
			s.fail(w, r, err)
			return
		}
	}

	out := &GraphPage{Page: s.page(r, "Decision graph", PageGraph), Filter: f, Types: queue.NoteTypes,
		Total: len(all.Nodes), Links: len(g.Links)}
	branches, tasks := map[string]bool{}, map[string]bool{}
	for _, n := range all.Nodes {
		if n.Branch != "" {
			branches[n.Branch] = true
		}
		for _, t := range n.Tasks {
			tasks[t] = true
		}
	}
	// A filter the URL names keeps its choice in the form, though no note
	// has it (any more).
	if f.Branch != "" {
		branches[f.Branch] = true
	}
	if f.Task != "" {
		tasks[f.Task] = true
	}
	out.Branches = sortedKeys(branches)
	out.Tasks = sortedKeys(tasks)
	slices.SortStableFunc(out.Tasks, func(a, b string) int { return cmp.Compare(taskNum(a), taskNum(b)) })
	for _, p := range plans.Plans {
		out.Plans = append(out.Plans, p.Slug)
	}
	if f.Plan != "" && !slices.Contains(out.Plans, f.Plan) {
		out.Plans = append(out.Plans, f.Plan)
	}

	titles := titlesOf(all.Nodes)
	for _, n := range slices.Backward(g.Nodes) { // oldest first, as the picture reads
		node := GraphNode{Note: n}
		for _, l := range g.Links {
			if l.From == n.Key {
				node.Out = append(node.Out, NoteLink{Link: l, Key: l.To, Title: titles[l.To]})
			}
		}
		out.Nodes = append(out.Nodes, node)
	}
	svg := graphdraw.SVG(drawing(g, f))
	out.Picture, out.Fit = template.HTML(svg), naturalWidth(svg) <= fitWidth
	s.render(w, http.StatusOK, PageGraph, out)
}

// fitWidth is the widest picture (graphdraw's natural width, in CSS
// pixels) that a wide window shrinks to fit rather than scrolls: on a
// window 1200 px wide or more (board.css) that is by an eighth at most,
// and its words stay readable. A wider picture keeps its size and
// scrolls, as every picture does on a narrower window.
const fitWidth = 1320

// svgWidth finds the width graphdraw gives its picture's root element.
var svgWidth = regexp.MustCompile(`^<svg\b[^>]*?\swidth="([0-9.]+)"`)

// naturalWidth is the width of graphdraw's picture, or a width too wide
// to fit when it cannot be read.
func naturalWidth(svg []byte) float64 {
	m := svgWidth.FindSubmatch(svg)
	if m == nil {
		return math.Inf(1)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return math.Inf(1)
	}
	return v
}

// ofPlan keeps the notes of g that name a task of the plan slug, and the
// links among them.
func (s *Server) ofPlan(ctx context.Context, g api.Graph, slug string) (api.Graph, error) {
	rows, err := s.tasks(ctx)
	if err != nil {
		return api.Graph{}, err
	}
	ofPlan := map[string]bool{}
	for _, row := range rows {
		if row.Plan == slug {
			ofPlan[row.Key], ofPlan[row.ID] = true, true
		}
	}
	delete(ofPlan, "")
	out := api.Graph{Links: []api.Link{}}
	kept := map[string]bool{}
	for _, n := range g.Nodes {
		if slices.ContainsFunc(n.Tasks, func(t string) bool { return ofPlan[t] }) {
			out.Nodes = append(out.Nodes, n)
			kept[n.Key] = true
		}
	}
	for _, l := range g.Links {
		if kept[l.From] && kept[l.To] {
			out.Links = append(out.Links, l)
		}
	}
	return out, nil
}

// drawing is g as graphdraw draws it, each note a link to its page.
func drawing(g api.Graph, f GraphFilter) graphdraw.Graph {
	title := "Decision graph"
	var by []string
	for _, p := range []struct{ name, v string }{{"branch", f.Branch}, {"type", f.Type}, {"plan", f.Plan}, {"task", f.Task}} {
		if p.v != "" {
			by = append(by, p.name+" "+p.v)
		}
	}
	if len(by) > 0 {
		title += ": " + strings.Join(by, ", ")
	}
	out := graphdraw.Of(title, g.Nodes, g.Links)
	for i := range out.Nodes {
		out.Nodes[i].Href = notePath(out.Nodes[i].Key)
	}
	return out
}

// titlesOf maps the notes' keys, and their ids, to their titles: a link
// names its target by either.
func titlesOf(ns []api.Note) map[string]string {
	m := make(map[string]string, 2*len(ns))
	for _, n := range ns {
		m[n.Key] = n.Title
		if n.ID != "" {
			m[n.ID] = n.Title
		}
	}
	return m
}

// keysOf maps the notes' ids to their keys.
func keysOf(ns []api.Note) map[string]string {
	m := make(map[string]string, len(ns))
	for _, n := range ns {
		if n.ID != "" {
			m[n.ID] = n.Key
		}
	}
	return m
}

// taskNum is the number in a task's alias (SNAG-12: 12), for sorting
// SNAG-2 before SNAG-10; 0 for none.
func taskNum(key string) int {
	_, n, _ := strings.Cut(key, "-")
	v, _ := strconv.Atoi(n)
	return v
}

func (s *Server) notePage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	n, err := call(ctx, s, ops.GetNote, ops.NoteRef{Ref: r.PathValue("ref")})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := &NotePage{Page: s.page(r, n.Key+" "+n.Title, PageNotes), Note: &n,
		Body: Markdown([]byte(n.Body), n.Trust != queue.TrustUnvetted)}
	// The notes at the other ends, for their titles: a missing one is
	// listed by its key alone.
	var all api.Graph
	if len(n.Links)+len(n.In) > 0 {
		all, _ = call(ctx, s, ops.GetGraph, ops.NoteQuery{})
	}
	titles, keys := titlesOf(all.Nodes), keysOf(all.Nodes)
	for _, l := range n.Links {
		key := l.To
		if k, ok := keys[key]; ok {
			key = k
		}
		out.Out = append(out.Out, NoteLink{Link: l, Key: key, Title: titles[l.To]})
	}
	for _, l := range n.In {
		out.In = append(out.In, NoteLink{Link: l, Key: l.From, Title: titles[l.From]})
	}
	s.render(w, http.StatusOK, PageNote, out)
}
