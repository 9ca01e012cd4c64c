package codec

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/snagdev/snag/internal/queue"
	"go.yaml.in/yaml/v3"
)

// Field is one change to a top-level frontmatter key: set it to Value (a
// string, bool, int or time.Time), or remove its line when Value is nil.
type Field struct {
	Key   string
	Value any
}

// Set is shorthand for a Field that sets key to value.
func Set(key string, value any) Field { return Field{Key: key, Value: value} }

// Unset is shorthand for a Field that removes key.
func Unset(key string) Field { return Field{Key: key} }

// Edit applies fields to a task file and returns the new bytes. It rewrites
// only the value token of each key it changes, keeping the token's quoting
// style; a key that is missing is appended before the closing delimiter,
// with the file's line endings and indentation. Everything else (unknown
// keys, comments, order, the body) stays byte for byte. A value that spans
// several lines is replaced whole, by one line.
//
// Edit refuses a file whose frontmatter [Parse] cannot read (a size limit,
// a YAML rule, conflict markers) with the same *ParseError, and a {flow
// mapping} frontmatter, so snag never rewrites a broken or conflicted file.
// It does not judge field values: a caller that must not touch an invalid
// task parses it first (snag doctor --fix edits a file that lacks its id).
// Setting a key to the value it already has is a no-op, and the returned
// slice is raw itself when nothing changed.
func Edit(raw []byte, fields ...Field) ([]byte, error) {
	doc, err := decode(raw)
	if err != nil {
		return nil, err
	}
	if err := doc.editable(); err != nil {
		return nil, err
	}
	ed := editor{raw: raw, doc: doc}
	ed.index()
	var splices []splice
	for _, f := range fields {
		s, err := ed.change(f)
		if err != nil {
			return nil, err
		}
		if s != nil {
			splices = append(splices, *s)
		}
	}
	if len(splices) == 0 {
		return raw, nil
	}
	// Apply from the end so earlier offsets stay valid; appends at the same
	// offset keep the order they were given in, so the last given goes in
	// first.
	slices.Reverse(splices)
	sort.SliceStable(splices, func(i, j int) bool { return splices[i].start > splices[j].start })
	out := raw
	for i, s := range splices {
		for _, t := range splices[:i] {
			if s.end > t.start {
				return nil, fmt.Errorf("edit: overlapping changes to %s and %s", s.key, t.key)
			}
		}
		out = replaceBytes(out, s.start, s.end, s.text)
	}
	return out, nil
}

// editable refuses a frontmatter written as one {flow mapping}: snag
// edits key: value lines.
func (d *document) editable() error {
	if d.root != nil && d.root.Style&yaml.FlowStyle != 0 {
		return &ParseError{Line: d.root.Line + d.lineOff, Msg: "frontmatter is one {flow mapping}: snag edits key: value lines; write one key per line"}
	}
	return nil
}

func replaceBytes(b []byte, start, end int, text []byte) []byte {
	out := make([]byte, 0, len(b)-(end-start)+len(text))
	out = append(out, b[:start]...)
	out = append(out, text...)
	return append(out, b[end:]...)
}

type splice struct {
	key        string
	start, end int
	text       []byte
}

type entry struct {
	key, val *yaml.Node
}

type editor struct {
	raw        []byte
	doc        document
	lineStarts []int // byte offset of each file line (index 0 = line 1)
	entries    map[string]entry
	order      []entry // top-level entries by line
	indent     int     // columns before top-level keys
}

func (ed *editor) index() {
	ed.lineStarts = []int{0}
	for i, c := range ed.raw[:ed.doc.fm.bodyStart] {
		if c == '\n' {
			ed.lineStarts = append(ed.lineStarts, i+1)
		}
	}
	ed.entries = map[string]entry{}
	if ed.doc.root == nil {
		return
	}
	c := ed.doc.root.Content
	for i := 0; i+1 < len(c); i += 2 {
		e := entry{c[i], c[i+1]}
		ed.entries[c[i].Value] = e
		ed.order = append(ed.order, e)
	}
	if len(ed.order) > 0 {
		// The mapping's indentation is the first key's line's, not the key's
		// column: an explicit "? key" sits further right.
		line := ed.raw[ed.lineStart(ed.order[0].key.Line):]
		for ed.indent < len(line) && line[ed.indent] == ' ' {
			ed.indent++
		}
	}
}

// lineStart is the byte offset of a YAML line (1-based, as yaml.Node counts).
func (ed *editor) lineStart(yamlLine int) int {
	return ed.lineStarts[yamlLine+ed.doc.lineOff-1]
}

// lineEnd is the byte offset of the end of a YAML line's content, before
// its \r\n or \n.
func (ed *editor) lineEnd(yamlLine int) int {
	s := ed.lineStart(yamlLine)
	e := bytes.IndexByte(ed.raw[s:], '\n')
	if e < 0 {
		return len(ed.raw)
	}
	e += s
	if e > s && ed.raw[e-1] == '\r' {
		e--
	}
	return e
}

// offset converts a node's line and column (columns count characters) to
// a byte offset.
func (ed *editor) offset(line, column int) int {
	p := ed.lineStart(line)
	for i := 1; i < column && p < len(ed.raw); i++ {
		_, n := utf8.DecodeRune(ed.raw[p:])
		p += n
	}
	return p
}

func (ed *editor) eol() string {
	if ed.doc.fm.crlf {
		return "\r\n"
	}
	return "\n"
}

func (ed *editor) change(f Field) (*splice, error) {
	e, ok := ed.entries[f.Key]
	if !ok {
		if f.Value == nil {
			return nil, nil
		}
		text := strings.Repeat(" ", ed.indent) + f.Key + ": " + render(f.Value, 0) + ed.eol()
		at := ed.doc.fm.yamlEnd
		return &splice{key: f.Key, start: at, end: at, text: []byte(text)}, nil
	}
	if f.Value == nil {
		start, end := ed.span(e)
		return &splice{key: f.Key, start: start, end: end}, nil
	}
	v := e.val
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" && v.Value == "" && v.Style == 0 {
		// key: with nothing after it (maybe a comment): put the value after
		// the colon.
		colon := ed.colonAfter(e.key)
		if colon < 0 || !blankOrComment(ed.raw[colon+1:ed.lineEnd(e.key.Line)]) {
			return ed.replaceSpan(f, e) // something else is there, such as a ! tag
		}
		return &splice{key: f.Key, start: colon + 1, end: colon + 1, text: []byte(" " + render(f.Value, 0))}, nil
	}
	// A tagged scalar's column is its tag's, not its token's: replace it whole.
	if v.Kind != yaml.ScalarNode || v.Line != e.key.Line || v.Style&(yaml.LiteralStyle|yaml.FoldedStyle|yaml.TaggedStyle) != 0 {
		return ed.replaceSpan(f, e)
	}
	start := ed.offset(v.Line, v.Column)
	end, ok := ed.tokenEnd(v, start)
	if !ok {
		return ed.replaceSpan(f, e)
	}
	text := render(f.Value, v.Style)
	if string(ed.raw[start:end]) == text {
		return nil, nil
	}
	return &splice{key: f.Key, start: start, end: end, text: []byte(text)}, nil
}

// tokenEnd finds where a one-line scalar token that starts at start ends,
// and reports false when the scalar does not fit on its line.
func (ed *editor) tokenEnd(v *yaml.Node, start int) (int, bool) {
	lineEnd := ed.lineEnd(v.Line)
	rest := ed.raw[start:lineEnd]
	switch {
	case len(rest) == 0:
		return 0, false
	case v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 && rest[0] != '"' && rest[0] != '\'':
		return 0, false // the node starts at something else, such as a ! tag
	case v.Style&yaml.DoubleQuotedStyle != 0:
		for i := 1; i < len(rest); i++ {
			switch rest[i] {
			case '\\':
				i++
			case '"':
				return start + i + 1, true
			}
		}
		return 0, false
	case v.Style&yaml.SingleQuotedStyle != 0:
		for i := 1; i < len(rest); i++ {
			if rest[i] == '\'' {
				if i+1 < len(rest) && rest[i+1] == '\'' {
					i++
					continue
				}
				return start + i + 1, true
			}
		}
		return 0, false
	}
	end := len(rest)
	for i := 1; i < len(rest); i++ {
		if rest[i] == '#' && (rest[i-1] == ' ' || rest[i-1] == '\t') {
			end = i
			break
		}
	}
	tok := strings.TrimRight(string(rest[:end]), " \t")
	if tok != v.Value {
		return 0, false // a plain scalar that continues on the next lines
	}
	return start + len(tok), true
}

// blankOrComment reports whether the rest of a line holds nothing but
// spaces and maybe a # comment.
func blankOrComment(rest []byte) bool {
	t := bytes.TrimLeft(rest, " \t")
	return len(t) == 0 || (t[0] == '#' && len(t) < len(rest))
}

// colonAfter finds the ':' that ends a key token, or -1.
func (ed *editor) colonAfter(k *yaml.Node) int {
	start := ed.offset(k.Line, k.Column)
	end := ed.lineEnd(k.Line)
	i := start
	if k.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		e, ok := ed.tokenEnd(k, start)
		if !ok {
			return -1
		}
		i = e
	} else {
		i += len(k.Value)
	}
	for ; i < end; i++ {
		switch ed.raw[i] {
		case ':':
			return i
		case ' ', '\t':
		default:
			return -1
		}
	}
	return -1
}

// span is the byte range of a whole top-level entry: from its key's line to
// the end of its value, leaving any comment lines above the next key alone.
func (ed *editor) span(e entry) (int, int) {
	first := e.key.Line
	next := -1
	for i, o := range ed.order {
		if o.key == e.key && i+1 < len(ed.order) {
			next = ed.order[i+1].key.Line
		}
	}
	var endOff int
	if next < 0 {
		endOff = ed.doc.fm.yamlEnd
	} else {
		endOff = ed.lineStart(next)
	}
	// Give back trailing blank lines and comment lines at the top level.
	for {
		prevLine := ed.lineOfOffset(endOff) - 1
		if prevLine <= first+ed.doc.lineOff-1 {
			break
		}
		ls := ed.lineStarts[prevLine-1]
		line := strings.TrimRight(string(ed.raw[ls:endOff]), "\r\n")
		trimmed := strings.TrimLeft(line, " \t")
		if trimmed != "" && !(strings.HasPrefix(trimmed, "#") && len(line)-len(trimmed) <= ed.indent) {
			break
		}
		endOff = ls
	}
	return ed.lineStart(first), endOff
}

// lineOfOffset is the 1-based file line that starts at off.
func (ed *editor) lineOfOffset(off int) int {
	return sort.SearchInts(ed.lineStarts, off) + 1
}

func (ed *editor) replaceSpan(f Field, e entry) (*splice, error) {
	start, end := ed.span(e)
	text := strings.Repeat(" ", ed.indent) + f.Key + ": " + render(f.Value, 0) + ed.eol()
	return &splice{key: f.Key, start: start, end: end, text: []byte(text)}, nil
}

// render writes a value as a YAML scalar token, in the given quoting style
// when it was quoted before and plain where plain is safe.
func render(v any, style yaml.Style) string {
	switch x := v.(type) {
	case rawYAML:
		return string(x)
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.Itoa(x)
	case time.Time:
		s := x.UTC().Format(time.RFC3339)
		if style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			return quote(s, style)
		}
		return s
	case []string:
		return flowList(x)
	case []queue.FileRef:
		return flowFiles(x)
	case fmt.Stringer:
		return render(x.String(), style)
	case string:
		if style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 || !plainSafe(x) {
			return quote(x, style)
		}
		return x
	}
	return render(fmt.Sprint(v), style)
}

// rawYAML is a value Edit writes as it is: a flow list snag made.
type rawYAML string

func quote(s string, style yaml.Style) string {
	// Single quotes cannot escape: a control character or a line separator
	// goes in double quotes, as an escape.
	if style&yaml.SingleQuotedStyle != 0 && !strings.ContainsFunc(s, queue.IsControl) && !strings.ContainsAny(s, "\u2028\u2029") {
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	return strconv.Quote(s)
}

// plainSafe reports whether s can be written as a plain YAML scalar that
// reads back as the same string: a conservative test.
func plainSafe(s string) bool {
	if s == "" || s != strings.TrimSpace(s) {
		return false
	}
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~":
		return false
	}
	r, _ := utf8.DecodeRuneInString(s)
	if !unicode.IsLetter(r) && r != '_' {
		return false
	}
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			continue
		}
		if !strings.ContainsRune(" _-./()+@,", r) {
			return false
		}
	}
	return true
}
