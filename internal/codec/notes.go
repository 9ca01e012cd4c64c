package codec

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/snagdev/snag/internal/queue"
	"go.yaml.in/yaml/v3"
)

// noteScalars are the keys that hold one value.
var noteScalars = []string{"id", "key", "title", "kind", "type", "branch", "commit", "trust", "author", "created"}

// ParseNote reads a note file.
func ParseNote(raw []byte) (*queue.Note, error) {
	doc, err := decode(raw)
	if err != nil {
		return nil, err
	}
	n := &queue.Note{Trust: queue.TrustVetted, Type: "decision", Body: raw[doc.fm.bodyStart:]}
	if doc.root == nil {
		return nil, &ParseError{Field: "title", Msg: "missing: a note needs a title line"}
	}
	for i := 0; i+1 < len(doc.root.Content); i += 2 {
		k, v := doc.root.Content[i].Value, doc.root.Content[i+1]
		line := v.Line + doc.lineOff
		switch k {
		case "task", "about":
			l, err := doc.noteList(k, v)
			if err != nil {
				return nil, err
			}
			n.Tasks = append(n.Tasks, l...)
			continue
		case "files":
			if n.Files, err = doc.noteList(k, v); err != nil {
				return nil, err
			}
			continue
		case "links":
			if n.Links, err = doc.links(v); err != nil {
				return nil, err
			}
			continue
		}
		if v.Kind != yaml.ScalarNode {
			if slices.Contains(noteScalars, k) {
				return nil, &ParseError{Line: line, Field: k, Msg: "want a single value"}
			}
			continue
		}
		switch k {
		case "id":
			n.ID = v.Value
		case "key":
			n.Key = v.Value
			if queue.NoteNum(v.Value) == 0 {
				return nil, &ParseError{Line: line, Field: k, Msg: fmt.Sprintf("%q is not a note key: want N- and a number, like N-7", v.Value)}
			}
		case "title":
			n.Title = v.Value
		case "kind", "type": // kind is the name notes had before the graph
			n.Type = v.Value
			if !slices.Contains(queue.NoteTypes, v.Value) {
				return nil, &ParseError{Line: line, Field: k, Msg: fmt.Sprintf("unknown type %q (want %s)", v.Value, strings.Join(queue.NoteTypes, ", "))}
			}
		case "branch":
			n.Branch = v.Value
		case "commit":
			n.Commit = v.Value
		case "trust":
			n.Trust = queue.Trust(v.Value)
			if n.Trust != queue.TrustVetted && n.Trust != queue.TrustUnvetted {
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

// noteList reads a name or a list of names.
func (d *document) noteList(k string, v *yaml.Node) ([]string, error) {
	line := v.Line + d.lineOff
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

// links reads links: a list of {to, kind, why} mappings (unknown keys in
// them are kept in the file and ignored).
func (d *document) links(v *yaml.Node) ([]queue.Link, error) {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil, nil
	}
	if v.Kind != yaml.SequenceNode {
		return nil, &ParseError{Line: v.Line + d.lineOff, Field: "links", Msg: "want a list like [{to: N-3, kind: led_to, why: \"...\"}]"}
	}
	var out []queue.Link
	for _, c := range v.Content {
		line := c.Line + d.lineOff
		if c.Kind != yaml.MappingNode {
			return nil, &ParseError{Line: line, Field: "links", Msg: "each link is {to: N-3, kind: led_to}"}
		}
		var l queue.Link
		for i := 0; i+1 < len(c.Content); i += 2 {
			k, val := c.Content[i].Value, c.Content[i+1]
			if val.Kind != yaml.ScalarNode {
				if slices.Contains([]string{"to", "kind", "why", "trust"}, k) {
					return nil, &ParseError{Line: val.Line + d.lineOff, Field: "links", Msg: k + ": want a single value"}
				}
				continue
			}
			switch k {
			case "to":
				l.To = val.Value
			case "kind":
				l.Kind = val.Value
			case "why":
				l.Why = val.Value
			case "trust":
				l.Trust = queue.Trust(val.Value)
				if l.Trust != queue.TrustVetted && l.Trust != queue.TrustUnvetted {
					return nil, &ParseError{Line: val.Line + d.lineOff, Field: "links", Msg: fmt.Sprintf("trust %q: want vetted or unvetted", val.Value)}
				}
			}
		}
		switch {
		case !queue.IsNoteRef(l.To):
			return nil, &ParseError{Line: line, Field: "links", Msg: fmt.Sprintf("to %q: want a note key like N-3 or its id", l.To)}
		case !slices.Contains(queue.LinkKinds, l.Kind):
			return nil, &ParseError{Line: line, Field: "links", Msg: fmt.Sprintf("kind %q: want one of %s", l.Kind, strings.Join(queue.LinkKinds, ", "))}
		}
		out = append(out, l)
	}
	return out, nil
}

// FormatNote writes a new note file.
func FormatNote(n *queue.Note) []byte {
	var b bytes.Buffer
	b.WriteString("---\n")
	if n.ID != "" {
		fmt.Fprintf(&b, "id: %s\n", n.ID)
	}
	fmt.Fprintf(&b, "key: %s\n", n.Key)
	fmt.Fprintf(&b, "type: %s\n", n.Type)
	fmt.Fprintf(&b, "title: %s\n", quote(n.Title, 0))
	if n.Branch != "" {
		fmt.Fprintf(&b, "branch: %s\n", render(n.Branch, 0))
	}
	if n.Commit != "" {
		fmt.Fprintf(&b, "commit: %s\n", render(n.Commit, 0))
	}
	fmt.Fprintf(&b, "trust: %s\n", n.Trust)
	if n.Author != "" {
		fmt.Fprintf(&b, "author: %s\n", quote(n.Author, 0))
	}
	fmt.Fprintf(&b, "created: %s\n", n.Created.UTC().Format(time.RFC3339))
	switch len(n.Tasks) {
	case 0:
	case 1:
		fmt.Fprintf(&b, "task: %s\n", render(n.Tasks[0], 0))
	default:
		fmt.Fprintf(&b, "about: [%s]\n", strings.Join(quoteAll(n.Tasks), ", "))
	}
	if len(n.Files) > 0 {
		fmt.Fprintf(&b, "files: [%s]\n", strings.Join(quoteAll(n.Files), ", "))
	}
	if len(n.Links) > 0 {
		b.WriteString("links:\n")
		for _, l := range n.Links {
			fmt.Fprintf(&b, "  - %s\n", FormatLink(l))
		}
	}
	b.WriteString("---\n")
	b.Write(n.Body)
	if len(n.Body) > 0 && !bytes.HasSuffix(n.Body, []byte("\n")) {
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// FormatLink writes a link as one YAML flow mapping: {to: N-3, kind:
// chose, why: "..."}.
func FormatLink(l queue.Link) string {
	s := "{to: " + l.To + ", kind: " + l.Kind
	if l.Why != "" {
		s += ", why: " + strconv.Quote(l.Why)
	}
	if l.Trust != "" {
		s += ", trust: " + string(l.Trust)
	}
	return s + "}"
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = quote(s, 0)
	}
	return out
}

// AddLink adds a link to a note file's links and returns the new bytes,
// touching nothing else: one new line in a block list (in the list's own
// indentation), one more item before the ] of a flow list, or a links
// list before the closing delimiter when there is none. A note that does
// not parse is refused with its *ParseError, as [Edit] refuses a task.
func AddLink(raw []byte, l queue.Link) ([]byte, error) {
	if _, err := ParseNote(raw); err != nil {
		return nil, err
	}
	if err := checkLink(l); err != nil {
		return nil, err
	}
	doc, err := decode(raw)
	if err != nil {
		return nil, err
	}
	if err := doc.editable(); err != nil {
		return nil, err
	}
	ed := editor{raw: raw, doc: doc}
	ed.index()
	item := FormatLink(l)
	e, ok := ed.entries["links"]
	var out []byte
	switch {
	case !ok:
		text := strings.Repeat(" ", ed.indent) + "links:" + ed.eol() + strings.Repeat(" ", ed.indent+2) + "- " + item + ed.eol()
		out = replaceBytes(raw, doc.fm.yamlEnd, doc.fm.yamlEnd, []byte(text))
	case e.val.Kind == yaml.ScalarNode: // links: with nothing after it
		out, err = Edit(raw, Set("links", rawYAML("["+item+"]")))
		if err != nil {
			return nil, err
		}
	case e.val.Style&yaml.FlowStyle != 0:
		start := ed.offset(e.val.Line, e.val.Column)
		end := flowEnd(raw, start)
		if end < 0 {
			return nil, &ParseError{Line: e.val.Line + doc.lineOff, Field: "links", Msg: "cannot find the ] that ends the list: write one link per line"}
		}
		sep := ", "
		if len(e.val.Content) == 0 {
			sep = ""
		}
		out = replaceBytes(raw, end, end, []byte(sep+item))
	default:
		first := e.val.Content[0]
		_, spanEnd := ed.span(e)
		// The new item goes after the list's last line, in the column of
		// its first dash.
		dash := ed.offset(first.Line, first.Column)
		for dash > 0 && raw[dash-1] != '-' && raw[dash-1] != '\n' {
			dash--
		}
		col := 0
		if dash > 0 && raw[dash-1] == '-' {
			dash--
			col = dash - ed.lineStart(first.Line)
		} else {
			col = ed.indent + 2
		}
		if spanEnd > 0 && raw[spanEnd-1] != '\n' {
			return nil, &ParseError{Line: first.Line + doc.lineOff, Field: "links", Msg: "the list does not end a line"}
		}
		out = replaceBytes(raw, spanEnd, spanEnd, []byte(strings.Repeat(" ", col)+"- "+item+ed.eol()))
	}
	if err := sameBesideLink(raw, out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkLink refuses a link a note could not hold.
func checkLink(l queue.Link) error {
	switch {
	case !queue.IsNoteRef(l.To):
		return fmt.Errorf("add link: to %q: want a note key like N-3 or its id", l.To)
	case !slices.Contains(queue.LinkKinds, l.Kind):
		return fmt.Errorf("add link: kind %q: want one of %s", l.Kind, strings.Join(queue.LinkKinds, ", "))
	case !utf8.ValidString(l.Why):
		return fmt.Errorf("add link: the why is not text: write it in UTF-8")
	case l.Trust != "" && l.Trust != queue.TrustVetted && l.Trust != queue.TrustUnvetted:
		return fmt.Errorf("add link: trust %q: want vetted or unvetted", l.Trust)
	}
	return nil
}

// sameBesideLink checks that out is raw with one more link and nothing
// else changed: every other key's value (as YAML reads it), the links
// before it, and the body. An edit that would change anything else is
// refused, so a list shape snag misreads costs a refusal, never a change.
func sameBesideLink(raw, out []byte) error {
	fail := fmt.Errorf("add link: the note's frontmatter is laid out in a way snag cannot add to safely: add the link by hand")
	before, err := plainFrontmatter(raw)
	if err != nil {
		return fail
	}
	after, err := plainFrontmatter(out)
	if err != nil {
		return fail
	}
	old, _ := before["links"].([]any)
	now, _ := after["links"].([]any)
	delete(before, "links")
	delete(after, "links")
	if len(now) != len(old)+1 || !reflect.DeepEqual(before, after) {
		return fail
	}
	for i := range old {
		if !reflect.DeepEqual(now[i], old[i]) {
			return fail
		}
	}
	b, err := decode(raw)
	if err != nil {
		return fail
	}
	a, err := decode(out)
	if err != nil || !bytes.Equal(raw[b.fm.bodyStart:], out[a.fm.bodyStart:]) {
		return fail
	}
	return nil
}

// plainFrontmatter is a note's frontmatter as plain YAML values.
func plainFrontmatter(raw []byte) (map[string]any, error) {
	doc, err := decode(raw)
	if err != nil {
		return nil, err
	}
	var n yaml.Node
	if err := safeUnmarshal(raw[doc.fm.yamlStart:doc.fm.yamlEnd], &n); err != nil {
		return nil, err
	}
	m := map[string]any{}
	if n.Kind == 0 || len(n.Content) == 0 {
		return m, nil
	}
	err = func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("frontmatter: %v", p)
			}
		}()
		return n.Decode(&m)
	}()
	return m, err
}

// flowEnd is the offset of the ] that closes the flow sequence opening at
// start, skipping quoted strings, comments and nested brackets, or -1.
func flowEnd(raw []byte, start int) int {
	depth := 0
	for i := start; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				if c != ']' {
					return -1
				}
				return i
			}
		case '"', '\'':
			if quoteOpens(raw, start, i) {
				i = quotedEnd(raw, i)
			}
		case '#':
			if i > 0 && (raw[i-1] == ' ' || raw[i-1] == '\t' || raw[i-1] == '\n') {
				i = commentEnd(raw, i)
			}
		}
	}
	return -1
}

// quoteOpens reports whether the quote at i starts a quoted scalar (it
// follows [ { , : or only space since start), rather than being an
// apostrophe inside a plain one.
func quoteOpens(raw []byte, start, i int) bool {
	for j := i - 1; j >= start; j-- {
		switch raw[j] {
		case ' ', '\t', '\n', '\r':
			continue
		case '[', '{', ',', ':':
			return true
		}
		return false
	}
	return true
}

// quotedEnd is the offset of the quote that closes the quoted scalar
// opening at i, or len(raw) or past it when none does. A double-quoted
// scalar escapes with a backslash, a single-quoted one doubles its quote.
func quotedEnd(raw []byte, i int) int {
	if raw[i] == '"' {
		for i++; i < len(raw) && raw[i] != '"'; i++ {
			if raw[i] == '\\' {
				i++
			}
		}
		return i
	}
	for i++; i < len(raw); i++ {
		if raw[i] != '\'' {
			continue
		}
		if i+1 < len(raw) && raw[i+1] == '\'' {
			i++
			continue
		}
		break
	}
	return i
}

// commentEnd is the offset of the newline that ends the comment at i, or
// len(raw).
func commentEnd(raw []byte, i int) int {
	for i < len(raw) && raw[i] != '\n' {
		i++
	}
	return i
}
