package graphdraw

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"go/build"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// t0 is when the test graphs start.
var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// realistic is a small graph as an agent writes one: a goal, two
// options, a decision that chose one and rejected the other, an
// observation on a spike branch that took from the decision, and an
// outcome that the decision led to.
func realistic() Graph {
	node := func(n int, typ, title, branch, trust string, after time.Duration) Node {
		key := fmt.Sprintf("N-%d", n)
		return Node{Key: key, Title: title, Type: typ, Branch: branch, Trust: trust, Created: t0.Add(after), Href: "/notes/" + key}
	}
	return Graph{
		Title: "Search for notes",
		Nodes: []Node{
			node(1, "goal", "Search notes in under 10 ms", "main", "vetted", 0),
			node(2, "option", "Use SQLite FTS5", "main", "unvetted", 5*time.Minute),
			node(3, "option", "Use bleve", "main", "unvetted", 5*time.Minute+20*time.Second),
			node(4, "decision", "Use SQLite FTS5 for search", "main", "vetted", 40*time.Minute),
			node(5, "observation", "FTS5's default tokenizer splits on hyphens, so SNAG-12 is two words", "spike/fts", "unvetted", 2*time.Hour),
			node(6, "outcome", "Search answers in 3 ms at 10k notes", "main", "vetted", 26*time.Hour),
		},
		Edges: []Edge{
			{From: "N-4", To: "N-1", Kind: "took_from"},
			{From: "N-4", To: "N-2", Kind: "chose", Why: "SQLite is already linked: no new dependency"},
			{From: "N-4", To: "N-3", Kind: "rejected", Why: "adds 12 MB to the binary"},
			{From: "N-5", To: "N-4", Kind: "took_from"},
			{From: "N-6", To: "N-5", Kind: "took_from", Why: "the tokenizer fix is what made keys searchable"},
			{From: "N-4", To: "N-6", Kind: "led_to"},
			{From: "N-6", To: "N-1", Kind: "relates"},
		},
	}
}

// hostile is a graph whose every string tries to break out of its quoting.
func hostile() Graph {
	return Graph{
		Title: `<script>alert("t")</script> & "graph"`,
		Nodes: []Node{
			{Key: "N-1", Title: `</title><script>alert("x")</script>`, Type: "goal", Branch: "main", Created: t0, Href: `/notes/N-1?a=1&b="2"`},
			{Key: "N-2", Title: `Tom & "Jerry" <b>bold</b> 'q' #quot; ` + "`tick`", Type: "Decision", Branch: "feat/<x>&y", Trust: "unvetted", Created: t0.Add(time.Minute), Href: "javascript:alert(1)"},
			{Key: "N-3", Title: `back\slash \N "end\`, Type: "<odd type>", Branch: `b"r`, Created: t0.Add(2 * time.Minute)},
			{Key: "N-4", Title: "日本語のタイトルはとても長いのでここで切られるはずです", Type: "question", Branch: "main", Created: t0.Add(3 * time.Minute)},
			{Key: "N-5", Title: "🚀 ship it 👩‍💻 \u202Eevil\u202C line\nbreak\x00nul \xff\xfe bad utf8 \uFFFE", Type: "", Branch: "", Trust: "UNVETTED", Created: t0.Add(4 * time.Minute)},
			{Key: `N-"6"; x -> y`, Title: "]]> <![CDATA[ x ]]>", Type: "action", Branch: "main", Created: t0.Add(5 * time.Minute)},
		},
		Edges: []Edge{
			{From: "N-2", To: "N-1", Kind: `chose|"x"`, Why: `<&>"'`},
			{From: "N-3", To: "N-2", Kind: "relates", Why: "\\\"\n"},
			{From: "N-4", To: "N-3", Kind: "a very long kind of link indeed", Why: "日本語"},
			{From: "N-5", To: "N-4", Kind: "", Why: ""},
			{From: `N-"6"; x -> y`, To: "N-5", Kind: "blocks"},
		},
	}
}

// dangling is the realistic graph with links to notes not in it, a link
// from a note to itself and a key repeated.
func dangling() Graph {
	g := realistic()
	g.Title = ""
	g.Nodes = append(g.Nodes, Node{Key: "N-2", Title: "A second N-2", Type: "option", Created: t0})
	g.Edges = append(g.Edges,
		Edge{From: "N-6", To: "N-99", Kind: "took_from"},
		Edge{From: "N-98", To: "N-1", Kind: "relates"},
		Edge{From: "N-3", To: "N-3", Kind: "relates"},
	)
	return g
}

// randomGraph is n notes on three branches, each linked to one or two
// older notes, and now and then to a newer one.
func randomGraph(n int, seed uint64) Graph {
	r := rand.New(rand.NewPCG(seed, seed))
	types := []string{"goal", "decision", "option", "action", "observation", "outcome", "question", "chore"}
	kinds := []string{"took_from", "led_to", "chose", "rejected", "blocks", "relates"}
	branches := []string{"main", "feat/search", "spike/fts"}
	var g Graph
	at := t0
	for i := 1; i <= n; i++ {
		if r.IntN(3) > 0 {
			at = at.Add(time.Duration(r.IntN(90)) * time.Minute)
		}
		trust := "vetted"
		if r.IntN(3) == 0 {
			trust = "unvetted"
		}
		key := fmt.Sprintf("N-%d", i)
		g.Nodes = append(g.Nodes, Node{
			Key: key, Title: fmt.Sprintf("Note %d about %s", i, strings.Repeat("things ", r.IntN(6))),
			Type: types[r.IntN(len(types))], Branch: branches[r.IntN(len(branches))],
			Trust: trust, Created: at, Href: "/notes/" + key,
		})
		if i == 1 {
			continue
		}
		for range 1 + r.IntN(2) {
			g.Edges = append(g.Edges, Edge{From: key, To: fmt.Sprintf("N-%d", 1+r.IntN(i-1)), Kind: kinds[r.IntN(len(kinds))], Why: "because"})
		}
		if r.IntN(10) == 0 && i < n {
			g.Edges = append(g.Edges, Edge{From: key, To: fmt.Sprintf("N-%d", i+1+r.IntN(n-i)), Kind: "led_to"})
		}
	}
	return g
}

// formats are the three drawings, by the extension of their golden files.
var formats = []struct {
	ext  string
	draw func(Graph) []byte
}{
	{"svg", SVG},
	{"dot", DOT},
	{"mmd", Mermaid},
}

func TestGolden(t *testing.T) {
	for _, c := range []struct {
		name   string
		g      Graph
		budget map[string]int // the most bytes each drawing may take
	}{
		{"realistic", realistic(), map[string]int{"svg": 14_000, "dot": 3_000, "mmd": 2_000}},
		{"hostile", hostile(), map[string]int{"svg": 12_000, "dot": 3_000, "mmd": 2_000}},
		{"dangling", dangling(), map[string]int{"svg": 14_000, "dot": 3_000, "mmd": 2_000}},
		{"empty", Graph{}, map[string]int{"svg": 700, "dot": 400, "mmd": 100}},
	} {
		for _, f := range formats {
			t.Run(c.name+"."+f.ext, func(t *testing.T) {
				got := f.draw(c.g)
				checkGolden(t, filepath.Join("testdata", c.name+"."+f.ext), got)
				if len(got) > c.budget[f.ext] {
					t.Errorf("%s.%s is %d bytes; the budget is %d", c.name, f.ext, len(got), c.budget[f.ext])
				}
			})
		}
	}
}

// checkGolden compares got with the golden file, or rewrites it under -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./graphdraw -run %s -update to write it)", err, t.Name())
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func TestDeterministic(t *testing.T) {
	for _, g := range []Graph{realistic(), hostile(), randomGraph(60, 3)} {
		shuffled := g
		shuffled.Nodes = slices.Clone(g.Nodes)
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled.Nodes), func(i, j int) {
			shuffled.Nodes[i], shuffled.Nodes[j] = shuffled.Nodes[j], shuffled.Nodes[i]
		})
		for _, f := range formats {
			a, b, c := f.draw(g), f.draw(g), f.draw(shuffled)
			if !bytes.Equal(a, b) {
				t.Errorf("%s: two drawings of one graph differ", f.ext)
			}
			if !bytes.Equal(a, c) {
				t.Errorf("%s: the order of the nodes changed the drawing:\n%s", f.ext, cmp.Diff(string(a), string(c)))
			}
		}
	}
}

// element is an XML element read back from a drawing.
type element struct {
	name     string
	attr     map[string]string
	text     string // its own character data
	children []*element
}

// walk calls fn on e and every element under it, in document order.
func (e *element) walk(fn func(*element)) {
	fn(e)
	for _, c := range e.children {
		c.walk(fn)
	}
}

// all is every element under e, e included, named name.
func (e *element) all(name string) []*element {
	var out []*element
	e.walk(func(x *element) {
		if x.name == name {
			out = append(out, x)
		}
	})
	return out
}

// child is e's first child named name, or nil.
func (e *element) child(name string) *element {
	for _, c := range e.children {
		if c.name == name {
			return c
		}
	}
	return nil
}

// parseXML reads a whole document with encoding/xml's strict decoder: one
// root element, every tag closed, every entity known.
func parseXML(doc []byte) (*element, error) {
	d := xml.NewDecoder(bytes.NewReader(doc))
	var root *element
	var stack []*element
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := &element{name: tok.Name.Local, attr: make(map[string]string)}
			for _, a := range tok.Attr {
				e.attr[a.Name.Local] = a.Value
			}
			switch {
			case len(stack) > 0:
				stack[len(stack)-1].children = append(stack[len(stack)-1].children, e)
			case root == nil:
				root = e
			default:
				return nil, fmt.Errorf("a second root element <%s>", e.name)
			}
			stack = append(stack, e)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text += string(tok)
			} else if len(bytes.TrimSpace(tok)) > 0 {
				return nil, fmt.Errorf("text outside the root element: %q", tok)
			}
		}
	}
	if root == nil {
		return nil, errors.New("no root element")
	}
	return root, nil
}

// mustParse is the drawing's root element, or fails the test.
func mustParse(t testing.TB, doc []byte) *element {
	t.Helper()
	root, err := parseXML(doc)
	if err != nil {
		t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, doc)
	}
	return root
}

// svgElements are the elements a drawing may hold: no script, no
// foreignObject, nothing a title could smuggle in.
var svgElements = []string{"svg", "title", "desc", "style", "defs", "marker", "path", "rect", "g", "text", "a"}

func TestSVGIsXML(t *testing.T) {
	for name, g := range map[string]Graph{
		"realistic": realistic(), "hostile": hostile(), "dangling": dangling(), "empty": {},
		"random100": randomGraph(100, 1), "random7": randomGraph(7, 2),
	} {
		t.Run(name, func(t *testing.T) {
			root := mustParse(t, SVG(g))
			if root.name != "svg" {
				t.Fatalf("root element is <%s>, want <svg>", root.name)
			}
			root.walk(func(e *element) {
				if !slices.Contains(svgElements, e.name) {
					t.Errorf("unexpected element <%s>", e.name)
				}
				for a, v := range e.attr {
					if strings.HasPrefix(a, "on") || strings.Contains(strings.ToLower(v), "javascript:") {
						t.Errorf("<%s %s=%q>: no scripts in a picture", e.name, a, v)
					}
				}
			})
			ids := make(map[string]bool)
			root.walk(func(e *element) {
				if id := e.attr["id"]; id != "" {
					if ids[id] {
						t.Errorf("id %q is used twice", id)
					}
					ids[id] = true
				}
			})
			for _, attr := range []string{"aria-labelledby", "aria-describedby"} {
				if id := root.attr[attr]; !ids[id] {
					t.Errorf("the root's %s names %q, which no element has", attr, id)
				}
			}
			if root.attr["viewBox"] != "0 0 "+root.attr["width"]+" "+root.attr["height"] {
				t.Errorf("viewBox %q does not match width %q and height %q", root.attr["viewBox"], root.attr["width"], root.attr["height"])
			}
		})
	}
}

func TestSVGAccessible(t *testing.T) {
	root := mustParse(t, SVG(realistic()))
	if got := root.attr["role"]; got != "graphics-document" {
		t.Errorf("role = %q with links in the picture, want graphics-document (an img hides its links)", got)
	}
	if got, want := root.child("title").text, "Search for notes"; got != want {
		t.Errorf("title = %q, want %q", got, want)
	}
	if got, want := root.child("desc").text, "6 notes, 7 links on 2 branches."; got != want {
		t.Errorf("desc = %q, want %q", got, want)
	}
	var labels []string
	for _, a := range root.all("a") {
		labels = append(labels, a.attr["href"]+" "+a.attr["aria-label"])
	}
	want := []string{
		"/notes/N-1 N-1 goal: Search notes in under 10 ms (main)",
		"/notes/N-2 N-2 option: Use SQLite FTS5 (main, unvetted)",
		"/notes/N-3 N-3 option: Use bleve (main, unvetted)",
		"/notes/N-4 N-4 decision: Use SQLite FTS5 for search (main)",
		"/notes/N-5 N-5 observation: FTS5's default tokenizer splits on hyphens, so SNAG-12 is two words (spike/fts, unvetted)",
		"/notes/N-6 N-6 outcome: Search answers in 3 ms at 10k notes (main)",
	}
	if diff := cmp.Diff(want, labels); diff != "" {
		t.Errorf("links (-want +got):\n%s", diff)
	}

	g := realistic()
	for i := range g.Nodes {
		g.Nodes[i].Href = ""
	}
	root = mustParse(t, SVG(g))
	if got := root.attr["role"]; got != "img" {
		t.Errorf("role = %q without links, want img", got)
	}
	if n := len(root.all("a")); n != 0 {
		t.Errorf("%d links drawn for nodes without Href", n)
	}
}

// noteText is the words drawn in each note, by note, its tooltip first.
func noteText(root *element) [][]string {
	var out [][]string
	root.walk(func(e *element) {
		if e.attr["class"] != "note" {
			return
		}
		var words []string
		e.walk(func(c *element) {
			if c.name == "title" || c.name == "text" {
				words = append(words, c.text)
			}
		})
		out = append(out, words)
	})
	return out
}

func TestSVGNoteText(t *testing.T) {
	root := mustParse(t, SVG(realistic()))
	got := noteText(root)
	want := [][]string{
		{"N-1 goal: Search notes in under 10 ms (main), created 2026-03-02 09:00 UTC", "N-1", "goal", "Search notes in under 10 ms", "main"},
		{"N-2 option: Use SQLite FTS5 (main, unvetted), created 2026-03-02 09:05 UTC", "N-2", "option", "Use SQLite FTS5", "main · unvetted"},
		{"N-3 option: Use bleve (main, unvetted), created 2026-03-02 09:05 UTC", "N-3", "option", "Use bleve", "main · unvetted"},
		{"N-4 decision: Use SQLite FTS5 for search (main), created 2026-03-02 09:40 UTC", "N-4", "decision", "Use SQLite FTS5 for search", "main"},
		{"N-5 observation: FTS5's default tokenizer splits on hyphens, so SNAG-12 is two words (spike/fts, unvetted), created 2026-03-02 11:00 UTC",
			"N-5", "observation", "FTS5's default tokenizer splits", "on hyphens, so SNAG-12…", "spike/fts · unvetted"},
		{"N-6 outcome: Search answers in 3 ms at 10k notes (main), created 2026-03-03 11:00 UTC", "N-6", "outcome", "Search answers in 3 ms at 10k", "notes", "main"},
	}
	// The notes are drawn column by column, each top to bottom.
	slices.SortFunc(got, func(a, b []string) int { return compareKeys(a[1], b[1]) })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}

	var links []string
	for _, p := range root.all("path") {
		if tt := p.child("title"); tt != nil {
			links = append(links, tt.text)
		}
	}
	wantLinks := []string{
		"N-4 took_from N-1",
		"N-4 chose N-2: SQLite is already linked: no new dependency",
		"N-4 rejected N-3: adds 12 MB to the binary",
		"N-5 took_from N-4",
		"N-6 took_from N-5: the tokenizer fix is what made keys searchable",
		"N-4 led_to N-6",
		"N-6 relates N-1",
	}
	if diff := cmp.Diff(wantLinks, links); diff != "" {
		t.Errorf("link tooltips (-want +got):\n%s", diff)
	}
	var kinds []string
	for _, e := range root.all("g") {
		if e.attr["class"] == "label" {
			kinds = append(kinds, e.child("text").text)
		}
	}
	if diff := cmp.Diff([]string{"took_from", "chose", "rejected", "took_from", "took_from", "led_to", "relates"}, kinds); diff != "" {
		t.Errorf("link labels (-want +got):\n%s", diff)
	}
}

func TestSVGHostile(t *testing.T) {
	out := SVG(hostile())
	root := mustParse(t, out)
	if got, want := root.child("title").text, `<script>alert("t")</script> & "graph"`; got != want {
		t.Errorf("title = %q, want %q", got, want)
	}
	links := root.all("a")
	if len(links) != 1 {
		t.Fatalf("%d links, want 1: the javascript: href is refused", len(links))
	}
	if got, want := links[0].attr["href"], `/notes/N-1?a=1&b="2"`; got != want {
		t.Errorf("href = %q, want %q", got, want)
	}
	if got, want := links[0].attr["aria-label"], `N-1 goal: </title><script>alert("x")</script> (main)`; got != want {
		t.Errorf("aria-label = %q, want %q", got, want)
	}
	got := noteText(root)
	slices.SortFunc(got, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	want := [][]string{
		{`N-"6"; x -> y action: ]]> <![CDATA[ x ]]> (main), created 2026-03-02 09:05 UTC`, `N-"6"; x -> y`, "action", "]]> <![CDATA[ x ]]>", "main"},
		{`N-1 goal: </title><script>alert("x")</script> (main), created 2026-03-02 09:00 UTC`, "N-1", "goal", `</title><script>alert("x")</script`, ">", "main"},
		{`N-2 decision: Tom & "Jerry" <b>bold</b> 'q' #quot; ` + "`tick`" + ` (feat/<x>&y, unvetted), created 2026-03-02 09:01 UTC`,
			"N-2", "decision", `Tom & "Jerry" <b>bold</b> 'q'`, "#quot; `tick`", "feat/<x>&y · unvetted"},
		{`N-3 <odd type>: back\slash \N "end\ (b"r), created 2026-03-02 09:02 UTC`, "N-3", "<odd type>", `back\slash \N "end\`, `b"r`},
		{"N-4 question: 日本語のタイトルはとても長いのでここで切られるはずです (main), created 2026-03-02 09:03 UTC", "N-4", "question", "日本語のタイトルはとても長いの", "でここで切られるはずです", "main"},
		{"N-5 note: 🚀 ship it 👩‍💻 evil line breaknul \uFFFD bad utf8 (unvetted), created 2026-03-02 09:04 UTC", "N-5", "note", "🚀 ship it 👩‍💻 evil line", "breaknul \uFFFD bad utf8", "unvetted"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	// Each note's box has the palette's colours for its type, matched
	// without regard to case; a type not in the palette is grey.
	for _, e := range root.all("rect") {
		if e.attr["class"] == "box" && e.attr["fill"] == "" {
			t.Errorf("a note's box has no fill")
		}
	}
	if !bytes.Contains(out, []byte(`fill="#ede9fe"`)) || !bytes.Contains(out, []byte(`fill="`+other.fill+`"`)) {
		t.Errorf("Decision should be drawn as a decision and <odd type> grey")
	}
}

func TestSVGDangling(t *testing.T) {
	root := mustParse(t, SVG(dangling()))
	want := "6 notes, 7 links on 2 branches; 2 links to notes not shown left out; 1 link from a note to itself left out; 1 note with a key already drawn left out."
	if got := root.child("desc").text; got != want {
		t.Errorf("desc = %q, want %q", got, want)
	}
	paths := 0
	for _, p := range root.all("path") {
		if p.child("title") != nil {
			paths++
		}
	}
	if paths != 7 {
		t.Errorf("%d links drawn, want 7", paths)
	}
	if got := root.child("title").text; got != defaultTitle {
		t.Errorf("title = %q, want %q for a graph without one", got, defaultTitle)
	}
}

func TestSVGEmpty(t *testing.T) {
	for _, g := range []Graph{{}, {Edges: []Edge{{From: "N-1", To: "N-2", Kind: "chose"}}}} {
		root := mustParse(t, SVG(g))
		var words []string
		for _, e := range root.all("text") {
			words = append(words, e.text)
		}
		if diff := cmp.Diff([]string{"No notes yet"}, words); diff != "" {
			t.Errorf("text (-want +got):\n%s", diff)
		}
		if !strings.HasPrefix(root.child("desc").text, "No notes yet") {
			t.Errorf("desc = %q, want it to say there are no notes", root.child("desc").text)
		}
	}
}

// boxes are the notes' boxes of a drawing, read from its rects.
func boxes(t *testing.T, root *element) []box {
	t.Helper()
	var out []box
	for _, r := range root.all("rect") {
		if r.attr["class"] != "box" {
			continue
		}
		var b box
		if _, err := fmt.Sscanf(r.attr["x"]+" "+r.attr["y"]+" "+r.attr["width"]+" "+r.attr["height"], "%g %g %g %g", &b.x, &b.y, &b.w, &b.h); err != nil {
			t.Fatalf("rect %v: %v", r.attr, err)
		}
		out = append(out, b)
	}
	return out
}

func TestNotesDoNotOverlap(t *testing.T) {
	for seed := range uint64(5) {
		g := randomGraph(100, seed)
		root := mustParse(t, SVG(g))
		bs := boxes(t, root)
		if len(bs) != 100 {
			t.Fatalf("seed %d: %d boxes drawn, want 100", seed, len(bs))
		}
		var w, h float64
		fmt.Sscanf(root.attr["width"]+" "+root.attr["height"], "%g %g", &w, &h)
		for i, a := range bs {
			if a.x < 0 || a.y < 0 || a.x+a.w > w || a.y+a.h > h {
				t.Errorf("seed %d: box %v lies outside the picture (%gx%g)", seed, a, w, h)
			}
			for _, b := range bs[i+1:] {
				if a.overlaps(b) {
					t.Errorf("seed %d: boxes %v and %v overlap", seed, a, b)
				}
			}
		}
	}
}

// TestLabelsClear checks that in the realistic graph every link's label
// sits clear of every note and of every other label.
func TestLabelsClear(t *testing.T) {
	s := arrange(prepare(realistic()))
	var labels []box
	for _, r := range s.routes {
		labels = append(labels, r.labelBox())
	}
	for i, l := range labels {
		for _, n := range s.p.notes {
			if l.overlaps(s.box(n)) {
				t.Errorf("label %q overlaps note %s", s.routes[i].text, n.key)
			}
		}
		for j, m := range labels[i+1:] {
			if l.overlaps(m) {
				t.Errorf("labels %q and %q overlap", s.routes[i].text, s.routes[i+1+j].text)
			}
		}
	}
}

func TestLayers(t *testing.T) {
	s := arrange(prepare(realistic()))
	var got [][]string
	for _, layer := range s.layers {
		var keys []string
		for _, n := range layer {
			keys = append(keys, n.key)
		}
		got = append(got, keys)
	}
	want := [][]string{{"N-1", "N-2", "N-3"}, {"N-4"}, {"N-5"}, {"N-6"}}
	// Within a column the order is the layout's; compare the sets.
	for _, keys := range got {
		slices.SortFunc(keys, compareKeys)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}

	for seed := range uint64(5) {
		s := arrange(prepare(randomGraph(100, seed)))
		for l := 1; l < len(s.layers); l++ {
			var newest time.Time
			for _, n := range s.layers[l-1] {
				if n.created.After(newest) {
					newest = n.created
				}
			}
			for _, n := range s.layers[l] {
				if n.created.Before(newest) {
					t.Errorf("seed %d: %s in column %d is older than a note in column %d", seed, n.key, l, l-1)
				}
			}
		}
		for _, k := range s.p.links {
			from, to := s.p.notes[k.from], s.p.notes[k.to]
			if from.layer == to.layer {
				t.Errorf("seed %d: %s and %s, linked, share column %d", seed, from.key, to.key, from.layer)
			}
			if to.order < from.order && to.layer > from.layer {
				t.Errorf("seed %d: %s links back in time to %s but points right", seed, from.key, to.key)
			}
		}
	}
}

func TestFit(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Short", "Short"},
		{"Exactly twenty-eight chars!!", "Exactly twenty-eight chars!!"},
		{"Twenty-nine characters long.!", "Twenty-nine characters…"},
		{"Twentynine_characters_long...", "Twentynine_characters_long.…"},
		{"A title of many words that goes on", "A title of many words that…"},
		{"WWWWWWWWWWWWWWWWWWWWWWWWWW", "WWWWWWWWWWWWWWWW…"}, // cut by width
		{"", ""},
	} {
		if got := fit(c.in, titleRunes, nodeW-2*pad, textSize); got != c.want {
			t.Errorf("fit(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestClean(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"  plain  ", "plain"},
		{"a\tb\nc\r\nd", "a b c  d"},
		{"nul\x00bell\x07del\x7f", "nulbelldel"},
		{"bad \xff utf8", "bad \uFFFD utf8"},
		{"\u202Eevil\u202C \u2066iso\u2069", "evil iso"},
		{"not a char \uFFFE\uFFFF", "not a char"},
		{"emoji 👩‍💻 stays", "emoji 👩‍💻 stays"},
		{strings.Repeat("a", 600), strings.Repeat("a", maxText) + "…"},
		{strings.Repeat("日", 600), strings.Repeat("日", maxText) + "…"},
		{strings.Repeat("\x00", 3000) + "x", "…"}, // cut before the x, at 2,004 bytes
	} {
		if got := clean(c.in); got != c.want {
			t.Errorf("clean(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestLongStrings draws a graph whose every string is a megabyte: each
// is cut to 500 characters, so the drawings stay small.
func TestLongStrings(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	g := fuzzGraph(long, long, long, long, long, long, "/"+long, []byte{1, 2, 3, 4, 5, 6})
	for _, f := range formats {
		if n := len(f.draw(g)); n > 60_000 {
			t.Errorf("%s: %d bytes for 7 notes", f.ext, n)
		}
	}
}

// luminance is a colour's relative luminance, as WCAG 2.1 defines it.
func luminance(t *testing.T, hex string) float64 {
	t.Helper()
	var r, g, b int
	if _, err := fmt.Sscanf(hex, "#%02x%02x%02x", &r, &g, &b); err != nil {
		t.Fatalf("colour %q: %v", hex, err)
	}
	lin := func(c int) float64 {
		v := float64(c) / 255
		if v <= 0.04045 {
			return v / 12.92
		}
		return math.Pow((v+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(r) + 0.7152*lin(g) + 0.0722*lin(b)
}

// contrast is WCAG 2.1's contrast ratio of two colours.
func contrast(t *testing.T, a, b string) float64 {
	la, lb := luminance(t, a), luminance(t, b)
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
}

// TestPaletteContrast holds the palette to WCAG 2.1 AA: text on every
// fill at 4.5:1 or more, and every border, link and focus ring at 3:1
// against what it is drawn on. go test -v shows the ratios.
func TestPaletteContrast(t *testing.T) {
	check := func(what, fg, bg string, least float64) {
		t.Helper()
		r := contrast(t, fg, bg)
		t.Logf("%-34s %s on %s  %5.2f:1", what, fg, bg, r)
		if r < least {
			t.Errorf("%s: %s on %s is %.2f:1, want at least %.1f:1", what, fg, bg, r, least)
		}
	}
	for _, st := range append(slices.Clone(palette), other) {
		check(st.name+" text", textColour, st.fill, 4.5)
		check(st.name+" small text", smallColour, st.fill, 4.5)
		check(st.name+" border", st.stroke, background, 3)
		check(st.name+" focus ring", "#0550ae", st.fill, 3)
	}
	check("title", textColour, background, 4.5)
	check("legend and link labels", smallColour, background, 4.5)
	check("links", edgeColour, background, 3)
}

// BenchmarkSVG300 draws a graph of 300 notes and about 470 links.
func BenchmarkSVG300(b *testing.B) {
	g := randomGraph(300, 1)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(SVG(g))
	}
	b.ReportMetric(float64(n), "bytes/svg")
}

// TestImportsOnlyStandardLibrary keeps graphdraw a leaf: its code (not
// its tests) imports the standard library alone, and of snag's nothing
// but the domain's values (internal/snag, itself a leaf over the task
// file's types).
func TestImportsOnlyStandardLibrary(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") && imp != "github.com/snagdev/snag/internal/snag" {
			t.Errorf("graphdraw imports %s; it may import the standard library and internal/snag alone", imp)
		}
	}
}
