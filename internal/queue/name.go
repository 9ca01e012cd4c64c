package queue

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTitleBytes caps the title part of a task's file name.
const MaxTitleBytes = 80

// FileName derives a task's file name, SNAG-12 - <title>.md, from its alias
// and title. The title is made safe for every filesystem: no / \ : * ? " < >
// | or control characters, runs of spaces folded, no leading dots, no
// trailing dots or spaces, at most MaxTitleBytes bytes, cut on a character
// boundary. The name is derived, never trusted: the id in the frontmatter is
// what identifies a task.
func FileName(key, title string) string {
	return key + " - " + SafeTitle(title) + ".md"
}

// SafeTitle is the title as it appears in a file name (see [FileName]).
func SafeTitle(title string) string {
	var b strings.Builder
	space := false
	for _, r := range title {
		if r == utf8.RuneError || IsControl(r) || strings.ContainsRune(`/\:*?"<>|`, r) || unicode.IsSpace(r) ||
			unicode.Is(unicode.Bidi_Control, r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	s := strings.TrimLeft(b.String(), ". ")
	if len(s) > MaxTitleBytes {
		cut := MaxTitleBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	s = strings.TrimRight(s, ". ")
	if s == "" {
		return "untitled"
	}
	return s
}

// CheckName refuses a name that cannot be a task file in the flat tasks/
// folder: a path with separators, a hidden file, anything but .md.
func CheckName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("task file name %q is empty", name)
	case strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("task file name %q has a path separator: task files live flat in .snag/tasks/", Truncate(name, 80))
	case strings.HasPrefix(name, "."):
		return fmt.Errorf("task file name %q is hidden", Truncate(name, 80))
	case !strings.HasSuffix(name, ".md"):
		return fmt.Errorf("task file name %q does not end in .md", Truncate(name, 80))
	}
	return nil
}

// IsTaskFileName reports whether a directory entry's name is a task file snag
// reads: a visible .md file. Editor droppings (vim's .swp and 4913, emacs's
// #autosave# and .#lock, ~ backups, JetBrains ___jb_ files) and snag's own
// temp files never are.
func IsTaskFileName(name string) bool {
	return CheckName(name) == nil && !strings.HasPrefix(name, "#") && !strings.Contains(name, "___jb_")
}

// IsControl reports whether r is a control character: C0, DEL or C1.
func IsControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// MaxFileSize is the most bytes a task, note or plan file may hold: the
// file store reads no more, and the codec refuses a larger one.
const MaxFileSize = 1 << 20

// Clip cuts s to at most n bytes on a character's boundary, ending it in
// "…" when it cut: a title, a reason or a quote kept to a limit.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ell = "…"
	cut := n - len(ell)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ell
}
