package cli

import (
	"fmt"
	"strings"
	"unicode"
)

// Text from task files (titles, paths, errors that quote them, bodies) is
// printed with its control characters escaped, so a file name or a title
// can never move the cursor, start a new line of output or recolour the
// terminal: what a table, show, log or error prints is what it says.

// unsafe reports whether r must be shown escaped on a terminal: the C0 and
// C1 controls, DEL, the bidirectional marks, overrides and isolates that
// reorder text, the invisible zero-width space, word joiner and BOM, and
// the replacement character that stands for bytes that are not UTF-8.
// (The zero-width joiner of emoji sequences is left alone.)
func unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r == 0x061c, r == 0x200b, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e,
		r == 0x2060, r >= 0x2066 && r <= 0x2069, r == 0xfeff, r == unicode.ReplacementChar:
		return true
	}
	return false
}

// safe gives s on one line with every unsafe character escaped as Go
// writes it in a string literal: a newline as \n, ESC as \x1b, U+202E as
// \u202e. A backslash before an escape stays as it is: the output is for
// people, not a parser.
func safe(s string) string {
	if !strings.ContainsFunc(s, unsafe) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !unsafe(r) {
			b.WriteRune(r)
			continue
		}
		b.WriteString(escapeRune(r))
	}
	return b.String()
}

func escapeRune(r rune) string {
	switch r {
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	case unicode.ReplacementChar:
		return `\ufffd`
	}
	if r < 0x100 {
		return fmt.Sprintf(`\x%02x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// safeText is [safe] for text of several lines (a body, a command's
// output, an error of several joined): newlines, CRLF line ends and tabs
// stay, every other unsafe character is escaped.
func safeText(s string) string {
	if !strings.ContainsFunc(s, unsafe) {
		return s
	}
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == '\r' && i+1 < len(rs) && rs[i+1] == '\n':
			b.WriteRune(r)
		case unsafe(r):
			b.WriteString(escapeRune(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
