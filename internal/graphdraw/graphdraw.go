// Package graphdraw draws snag's decision graph: the notes are the nodes,
// their links the edges. It writes the same graph three ways: [SVG], a
// self-contained picture the web board serves; [DOT], text for Graphviz;
// and [Mermaid], a flowchart for markdown that renders it.
//
// The picture is laid out by time: columns left to right, oldest first.
// The notes, ordered by when they were created (then by key, N-2 before
// N-10), are cut into runs: a run ends when the next note links to a
// note already in it, or when it holds as many notes as the tallest
// column may (the square root of the number of notes, and at least 4).
// Every run is a column, so no link joins two notes of one column, and a
// link written the usual way, to an older note ("took_from N-3",
// "chose N-4"), points left. Within a column the notes sit on a shared
// grid of rows, each near the average row of the notes it links to; a
// link between neighbouring columns is a curve through the gap between
// them, and a longer one runs along the gap between two rows, so no line
// crosses a note.
//
// The drawing is deterministic: the same graph gives the same bytes. It
// needs no script and no stylesheet of the page it is in. Every string
// of the graph may be hostile; it is escaped for XML, DOT and Mermaid.
//
// graphdraw imports nothing of snag's but the domain's values (a note, a
// link): [Of] makes a [Graph] of them, and a caller may build one itself.
package graphdraw

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Node is one note of the graph. Its type is matched without regard to
// case; its trust is unvetted, in any case, or else vetted.
type Node struct {
	Key     string    // the note's key, N-7; links name it
	Title   string    // drawn cut to about 28 characters, in full in a tooltip
	Type    string    // goal, decision, option, action, observation, outcome or question; any other is drawn grey
	Branch  string    // the git branch the note was written on
	Trust   string    // vetted or unvetted; an unvetted note has a dashed border
	Created time.Time // orders the columns of the picture, oldest first
	Href    string    // where the node links to in the SVG, DOT and Mermaid, or "" for none
}

// Edge is a link from the note it is written in to another: N-5
// "chose" N-4 is From N-5, To N-4.
type Edge struct {
	From, To string // the notes' keys
	Kind     string // took_from, led_to, chose, rejected, blocks or relates
	Why      string // a tooltip on the drawn link; may be empty
}

// Graph is what is drawn: its notes, their links and a title. A link
// whose end is not among the nodes is left out and counted in the
// picture's description; a link from a note to itself is left out too.
// A key that appears twice names the first node with it. Any string
// longer than 500 characters is cut, with "…".
type Graph struct {
	Nodes []Node
	Edges []Edge
	Title string // "Decision graph" when empty
}

// defaultTitle names a graph that has no title.
const defaultTitle = "Decision graph"

// A style is how a note type is drawn: a light fill under dark text and a
// darker border, so the text keeps at least 4.5:1 contrast and the border
// 3:1 against the white page (the palette test measures both).
type style struct {
	name   string
	fill   string
	stroke string
}

// palette is the fixed style of each type, in the legend's order.
var palette = []style{
	{"goal", "#dbeafe", "#1d4ed8"},
	{"decision", "#ede9fe", "#6d28d9"},
	{"option", "#fef9c3", "#a16207"},
	{"action", "#dcfce7", "#15803d"},
	{"observation", "#cffafe", "#0e7490"},
	{"outcome", "#fce7f3", "#be185d"},
	{"question", "#ffedd5", "#c2410c"},
}

// other is the style of a type not in the palette.
var other = style{"other", "#e5e7eb", "#4b5563"}

// The colours of everything that is not a note's fill.
const (
	textColour  = "#1f2328" // a note's key and title, the picture's title
	smallColour = "#3d444d" // a note's type and branch, edge labels, the legend
	edgeColour  = "#57606a" // links and their arrowheads
	background  = "#ffffff"
)

// styleOf is the style of type typ, cleaned and lower-cased; the second
// result is its index in the palette, or len(palette) for other.
func styleOf(typ string) (style, int) {
	for i, s := range palette {
		if s.name == typ {
			return s, i
		}
	}
	return other, len(palette)
}

// note is a node ready to draw: its strings cleaned, its place decided.
type note struct {
	key, title, typ, branch string // cleaned for drawing
	href                    string // "" when the node has none or it is refused
	created                 time.Time
	style                   style
	styleIdx                int
	unvetted                bool

	order      int   // place in time order
	layer, row int   // column and grid row
	nbrs       []int // the notes it is linked to, either way, by order, once each
}

// link is an edge both of whose ends are drawn: indexes into the notes
// in time order.
type link struct {
	from, to  int
	kind, why string
}

// prepared is a graph checked and sorted for drawing.
type prepared struct {
	title     string
	notes     []*note // in time order
	links     []link  // in the graph's order
	dangling  int     // edges to or from a key not among the nodes
	selfLoops int
	repeated  int // nodes whose key an earlier node has
	branches  int // distinct non-empty branches
}

// prepare cleans g's strings, drops repeated keys, orders the notes by
// time and resolves the edges.
func prepare(g Graph) *prepared {
	p := &prepared{title: clean(g.Title)}
	if p.title == "" {
		p.title = defaultTitle
	}
	byKey := make(map[string]*note, len(g.Nodes))
	branches := make(map[string]bool)
	for _, n := range g.Nodes {
		if _, ok := byKey[n.Key]; ok {
			p.repeated++
			continue
		}
		typ := strings.ToLower(clean(n.Type))
		st, idx := styleOf(typ)
		nt := &note{
			key:      clean(n.Key),
			title:    clean(n.Title),
			typ:      typ,
			branch:   clean(n.Branch),
			href:     safeHref(n.Href),
			created:  n.Created,
			style:    st,
			styleIdx: idx,
			unvetted: strings.EqualFold(strings.TrimSpace(n.Trust), "unvetted"),
		}
		if nt.typ == "" {
			nt.typ = "note"
		}
		byKey[n.Key] = nt
		p.notes = append(p.notes, nt)
		if nt.branch != "" {
			branches[nt.branch] = true
		}
	}
	p.branches = len(branches)
	// Stable, so two nodes alike in time and key keep the graph's order.
	slices.SortStableFunc(p.notes, func(a, b *note) int {
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return compareKeys(a.key, b.key)
	})
	for i, n := range p.notes {
		n.order = i
	}
	for _, e := range g.Edges {
		from, okf := byKey[e.From]
		to, okt := byKey[e.To]
		switch {
		case !okf || !okt:
			p.dangling++
		case from == to:
			p.selfLoops++
		default:
			p.links = append(p.links, link{from: from.order, to: to.order, kind: clean(e.Kind), why: clean(e.Why)})
			from.nbrs = append(from.nbrs, to.order)
			to.nbrs = append(to.nbrs, from.order)
		}
	}
	for _, n := range p.notes {
		slices.Sort(n.nbrs)
		n.nbrs = slices.Compact(n.nbrs)
	}
	return p
}

// compareKeys orders note keys by their number when both have one (N-2
// before N-10), else as strings.
func compareKeys(a, b string) int {
	na, oka := keyNumber(a)
	nb, okb := keyNumber(b)
	if oka && okb && na != nb {
		return cmp.Compare(na, nb)
	}
	return strings.Compare(a, b)
}

// keyNumber is the number at the end of a key like N-7.
func keyNumber(key string) (int, bool) {
	i := strings.LastIndexByte(key, '-')
	n, err := strconv.Atoi(key[i+1:])
	return n, err == nil
}

// safeHref is href if it is a link a picture may carry: a relative URL or
// one with scheme http, https or mailto, of at most maxText characters
// none of which clean would change. A javascript: URL, or anything
// unparseable, is refused, and the node is drawn without a link.
func safeHref(href string) string {
	href = strings.TrimSpace(href)
	if href == "" || len(href) > maxText || clean(href) != href {
		return ""
	}
	u, err := url.Parse(href)
	if err != nil {
		return ""
	}
	switch strings.ToLower(u.Scheme) {
	case "", "http", "https", "mailto":
		return href
	}
	return ""
}

// summary says in a sentence what the graph holds, for the picture's
// description: "7 notes, 6 links on 2 branches", then what was left out.
func (p *prepared) summary() string {
	if len(p.notes) == 0 {
		s := "No notes yet"
		if p.dangling > 0 {
			s += "; " + count(p.dangling, "link", "links") + " to notes not shown"
		}
		return s + "."
	}
	s := count(len(p.notes), "note", "notes") + ", " + count(len(p.links), "link", "links")
	if p.branches > 0 {
		s += " on " + count(p.branches, "branch", "branches")
	}
	if p.dangling > 0 {
		s += "; " + count(p.dangling, "link", "links") + " to notes not shown left out"
	}
	if p.selfLoops > 0 {
		s += "; " + count(p.selfLoops, "link", "links") + " from a note to itself left out"
	}
	if p.repeated > 0 {
		s += "; " + count(p.repeated, "note", "notes") + " with a key already drawn left out"
	}
	return s + "."
}

// count is "1 note" or "3 notes".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// label is how a note is named to a screen reader and in tooltips:
// "N-4 decision: Use SQLite FTS (main, unvetted)".
func (n *note) label() string {
	s := n.key + " " + n.typ + ": " + n.title
	var paren []string
	if n.branch != "" {
		paren = append(paren, n.branch)
	}
	if n.unvetted {
		paren = append(paren, "unvetted")
	}
	if len(paren) > 0 {
		s += " (" + strings.Join(paren, ", ") + ")"
	}
	return s
}

// tooltip is the note's label and when it was written.
func (n *note) tooltip() string {
	if n.created.IsZero() {
		return n.label()
	}
	return n.label() + ", created " + n.created.UTC().Format("2006-01-02 15:04") + " UTC"
}

// linkTitle is a link's tooltip: "N-5 chose N-4: faster to ship".
func (p *prepared) linkTitle(l link) string {
	s := p.notes[l.from].key + " " + cmp.Or(l.kind, "links to") + " " + p.notes[l.to].key
	if l.why != "" {
		s += ": " + l.why
	}
	return s
}
