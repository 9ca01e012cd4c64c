package queue

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// NotesFolder is the folder of note files, relative to .snag/.
const NotesFolder = "notes"

// NoteKinds are what a note records.
var NoteKinds = []string{"decision", "observation", "action"}

// Note is a note file, .snag/notes/N-<n> - <title>.md: a decision, an
// observation or an action, in markdown, committed with the project. An
// agent's note is unvetted. Unknown keys are kept.
type Note struct {
	ID      string
	Key     string // N-<n>
	Title   string
	Kind    string
	Trust   Trust
	Author  string
	Created time.Time
	Tasks   []string // the tasks it is about (task:, or about: [...])
	Files   []string
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
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// NoteFileName is a note's file name: N-7 - Title.md, the title made safe
// for a file name as a task's is.
func NoteFileName(key, title string) string { return FileName(key, title) }

// ParseNote reads a note file.
func ParseNote(raw []byte) (*Note, error) {
	doc, err := decode(raw)
	if err != nil {
		return nil, err
	}
	n := &Note{Trust: TrustVetted, Kind: "decision", Body: raw[doc.fm.bodyStart:]}
	if doc.root == nil {
		return nil, &ParseError{Field: "title", Msg: "missing: a note needs a title line"}
	}
	for i := 0; i+1 < len(doc.root.Content); i += 2 {
		k, v := doc.root.Content[i].Value, doc.root.Content[i+1]
		line := v.Line + doc.lineOff
		list := func() ([]string, error) {
			switch v.Kind {
			case yaml.ScalarNode:
				if v.Value == "" {
					return nil, nil
				}
				return []string{v.Value}, nil
			case yaml.SequenceNode:
				var out []string
				for _, c := range v.Content {
					if c.Kind != yaml.ScalarNode {
						return nil, &ParseError{Line: line, Field: k, Msg: "want a list of names"}
					}
					out = append(out, c.Value)
				}
				return out, nil
			}
			return nil, &ParseError{Line: line, Field: k, Msg: "want a list of names"}
		}
		switch k {
		case "task", "about":
			l, err := list()
			if err != nil {
				return nil, err
			}
			n.Tasks = append(n.Tasks, l...)
			continue
		case "files":
			if n.Files, err = list(); err != nil {
				return nil, err
			}
			continue
		}
		if v.Kind != yaml.ScalarNode {
			if slices.Contains([]string{"id", "key", "title", "kind", "trust", "author", "created"}, k) {
				return nil, &ParseError{Line: line, Field: k, Msg: "want a single value"}
			}
			continue
		}
		switch k {
		case "id":
			n.ID = v.Value
		case "key":
			n.Key = v.Value
			if NoteNum(v.Value) == 0 {
				return nil, &ParseError{Line: line, Field: k, Msg: fmt.Sprintf("%q is not a note key: want N- and a number, like N-7", v.Value)}
			}
		case "title":
			n.Title = v.Value
		case "kind", "type":
			n.Kind = v.Value
		case "trust":
			n.Trust = Trust(v.Value)
			if n.Trust != TrustVetted && n.Trust != TrustUnvetted {
				return nil, &ParseError{Line: line, Field: k, Msg: fmt.Sprintf("unknown value %q (want vetted or unvetted)", v.Value)}
			}
		case "author":
			n.Author = v.Value
		case "created":
			t, err := time.Parse(time.RFC3339, v.Value)
			if err != nil {
				return nil, &ParseError{Line: line, Field: k, Msg: "want a time like 2026-12-03T10:00:00Z"}
			}
			n.Created = t
		}
	}
	if strings.TrimSpace(n.Title) == "" {
		return nil, &ParseError{Field: "title", Msg: "missing: a note needs a title line"}
	}
	return n, nil
}

// FormatNote writes a new note file.
func FormatNote(n *Note) []byte {
	var b bytes.Buffer
	b.WriteString("---\n")
	if n.ID != "" {
		fmt.Fprintf(&b, "id: %s\n", n.ID)
	}
	fmt.Fprintf(&b, "key: %s\n", n.Key)
	fmt.Fprintf(&b, "title: %s\n", quote(n.Title, 0))
	fmt.Fprintf(&b, "kind: %s\n", n.Kind)
	fmt.Fprintf(&b, "trust: %s\n", n.Trust)
	if n.Author != "" {
		fmt.Fprintf(&b, "author: %s\n", quote(n.Author, 0))
	}
	fmt.Fprintf(&b, "created: %s\n", n.Created.UTC().Format(time.RFC3339))
	if len(n.Tasks) > 0 {
		fmt.Fprintf(&b, "about: [%s]\n", strings.Join(quoteAll(n.Tasks), ", "))
	}
	if len(n.Files) > 0 {
		fmt.Fprintf(&b, "files: [%s]\n", strings.Join(quoteAll(n.Files), ", "))
	}
	b.WriteString("---\n")
	b.Write(n.Body)
	if len(n.Body) > 0 && !bytes.HasSuffix(n.Body, []byte("\n")) {
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = quote(s, 0)
	}
	return out
}
