package graphdraw

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// dotToken is a token of DOT text as Graphviz's scanner (lib/cgraph/scan.l)
// reads it: a quoted string's value keeps "\\" as two characters and
// turns "\"" into a quote.
type dotToken struct {
	quoted bool
	text   string
}

// lexDOT splits DOT text into tokens. Unlike Graphviz it refuses a line
// break inside a string: DOT writes none.
func lexDOT(src string) ([]dotToken, error) {
	var toks []dotToken
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '"':
			var b strings.Builder
			for i++; ; {
				switch {
				case i >= len(src):
					return nil, errors.New("a string is not closed")
				case src[i] == '"':
					i++
				case strings.HasPrefix(src[i:], `\"`):
					b.WriteByte('"')
					i += 2
					continue
				case strings.HasPrefix(src[i:], `\\`):
					b.WriteString(`\\`)
					i += 2
					continue
				case src[i] == '\n' || src[i] == '\r':
					return nil, fmt.Errorf("a line break inside the string %q", b.String())
				default:
					b.WriteByte(src[i])
					i++
					continue
				}
				break
			}
			toks = append(toks, dotToken{true, b.String()})
		case strings.HasPrefix(src[i:], "->"):
			toks = append(toks, dotToken{false, "->"})
			i += 2
		case strings.IndexByte("{}[]=,;", c) >= 0:
			toks = append(toks, dotToken{false, string(c)})
			i++
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
			j := i
			for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			toks = append(toks, dotToken{false, src[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("unexpected %q at byte %d", c, i)
		}
	}
	return toks, nil
}

// dotGraph is DOT text read back: its graph attributes, nodes and edges.
type dotGraph struct {
	graph map[string]string
	nodes map[string]map[string]string
	order []string // the nodes in the order written
	edges []dotEdge
}

type dotEdge struct {
	from, to string
	attr     map[string]string
}

// parseDOT reads what DOT writes: digraph notes { statements }, each a
// graph, node or edge default, a node or an edge from one node to
// another, with attributes in brackets and a semicolon.
func parseDOT(src string) (*dotGraph, error) {
	toks, err := lexDOT(src)
	if err != nil {
		return nil, err
	}
	pos := 0
	next := func() (dotToken, error) {
		if pos >= len(toks) {
			return dotToken{}, errors.New("unexpected end")
		}
		pos++
		return toks[pos-1], nil
	}
	expect := func(want string) error {
		t, err := next()
		if err != nil {
			return err
		}
		if t.quoted || t.text != want {
			return fmt.Errorf("got %q, want %q", t.text, want)
		}
		return nil
	}
	attrs := func() (map[string]string, error) {
		m := make(map[string]string)
		if err := expect("["); err != nil {
			return nil, err
		}
		for {
			k, err := next()
			if err != nil {
				return nil, err
			}
			if !k.quoted && k.text == "]" {
				return m, nil
			}
			if err := expect("="); err != nil {
				return nil, err
			}
			v, err := next()
			if err != nil {
				return nil, err
			}
			if _, dup := m[k.text]; dup {
				return nil, fmt.Errorf("attribute %s twice", k.text)
			}
			m[k.text] = v.text
			if pos < len(toks) && toks[pos].text == "," && !toks[pos].quoted {
				pos++
			}
		}
	}
	for _, w := range []string{"digraph", "notes", "{"} {
		if err := expect(w); err != nil {
			return nil, err
		}
	}
	g := &dotGraph{nodes: make(map[string]map[string]string)}
	for {
		t, err := next()
		if err != nil {
			return nil, err
		}
		if !t.quoted && t.text == "}" {
			break
		}
		if !t.quoted && (t.text == "graph" || t.text == "node" || t.text == "edge") {
			m, err := attrs()
			if err != nil {
				return nil, err
			}
			if t.text == "graph" {
				g.graph = m
			}
		} else if pos < len(toks) && toks[pos].text == "->" && !toks[pos].quoted {
			pos++
			to, err := next()
			if err != nil {
				return nil, err
			}
			m, err := attrs()
			if err != nil {
				return nil, err
			}
			if g.nodes[t.text] == nil || g.nodes[to.text] == nil {
				return nil, fmt.Errorf("edge %q -> %q names a node not written before it", t.text, to.text)
			}
			g.edges = append(g.edges, dotEdge{t.text, to.text, m})
		} else {
			m, err := attrs()
			if err != nil {
				return nil, err
			}
			if g.nodes[t.text] != nil {
				return nil, fmt.Errorf("node %q twice", t.text)
			}
			g.nodes[t.text] = m
			g.order = append(g.order, t.text)
		}
		if err := expect(";"); err != nil {
			return nil, err
		}
	}
	if pos != len(toks) {
		return nil, errors.New("text after the closing brace")
	}
	return g, nil
}

// escString is the text Graphviz draws for a label: "\\" is a backslash
// and "\n" a line break. Any other backslash would be one of Graphviz's
// escapes (\N the node's name, \l a left-justified line), which DOT must
// never write by accident.
func escString(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", fmt.Errorf("%q ends in a backslash", s)
		}
		switch s[i+1] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		default:
			return "", fmt.Errorf("%q has the escape \\%c", s, s[i+1])
		}
		i++
	}
	return b.String(), nil
}

func TestDOT(t *testing.T) {
	g, err := parseDOT(string(DOT(realistic())))
	if err != nil {
		t.Fatal(err)
	}
	if g.graph["rankdir"] != "LR" || g.graph["label"] != "Search for notes" {
		t.Errorf("graph attributes %v, want rankdir LR and the title as label", g.graph)
	}
	if diff := cmp.Diff([]string{"N-1", "N-2", "N-3", "N-4", "N-5", "N-6"}, g.order); diff != "" {
		t.Errorf("nodes, oldest first (-want +got):\n%s", diff)
	}
	if got := g.nodes["N-2"]; got["style"] != "rounded,filled,dashed" || got["fillcolor"] != "#fef9c3" || got["href"] != "/notes/N-2" {
		t.Errorf("N-2, an unvetted option: %v", got)
	}
	// Each link runs older to newer, so Graphviz ranks the older note
	// left; dir=back turns the arrow when the link points back in time.
	var edges []string
	for _, e := range g.edges {
		edges = append(edges, fmt.Sprintf("%s -> %s %s dir=%s", e.from, e.to, e.attr["label"], e.attr["dir"]))
	}
	want := []string{
		"N-1 -> N-4 took_from dir=back",
		"N-2 -> N-4 chose dir=back",
		"N-3 -> N-4 rejected dir=back",
		"N-4 -> N-5 took_from dir=back",
		"N-5 -> N-6 took_from dir=back",
		"N-4 -> N-6 led_to dir=",
		"N-1 -> N-6 relates dir=back",
	}
	if diff := cmp.Diff(want, edges); diff != "" {
		t.Errorf("edges (-want +got):\n%s", diff)
	}
}

func TestDOTHostile(t *testing.T) {
	g, err := parseDOT(string(DOT(hostile())))
	if err != nil {
		t.Fatalf("%v\n%s", err, DOT(hostile()))
	}
	label := func(id string) string {
		t.Helper()
		s, err := escString(g.nodes[id]["label"])
		if err != nil {
			t.Errorf("node %s: %v", id, err)
		}
		return s
	}
	for id, want := range map[string]string{
		"N-1":           "N-1\n</title><script>alert(\"x\")<…",
		"N-3":           `N-3` + "\n" + `back\slash \N "end\`,
		`N-"6"; x -> y`: `N-"6"; x -> y` + "\n" + "]]> <![CDATA[ x ]]>",
	} {
		if got := label(id); got != want {
			t.Errorf("label of %s = %q, want %q", id, got, want)
		}
	}
	if got, want := g.graph["label"], `<script>alert("t")</script> & "graph"`; got != want {
		t.Errorf("graph label = %q, want %q", got, want)
	}
	if href, ok := g.nodes["N-2"]["href"]; ok {
		t.Errorf("N-2 has href %q; a javascript: link must be refused", href)
	}
	if got, want := g.edges[0].attr["label"], `chose|"x"`; got != want {
		t.Errorf("first edge's label = %q, want %q", got, want)
	}
}

func TestDOTEmpty(t *testing.T) {
	g, err := parseDOT(string(DOT(Graph{})))
	if err != nil {
		t.Fatal(err)
	}
	if got := g.nodes["empty"]["label"]; got != "No notes yet" || len(g.nodes) != 1 {
		t.Errorf("nodes %v, want one saying there are no notes", g.nodes)
	}
}
