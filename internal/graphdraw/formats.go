package graphdraw

import (
	"strings"

	"github.com/snagdev/snag/internal/snag"
)

// A Format is one way of drawing a graph: snag graph --format writes it,
// GET /graph?format= answers it.
type Format struct {
	Draw        func(Graph) []byte
	ContentType string // what an HTTP answer carrying it says it is
}

// Formats are the drawings by name: dot, mermaid and svg.
var Formats = map[string]Format{
	"dot":     {DOT, "text/vnd.graphviz; charset=utf-8"},
	"mermaid": {Mermaid, "text/plain; charset=utf-8"},
	"svg":     {SVG, "image/svg+xml"},
}

// Title is the title of a drawing of the notes a query picks: "Decision
// graph", then what picks them (a note type, a branch, a task), each only
// when given.
func Title(noteType, branch, task string) string {
	var by []string
	if noteType != "" {
		by = append(by, noteType+" notes")
	}
	if branch != "" {
		by = append(by, "branch "+branch)
	}
	if task != "" {
		by = append(by, task)
	}
	if len(by) == 0 {
		return defaultTitle
	}
	return defaultTitle + ": " + strings.Join(by, ", ")
}

// Of is the graph of notes and the links among them, as snag answers
// them, under title ("" for "Decision graph").
func Of(title string, notes []snag.Note, links []snag.Link) Graph {
	g := Graph{Title: title, Nodes: make([]Node, 0, len(notes)), Edges: make([]Edge, 0, len(links))}
	for _, n := range notes {
		g.Nodes = append(g.Nodes, Node{Key: n.Key, Title: n.Title, Type: n.Type, Branch: n.Branch,
			Trust: string(n.Trust), Created: n.Created})
	}
	for _, l := range links {
		g.Edges = append(g.Edges, Edge{From: l.From, To: l.To, Kind: l.Kind, Why: l.Why})
	}
	return g
}
