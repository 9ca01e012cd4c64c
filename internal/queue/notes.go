package queue

import (
	"strconv"
	"strings"
	"time"
)

// NotesFolder is the folder of note files, relative to .snag/.
const NotesFolder = "notes"

// NoteTypes are what a note of the decision graph records.
var NoteTypes = []string{"goal", "decision", "option", "action", "observation", "outcome", "question"}

// LinkKinds are the kinds of edge from one note to another: took_from
// names where an idea came from, led_to what it caused, chose and
// rejected the options a decision weighed, blocks what must wait for it,
// relates anything else.
var LinkKinds = []string{"took_from", "led_to", "chose", "rejected", "blocks", "relates"}

// AcyclicKinds are the link kinds that follow time or order, so a cycle
// of one of them is a mistake (snag doctor reports it): an idea cannot be
// borrowed from its own descendant, nor a note block itself.
var AcyclicKinds = []string{"took_from", "led_to", "blocks"}

// Link is an edge of the decision graph, written in the note it starts
// from: links: [{to: N-3, kind: took_from, why: "..."}].
type Link struct {
	To    string // a note key (N-3) or id
	Kind  string
	Why   string
	Trust Trust // set when the link is less trusted than its note; else the note's
}

// Note is a note file, .snag/notes/N-<n> - <title>.md: a node of the
// decision graph (a goal, decision, option, action, observation, outcome
// or question), in markdown, committed with the project, with its edges to
// other notes. An agent's note is unvetted. Unknown keys are kept.
type Note struct {
	ID      string
	Key     string // N-<n>
	Type    string
	Title   string
	Branch  string // the git branch it was written on
	Commit  string // HEAD when it was written
	Trust   Trust
	Author  string
	Created time.Time
	Tasks   []string // the tasks it is about (task:, or about: [...])
	Files   []string
	Links   []Link
	Body    []byte
}

// NoteAlias is the key of note n: N-n.
func NoteAlias(n int) string { return "N-" + strconv.Itoa(n) }

// NoteNum is the number of a note key (N-7 is 7), or 0.
func NoteNum(key string) int {
	s, ok := strings.CutPrefix(key, "N-")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || strconv.Itoa(n) != s {
		return 0
	}
	return n
}

// NoteFileName is a note's file name: N-7 - Title.md, the title made safe
// for a file name as a task's is.
func NoteFileName(key, title string) string { return FileName(key, title) }

// IsNoteRef reports whether s can name a note: a key (N-7) or an id.
func IsNoteRef(s string) bool {
	return NoteNum(s) > 0 || (strings.HasPrefix(s, "note_") && len(s) > len("note_") && !strings.ContainsAny(s, " \t\r\n,{}[]\"'"))
}
