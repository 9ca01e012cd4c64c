package graph_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/engine/graph"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/workspace/workspacetest"
)

// TestNotesAndLinks: a note is a file with its edges, read back with the
// edges both ways; a link that closes a cycle of a kind that follows
// time is refused, and one already there changes nothing.
func TestNotesAndLinks(t *testing.T) {
	w := workspacetest.Open(t)
	g, ctx := w.Graph, context.Background()
	a, err := g.AddNote(ctx, queue.Person, "dana", graph.NoteInput{Title: "Parse with a Pratt parser", Body: "Simpler to extend."})
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.AddNote(ctx, queue.Person, "dana", graph.NoteInput{Title: "Precedence table in one file", Type: "observation",
		Links: []queue.Link{{To: strings.ToLower(a.Key), Kind: "took_from", Why: "the parser needs it"}}})
	if err != nil {
		t.Fatal(err)
	}
	if b.Key == a.Key || b.Branch != graph.NoBranch {
		t.Fatalf("notes %s and %s on %q: want two keys, outside git on %q", a.Key, b.Key, b.Branch, graph.NoBranch)
	}
	if _, err := os.Stat(filepath.Join(w.Engine.Root(), ".snag", queue.NotesFolder, queue.NoteFileName(b.Key, b.Title))); err != nil {
		t.Fatalf("the note's file: %v", err)
	}
	n, err := g.Note(ctx, strings.ToLower(a.Key))
	if err != nil {
		t.Fatal(err)
	}
	if len(n.In) != 1 || n.In[0].From != b.Key || n.In[0].Kind != "took_from" {
		t.Fatalf("%s's edges in: %+v, want %s took_from", a.Key, n.In, b.Key)
	}
	_, err = g.Link(ctx, queue.Person, "dana", graph.LinkInput{From: a.Key, To: b.Key, Kind: "took_from"})
	if workspacetest.CodeOf(err) != "cycle" || !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("a link closing a took_from cycle: %v, want refused as a cycle", err)
	}
	got, err := g.Link(ctx, queue.Person, "dana", graph.LinkInput{From: a.Key, To: b.Key, Kind: "relates", Why: "same module"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Links) != 1 || got.Links[0].To != b.Key {
		t.Fatalf("%s's links after the link: %+v", a.Key, got.Links)
	}
	if _, err := g.Link(ctx, queue.Person, "dana", graph.LinkInput{From: a.Key, To: b.Key, Kind: "relates"}); err != nil {
		t.Fatalf("the same link again: %v, want nothing changed", err)
	}
	ns, ls, err := g.Graph(ctx, engine.NoteFilter{})
	if err != nil {
		t.Fatal(err)
	}
	edges := map[string]bool{}
	for _, l := range ls {
		edges[l.From+" "+l.Kind+" "+l.To] = true
	}
	if len(ns) < 2 || !edges[b.Key+" took_from "+a.Key] || !edges[a.Key+" relates "+b.Key] {
		t.Fatalf("the graph: %d notes, edges %v; want both notes' edges", len(ns), edges)
	}
	_, err = g.AddNote(ctx, queue.Person, "dana", graph.NoteInput{Title: "x", Type: "musing"})
	if workspacetest.CodeOf(err) != "bad_type" {
		t.Fatalf("a note of an unknown type: %v, want bad_type", err)
	}
}

// TestBranchLease: an agent's graph write takes its branch's write
// lease; another agent's write on that branch is refused while it lasts,
// and an agent must name its branch.
func TestBranchLease(t *testing.T) {
	w := workspacetest.Open(t)
	g, ctx := w.Graph, context.Background()
	ada, err := w.Engine.Register(ctx, index.Session{Name: "ADA", Client: "test"})
	if err != nil {
		t.Fatal(err)
	}
	bea, err := w.Engine.Register(ctx, index.Session{Name: "BEA", Client: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.AddNote(ctx, queue.Agent, ada.Name, graph.NoteInput{Title: "Cache the lexer", Session: ada.ID}); workspacetest.CodeOf(err) != "missing_branch" {
		t.Fatalf("an agent's note with no branch: %v, want missing_branch", err)
	}
	n, err := g.AddNote(ctx, queue.Agent, ada.Name, graph.NoteInput{Title: "Cache the lexer", Branch: "feat", Session: ada.ID})
	if err != nil {
		t.Fatal(err)
	}
	if n.Trust != string(queue.TrustUnvetted) || n.Author != ada.Name {
		t.Fatalf("an agent's note: trust %q by %q, want unvetted by ADA", n.Trust, n.Author)
	}
	_, err = g.AddNote(ctx, queue.Agent, bea.Name, graph.NoteInput{Title: "Drop the cache", Branch: "feat", Session: bea.ID})
	if workspacetest.CodeOf(err) != "branch_held" || !errors.Is(err, engine.ErrHeld) || !strings.Contains(err.Error(), "ADA") {
		t.Fatalf("a note on a branch ADA writes: %v, want branch_held naming ADA", err)
	}
}

// TestPlans: an agent's plan is an unvetted draft it may change but not
// activate; a person's activation vets it.
func TestPlans(t *testing.T) {
	w := workspacetest.Open(t)
	g, ctx := w.Graph, context.Background()
	v, err := g.CreatePlanView(ctx, queue.Agent, "ADA", "Faster parser", "Wave 1: the lexer.")
	if err != nil {
		t.Fatal(err)
	}
	if v.Slug != "faster-parser" || v.Plan.Status != queue.PlanDraft || v.Plan.Trust != queue.TrustUnvetted {
		t.Fatalf("an agent's plan: %s %s %s, want faster-parser, a draft, unvetted", v.Slug, v.Plan.Status, v.Plan.Trust)
	}
	_, err = g.UpdatePlan(ctx, queue.Agent, "ADA", v.Slug, graph.PlanEdit{Status: queue.PlanActive})
	if workspacetest.CodeOf(err) != "person_only" {
		t.Fatalf("an agent activating its plan: %v, want person_only", err)
	}
	body := "Wave 1: the lexer. Wave 2: the parser."
	if _, err := g.UpdatePlan(ctx, queue.Agent, "ADA", v.Slug, graph.PlanEdit{Body: &body}); err != nil {
		t.Fatal(err)
	}
	p, err := g.UpdatePlan(ctx, queue.Person, "dana", v.Slug, graph.PlanEdit{Status: queue.PlanActive})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != queue.PlanActive || p.Trust != queue.TrustVetted || strings.TrimSpace(string(p.Body)) != body {
		t.Fatalf("after a person's activation: %s %s %q, want active, vetted, the agent's body", p.Status, p.Trust, p.Body)
	}
	vs, err := g.Plans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 || vs[0].Slug != v.Slug {
		t.Fatalf("plans: %+v, want %s first", vs, v.Slug)
	}
	if _, err := g.Plan(ctx, "no-such-plan"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a plan that is not there: %v, want not found", err)
	}
}

// TestHandoff: a handoff with a task moves its lease to a live addressee
// under a new epoch, with the task's file; one to an agent with no live
// session moves nothing.
func TestHandoff(t *testing.T) {
	w := workspacetest.Open(t)
	g, e, ctx := w.Graph, w.Engine, context.Background()
	ada, err := e.Register(ctx, index.Session{Name: "ADA", Client: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Register(ctx, index.Session{Name: "BEA", Client: "test"}); err != nil {
		t.Fatal(err)
	}
	c, err := e.Claim(ctx, ada, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	key := c.Task.Key
	_, err = g.Handoff(ctx, &ada, "", ops.HandoffRequest{To: "nobody", Title: "yours", Task: key})
	if !errors.Is(err, graph.ErrNotLive) {
		t.Fatalf("a handoff to an agent with no session: %v, want not live", err)
	}
	_, err = g.Handoff(ctx, &ada, "", ops.HandoffRequest{To: "ada", Title: "yours"})
	if workspacetest.CodeOf(err) != "to_self" {
		t.Fatalf("a handoff to oneself: %v, want to_self", err)
	}
	h, err := g.Handoff(ctx, &ada, "", ops.HandoffRequest{To: "bea", Title: "Finish this: tests are written", Task: key})
	if err != nil {
		t.Fatal(err)
	}
	if !h.Moved || h.Key != key || h.Epoch <= c.Epoch || !h.Live || h.Message.To != "BEA" {
		t.Fatalf("the handoff: %+v, want %s moved to BEA past epoch %d", h, key, c.Epoch)
	}
	ref, err := queue.ParseRef(key)
	if err != nil {
		t.Fatal(err)
	}
	it, err := e.Get(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := e.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.TaskID == it.ID && (l.Holder != "BEA" || l.Epoch != h.Epoch) {
			t.Fatalf("%s's lease after the handoff: held by %s at %d, want BEA at %d", key, l.Holder, l.Epoch, h.Epoch)
		}
	}
	if it.Task.Assignee != "BEA" {
		t.Fatalf("%s's assignee after the handoff: %q, want BEA", key, it.Task.Assignee)
	}
}
