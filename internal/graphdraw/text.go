package graphdraw

import (
	"strings"
	"unicode/utf8"
)

// maxText is the most characters of any one string drawn: a note's title
// is a line, not its body. Longer strings are cut, with "…".
const maxText = 500

// clean makes s safe to draw: valid UTF-8, no character XML forbids, no
// control character, no mark that reorders text (a title must not flip
// the words around it); tabs and line breaks become spaces, space at
// either end is trimmed, and it is cut to maxText characters.
func clean(s string) string {
	plain := len(s) <= maxText
	for i := 0; plain && i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			plain = false
		}
	}
	if plain {
		return strings.TrimSpace(s)
	}
	// No more than maxText characters are kept, which take at most four
	// bytes each; a rune split by the cut is invalid and becomes U+FFFD.
	cut := len(s) > 4*maxText+4
	if cut {
		s = s[:4*maxText+4]
	}
	var b strings.Builder
	b.Grow(len(s))
	n := 0
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if n == maxText {
			cut = true
			break
		}
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			r = ' '
		case r < 0x20 || r >= 0x7f && r <= 0x9f:
			continue
		case r == 0x200e || r == 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069:
			continue
		case r == 0xfffe || r == 0xffff:
			continue
		}
		b.WriteRune(r)
		n++
	}
	if cut {
		return strings.TrimSpace(b.String()) + "…"
	}
	return strings.TrimSpace(b.String())
}

// textWidth estimates how wide s is drawn in a sans-serif font of the
// given size, in pixels. It errs wide: the picture has no way to measure
// text, so a note's box must fit the widest likely font.
func textWidth(s string, size float64) float64 {
	var em float64
	for _, r := range s {
		em += runeWidth(r)
	}
	return em * size
}

// asciiWidth is the estimated width of each ASCII character in ems.
var asciiWidth = func() (w [0x80]float64) {
	for r := range w {
		switch {
		case strings.ContainsRune("iljI.,:;|!'`", rune(r)):
			w[r] = 0.3
		case strings.ContainsRune("frt()[]{}/\\- \"", rune(r)):
			w[r] = 0.4
		case strings.ContainsRune("mwMW@%", rune(r)):
			w[r] = 1
		case r >= 'A' && r <= 'Z':
			w[r] = 0.7
		default:
			w[r] = 0.6
		}
	}
	return w
}()

// runeWidth is the estimated width of r in ems.
func runeWidth(r rune) float64 {
	switch {
	case r < 0x80:
		return asciiWidth[r]
	case r >= 0x300 && r <= 0x36f, r == 0x200d, r >= 0xfe00 && r <= 0xfe0f:
		return 0 // combining marks, joiners and variation selectors
	case r >= 0x1f000 && r <= 0x1faff:
		return 1.25 // emoji
	case r >= 0x1100 && r <= 0x115f, r >= 0x2e80 && r <= 0xa4cf, r >= 0xac00 && r <= 0xd7a3,
		r >= 0xf900 && r <= 0xfaff, r >= 0xfe30 && r <= 0xfe4f, r >= 0xff00 && r <= 0xff60,
		r >= 0xffe0 && r <= 0xffe6, r >= 0x20000 && r <= 0x3fffd:
		return 1.05 // East Asian wide
	}
	return 0.65
}

// fit cuts s to at most maxRunes characters and maxWidth pixels at size,
// ending a cut string with "…". It cuts at a space if one is among the
// last few characters kept, so words stay whole.
func fit(s string, maxRunes int, maxWidth, size float64) string {
	if utf8.RuneCountInString(s) <= maxRunes && textWidth(s, size) <= maxWidth {
		return s
	}
	budget := maxWidth - textWidth("…", size)
	var w float64
	n, space := 0, -1 // space: the byte offset of the last space kept
	for i, r := range s {
		w += runeWidth(r) * size
		if n == maxRunes-1 || w > budget {
			cut := s[:i]
			if space > 0 && utf8.RuneCountInString(s[space:i]) <= 8 {
				cut = s[:space]
			}
			return strings.TrimRight(cut, " ") + "…"
		}
		if r == ' ' {
			space = i
		}
		n++
	}
	return s
}

// twoLines lays s out on at most two lines of maxWidth pixels at size,
// breaking at a space when there is one on the first line, the second cut
// with "…" when s is longer still (at most maxRunes characters in all).
func twoLines(s string, maxRunes int, maxWidth, size float64) (first, second string) {
	s = fit(s, maxRunes, 2*maxWidth, size)
	if textWidth(s, size) <= maxWidth {
		return s, ""
	}
	var w float64
	space := -1
	for i, r := range s {
		w += runeWidth(r) * size
		if w > maxWidth {
			cut := i
			if space > 0 {
				cut = space
			}
			rest := strings.TrimLeft(s[cut:], " ")
			return strings.TrimRight(s[:cut], " "), fit(rest, maxRunes, maxWidth, size)
		}
		if r == ' ' {
			space = i
		}
	}
	return s, ""
}

// xmlEscaper escapes text for XML content and double-quoted attributes.
var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

// writeEscaped writes s, already cleaned, escaped for XML.
func writeEscaped(b *strings.Builder, s string) {
	xmlEscaper.WriteString(b, s)
}
