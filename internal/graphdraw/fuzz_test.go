package graphdraw

import (
	"strconv"
	"testing"
	"time"
)

// fuzzGraph builds a graph of one to nine notes from fuzzed strings: the
// bytes of shape choose the notes' times, trust and links, some to a
// note that is not there.
func fuzzGraph(title, key, typ, branch, kind, why, href string, shape []byte) Graph {
	at := func(i int) byte {
		if len(shape) == 0 {
			return 0
		}
		return shape[i%len(shape)]
	}
	g := Graph{Title: title}
	n := 1 + len(shape)%9
	for i := range n {
		nd := Node{Key: "N-" + strconv.Itoa(i+1), Title: title, Type: palette[i%len(palette)].name, Branch: branch,
			Created: t0.Add(time.Duration(at(i)) * time.Minute), Href: href}
		if i%3 == 0 {
			nd.Key, nd.Type = key, typ
		}
		if at(i)%2 == 1 {
			nd.Trust = "unvetted"
		}
		g.Nodes = append(g.Nodes, nd)
	}
	for j := 0; j+1 < len(shape); j += 2 {
		e := Edge{From: g.Nodes[int(shape[j])%n].Key, To: "missing", Kind: kind, Why: why}
		if k := int(shape[j+1]) % (n + 1); k < n {
			e.To = g.Nodes[k].Key
		}
		g.Edges = append(g.Edges, e)
	}
	return g
}

// FuzzDraw draws fuzzed graphs all three ways: none may panic, the SVG
// must be well-formed XML with its notes apart, the DOT text must read
// back with no stray Graphviz escape in a label, and the Mermaid text
// must read back line by line.
func FuzzDraw(f *testing.F) {
	f.Add("Use SQLite FTS", "N-4", "decision", "main", "chose", "no new dependency", "/notes/N-4", []byte{1, 2, 3, 4})
	f.Add(`</title><script>alert("x")</script>`, `N-"6"; x -> y`, "<odd type>", `b"r`, `chose|"x"`, "\\\"\n", "javascript:alert(1)", []byte{0, 0, 255, 7, 9})
	f.Add("\xff\xfe\x00\u202e #quot; `tick` ]]>", `\`, "", "", "", "", `/a"b`, []byte{})
	f.Add("日本語のタイトルはとても長いのでここで切られるはずです 👩‍💻", "end", "GOAL", "feat/<x>&y", "rejected", "", "https://example.com/?q=<x>", []byte{5, 5, 5, 5, 5, 5, 5, 5})
	f.Fuzz(func(t *testing.T, title, key, typ, branch, kind, why, href string, shape []byte) {
		g := fuzzGraph(title, key, typ, branch, kind, why, href, shape)

		root, err := parseXML(SVG(g))
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, SVG(g))
		}
		bs := boxes(t, root)
		for i, a := range bs {
			for _, b := range bs[i+1:] {
				if a.overlaps(b) {
					t.Fatalf("boxes %v and %v overlap", a, b)
				}
			}
		}

		dg, err := parseDOT(string(DOT(g)))
		if err != nil {
			t.Fatalf("the DOT text does not read back: %v\n%s", err, DOT(g))
		}
		for id, attr := range dg.nodes {
			if _, err := escString(attr["label"]); err != nil {
				t.Fatalf("node %q: %v", id, err)
			}
		}

		if _, err := parseMermaid(string(Mermaid(g))); err != nil {
			t.Fatalf("the Mermaid text does not read back: %v\n%s", err, Mermaid(g))
		}
	})
}
