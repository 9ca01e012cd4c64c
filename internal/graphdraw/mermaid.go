package graphdraw

import (
	"strconv"
	"strings"
)

// Mermaid writes g as a Mermaid flowchart, left to right: each note a
// node labelled with its key and title (cut as in the picture), of a
// class per type whose colours are the picture's, and of class unvetted,
// dashed, when unvetted; each link "A -->|kind| B", dotted when the kind
// is rejected. A node with an Href is a link (a click ... href line)
// where the renderer allows clicks; Mermaid's strict security level
// does not.
//
// Node ids are made from the keys, safe for Mermaid: N-4 is n_4, any
// other key "n_" and its ASCII letters and digits, with _ for every
// other character and a number added if two keys would share an id.
// Labels are quoted, with Mermaid's entity codes for the characters it
// would read (#quot; for a quote).
//
// Unlike the picture and the DOT text, the flowchart keeps each link's
// direction as written, so Mermaid's layout may put newer notes left of
// the older ones they link to.
func Mermaid(g Graph) []byte {
	p := prepare(g)
	var b strings.Builder
	b.WriteString("---\ntitle: " + strconv.Quote(p.title) + "\n---\nflowchart LR\n")
	if len(p.notes) == 0 {
		b.WriteString("\tempty[\"No notes yet\"]\n")
		return []byte(b.String())
	}
	ids := mermaidIDs(p.notes)
	var unvetted []string
	for i, n := range p.notes {
		b.WriteString("\t" + ids[i] + "[\"" + mermaidText(n.key) + "<br/>" + mermaidText(fit(n.title, titleRunes, 1e9, textSize)) + "\"]:::" + n.style.name + "\n")
		if n.unvetted {
			unvetted = append(unvetted, ids[i])
		}
	}
	for _, l := range p.links {
		arrow := " -->"
		if l.kind == "rejected" {
			arrow = " -.->"
		}
		b.WriteString("\t" + ids[l.from] + arrow)
		if l.kind != "" {
			b.WriteString("|\"" + mermaidText(l.kind) + "\"|")
		}
		b.WriteString(" " + ids[l.to] + "\n")
	}
	for i, n := range p.notes {
		if n.href != "" {
			b.WriteString("\tclick " + ids[i] + " href \"" + strings.ReplaceAll(n.href, `"`, "%22") + "\"\n")
		}
	}
	used := make(map[string]bool)
	for _, n := range p.notes {
		used[n.style.name] = true
	}
	for _, st := range append(palette[:len(palette):len(palette)], other) {
		if used[st.name] {
			b.WriteString("\tclassDef " + st.name + " fill:" + st.fill + ",stroke:" + st.stroke + ",color:" + textColour + "\n")
		}
	}
	if len(unvetted) > 0 {
		b.WriteString("\tclassDef unvetted stroke-dasharray:5 3\n")
		b.WriteString("\tclass " + strings.Join(unvetted, ",") + " unvetted\n")
	}
	return []byte(b.String())
}

// mermaidIDs names each note for Mermaid: n_ and the key's number for a
// key like N-4, else n_ and the key's ASCII letters and digits, with _
// for every other character; a name already taken gets _2, _3 and on.
func mermaidIDs(notes []*note) []string {
	ids := make([]string, len(notes))
	taken := make(map[string]bool, len(notes))
	for i, n := range notes {
		var b strings.Builder
		b.WriteString("n_")
		if num, ok := strings.CutPrefix(n.key, "N-"); ok && num != "" && strings.Trim(num, "0123456789") == "" {
			b.WriteString(num)
		} else {
			for _, r := range n.key {
				if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
					b.WriteRune(r)
				} else {
					b.WriteByte('_')
				}
			}
		}
		base := b.String()
		id := base
		for k := 2; taken[id]; k++ {
			id = base + "_" + strconv.Itoa(k)
		}
		taken[id] = true
		ids[i] = id
	}
	return ids
}

// mermaidEscaper writes with Mermaid's entity codes every character that
// would end a quoted label or that Mermaid would read as markup or as an
// entity code of its own: " # & < > and the backtick of a markdown label.
var mermaidEscaper = strings.NewReplacer(
	`"`, "#quot;", "#", "#35;", "&", "#amp;", "<", "#lt;", ">", "#gt;", "`", "#96;",
)

// mermaidText escapes s, already cleaned, for a quoted Mermaid label.
func mermaidText(s string) string {
	return mermaidEscaper.Replace(s)
}
