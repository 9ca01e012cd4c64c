package graphdraw

import (
	"strings"
)

// DOT writes g as Graphviz dot text: digraph notes, left to right, each
// note a box labelled with its key and title (cut as in the picture, in
// full in its tooltip), filled by its type, dashed when unvetted, and
// each link labelled with its kind.
//
// Graphviz ranks a link's source before its target, and links point back
// in time; so each link is written from the older note to the newer, with
// dir=back when its arrow points to the older, and the oldest notes come
// first, on the left, as in the picture. Links to notes not drawn and
// from a note to itself are left out, as in the picture.
func DOT(g Graph) []byte {
	p := prepare(g)
	var b strings.Builder
	b.WriteString("digraph notes {\n")
	b.WriteString("\tgraph [rankdir=LR, label=" + dotQuote(p.title) + ", labelloc=t, fontname=\"Helvetica\", tooltip=" + dotQuote(p.summary()) + "];\n")
	b.WriteString("\tnode [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=11, fontcolor=\"" + textColour + "\"];\n")
	b.WriteString("\tedge [fontname=\"Helvetica\", fontsize=9, fontcolor=\"" + smallColour + "\", color=\"" + edgeColour + "\"];\n")
	if len(p.notes) == 0 {
		b.WriteString("\tempty [shape=plaintext, style=\"\", label=\"No notes yet\"];\n}\n")
		return []byte(b.String())
	}
	for _, n := range p.notes {
		label := n.key + "\n" + fit(n.title, titleRunes, 1e9, textSize)
		b.WriteString("\t" + dotQuote(n.key) + " [label=" + dotQuote(label) +
			", fillcolor=\"" + n.style.fill + "\", color=\"" + n.style.stroke + "\"")
		if n.unvetted {
			b.WriteString(", style=\"rounded,filled,dashed\"")
		}
		b.WriteString(", tooltip=" + dotQuote(n.tooltip()))
		if n.href != "" {
			b.WriteString(", href=" + dotQuote(n.href))
		}
		b.WriteString("];\n")
	}
	for _, l := range p.links {
		from, to, back := l.from, l.to, false
		if to < from {
			from, to, back = to, from, true
		}
		b.WriteString("\t" + dotQuote(p.notes[from].key) + " -> " + dotQuote(p.notes[to].key) + " [")
		if l.kind != "" {
			b.WriteString("label=" + dotQuote(l.kind) + ", ")
		}
		if back {
			b.WriteString("dir=back, ")
		}
		if l.kind == "rejected" {
			b.WriteString("style=dashed, ")
		}
		b.WriteString("tooltip=" + dotQuote(p.linkTitle(l)) + "];\n")
	}
	b.WriteString("}\n")
	return []byte(b.String())
}

// dotEscaper escapes a string for a quoted DOT string whose value
// Graphviz reads as an escString: a backslash is doubled (so a title's
// "\N" stays two characters and is not the node's name), a quote is
// escaped, and a line break is Graphviz's \n.
var dotEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// dotQuote quotes s, already cleaned, for DOT.
func dotQuote(s string) string {
	return `"` + dotEscaper.Replace(s) + `"`
}
