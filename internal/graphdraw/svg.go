package graphdraw

import (
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"
)

// fontFamily is the picture's font: the system's sans-serif.
const fontFamily = "system-ui, -apple-system, 'Segoe UI', Roboto, Arial, sans-serif"

// SVG draws g as a self-contained SVG picture, laid out by time (see the
// package comment) and coloured by note type, with a legend.
//
// The root element has a title (the graph's) and a description that
// counts the notes, links and branches and what was left out. Its size is
// its natural one, in width and height, with a viewBox, so a page may
// scale it down (max-width: 100%; height: auto) or scroll it.
//
// A node with an Href is a link a keyboard can reach, named for a screen
// reader like "N-4 decision: Use SQLite FTS (main)"; then the root's role
// is graphics-document, since an img's content is hidden from assistive
// technology, links and all (axe-core's nested-interactive rule). Without
// links the role is img.
//
// The picture has no style sheet, so a page's Content-Security-Policy
// need not allow inline styles: a focused link shows the browser's focus
// ring, and a page may add its own to the classes the picture uses: each
// note is a g of class note, its box a rect of class box (inside the a
// when it is a link), and each link's label a g of class label. The ids
// in the picture start with one derived from the graph, so pictures of
// different graphs can share a page.
func SVG(g Graph) []byte {
	p := prepare(g)
	id := pictureID(p)
	var b strings.Builder
	if len(p.notes) == 0 {
		writeEmpty(&b, p, id)
		return []byte(b.String())
	}
	s := arrange(p)
	b.Grow(2048 + 900*len(p.notes) + 350*len(p.links))

	role := "img"
	for _, n := range p.notes {
		if n.href != "" {
			role = "graphics-document"
			break
		}
	}
	w, h := num(s.width), num(s.height)
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" id="` + id + `" role="` + role +
		`" aria-labelledby="` + id + `-title" aria-describedby="` + id + `-desc" width="` + w + `" height="` + h +
		`" viewBox="0 0 ` + w + ` ` + h + `" font-family="` + fontFamily + "\">\n")
	b.WriteString(`<title id="` + id + `-title">`)
	writeEscaped(&b, p.title)
	b.WriteString("</title>\n<desc id=\"" + id + `-desc">`)
	writeEscaped(&b, s.summary)
	b.WriteString("</desc>\n")
	b.WriteString(`<defs><marker id="` + id + `-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0L10,5L0,10z" fill="` + edgeColour + `"/></marker></defs>` + "\n")
	b.WriteString(`<rect width="` + w + `" height="` + h + `" fill="` + background + "\"/>\n")

	// The header: a title, the summary and the legend, all said already
	// by the title and description, so hidden from screen readers.
	b.WriteString(`<g aria-hidden="true" fill="` + smallColour + `" font-size="` + num(smallSize) + "\">\n")
	b.WriteString(`<text x="` + num(margin) + `" y="` + num(margin+titleSize-3) + `" font-size="` + num(titleSize) + `" font-weight="bold" fill="` + textColour + `">`)
	writeEscaped(&b, s.title)
	b.WriteString("</text>\n")
	b.WriteString(`<text x="` + num(margin) + `" y="` + num(margin+titleSize+8+smallSize-2) + `">`)
	writeEscaped(&b, s.summary)
	b.WriteString("</text>\n")
	for _, it := range s.legend {
		b.WriteString(`<rect x="` + num(it.at.x) + `" y="` + num(it.at.y) + `" width="14" height="14" rx="3" fill="` + it.style.fill + `" stroke="` + it.style.stroke + `" stroke-width="1.5"`)
		if it.unvetted {
			b.WriteString(` stroke-dasharray="3 2"`)
		}
		b.WriteString(`/><text x="` + num(it.at.x+18) + `" y="` + num(it.at.y+11) + `">`)
		writeEscaped(&b, it.text)
		b.WriteString("</text>\n")
	}
	b.WriteString("</g>\n")

	// The links under the notes, then their labels.
	b.WriteString(`<g fill="none" stroke="` + edgeColour + `" stroke-width="1.5" marker-end="url(#` + id + "-arrow)\">\n")
	for i, r := range s.routes {
		b.WriteString(`<path d="` + r.path + `"`)
		if r.dashed {
			b.WriteString(` stroke-dasharray="6 4"`)
		}
		b.WriteString(`><title>`)
		writeEscaped(&b, p.linkTitle(p.links[i]))
		b.WriteString("</title></path>\n")
	}
	b.WriteString("</g>\n")
	b.WriteString(`<g font-size="` + num(labelSize) + `" text-anchor="middle">` + "\n")
	for i, r := range s.routes {
		if r.text == "" {
			continue
		}
		lb := r.labelBox()
		b.WriteString(`<g class="label"><title>`)
		writeEscaped(&b, p.linkTitle(p.links[i]))
		b.WriteString(`</title><rect x="` + num(lb.x) + `" y="` + num(lb.y) + `" width="` + num(lb.w) + `" height="` + num(lb.h) +
			`" rx="2" fill="` + background + `"/><text x="` + num(r.label.x) + `" y="` + num(r.label.y+3.5) + `" fill="` + smallColour + `">`)
		writeEscaped(&b, r.text)
		b.WriteString("</text></g>\n")
	}
	b.WriteString("</g>\n")

	b.WriteString(`<g fill="` + textColour + `" font-size="` + num(textSize) + "\">\n")
	for _, layer := range s.layers {
		for _, n := range layer {
			writeNote(&b, s, n)
		}
	}
	b.WriteString("</g>\n</svg>\n")
	return []byte(b.String())
}

// writeNote draws one note: its box, key and type, title, and branch.
//
// A note with an Href is a link around its box alone, named for a screen
// reader by its aria-label; the words drawn on the box come after it,
// hidden from screen readers (the label says them in full) and from the
// pointer (a click on them falls through to the link). Inside the link
// they would be its visible label, which must be part of its name: a
// title cut short with "…" is not.
func writeNote(b *strings.Builder, s *scene, n *note) {
	at := s.at(n)
	b.WriteString(`<g class="note">`)
	if n.href != "" {
		b.WriteString(`<a href="`)
		writeEscaped(b, n.href)
		b.WriteString(`" aria-label="`)
		writeEscaped(b, n.label())
		b.WriteString(`">`)
	}
	b.WriteString(`<title>`)
	writeEscaped(b, n.tooltip())
	b.WriteString(`</title><rect class="box" x="` + num(at.x) + `" y="` + num(at.y) + `" width="` + num(nodeW) + `" height="` + num(nodeH) +
		`" rx="6" fill="` + n.style.fill + `" stroke="` + n.style.stroke + `" stroke-width="1.5"`)
	if n.unvetted {
		b.WriteString(` stroke-dasharray="5 3"`)
	}
	b.WriteString("/>")
	if n.href != "" {
		b.WriteString("</a>")
	}
	b.WriteString("\n" + `<g aria-hidden="true" pointer-events="none">`)

	inner := nodeW - 2*pad
	typ := fit(n.typ, 16, inner/2, smallSize)
	key := fit(n.key, 24, inner-textWidth(typ, smallSize)-8, textSize*1.1)
	b.WriteString(`<text x="` + num(at.x+pad) + `" y="` + num(at.y+18) + `" font-weight="bold">`)
	writeEscaped(b, key)
	b.WriteString(`</text><text x="` + num(at.x+nodeW-pad) + `" y="` + num(at.y+18) + `" font-size="` + num(smallSize) + `" fill="` + smallColour + `" text-anchor="end">`)
	writeEscaped(b, typ)
	b.WriteString("</text>\n")
	first, second := twoLines(n.title, boxTitleRunes, inner, textSize)
	b.WriteString(`<text x="` + num(at.x+pad) + `" y="` + num(at.y+35) + `">`)
	writeEscaped(b, first)
	b.WriteString("</text>")
	if second != "" {
		b.WriteString(`<text x="` + num(at.x+pad) + `" y="` + num(at.y+50) + `">`)
		writeEscaped(b, second)
		b.WriteString("</text>")
	}

	var small string
	if n.unvetted {
		small = " · unvetted"
	}
	small = fit(n.branch, titleRunes, inner-textWidth(small, smallSize), smallSize) + small
	if small = strings.TrimPrefix(small, " · "); small != "" {
		b.WriteString("\n" + `<text x="` + num(at.x+pad) + `" y="` + num(at.y+65) + `" font-size="` + num(smallSize) + `" fill="` + smallColour + `">`)
		writeEscaped(b, small)
		b.WriteString("</text>")
	}
	b.WriteString("</g></g>\n")
}

// writeEmpty draws a graph with no notes: a small picture that says so.
func writeEmpty(b *strings.Builder, p *prepared, id string) {
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" id="` + id + `" role="img" aria-labelledby="` + id + `-title" aria-describedby="` + id +
		`-desc" width="320" height="96" viewBox="0 0 320 96" font-family="` + fontFamily + "\">\n")
	b.WriteString(`<title id="` + id + `-title">`)
	writeEscaped(b, p.title)
	b.WriteString("</title>\n<desc id=\"" + id + `-desc">`)
	writeEscaped(b, p.summary())
	b.WriteString("</desc>\n")
	b.WriteString(`<rect x="0.5" y="0.5" width="319" height="95" rx="6" fill="` + background + `" stroke="` + edgeColour + `" stroke-dasharray="5 3"/>` + "\n")
	b.WriteString(`<text x="160" y="53" font-size="14" text-anchor="middle" fill="` + smallColour + `">No notes yet</text>` + "\n</svg>\n")
}

// pictureID is the prefix of the picture's ids: "gd" and a hash of what
// is drawn, the same for the same graph.
func pictureID(p *prepared) string {
	h := fnv.New32a()
	write := func(ss ...string) {
		for _, s := range ss {
			h.Write([]byte(s))
			h.Write([]byte{0})
		}
	}
	write(p.title)
	for _, n := range p.notes {
		write(n.key, n.title, n.typ, n.branch, n.href, strconv.FormatBool(n.unvetted), n.created.UTC().Format(time.RFC3339Nano))
	}
	for _, l := range p.links {
		write(strconv.Itoa(l.from), strconv.Itoa(l.to), l.kind, l.why)
	}
	return "gd" + strconv.FormatUint(uint64(h.Sum32()), 16)
}

// num formats a measure to one decimal place at most.
func num(f float64) string {
	return string(appendNum(nil, f))
}

// appendNum appends f, to one decimal place at most.
func appendNum(b []byte, f float64) []byte {
	r := math.Round(f*10) / 10
	if r == 0 {
		r = 0 // no "-0"
	}
	return strconv.AppendFloat(b, r, 'f', -1, 64)
}
