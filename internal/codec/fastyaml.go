package codec

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// fastFrontmatter reads the frontmatter shapes snag itself writes (see
// [Format]) without the YAML library, which is most of the cost of parsing
// a task file (a cold reindex parses every file). It builds the node tree
// the YAML library would build for text: the same kinds, tags, values,
// styles, lines and columns, so that every rule and every field after it
// runs unchanged. It accepts only what it recognises:
//
//   - top-level lines key: value at column 0, with a key of lower-case
//     letters, digits and underscores;
//   - a value that is a plain scalar of letters, digits, spaces and a few
//     punctuation marks, a single- or double-quoted scalar on one line, or a
//     [flow, list] of such scalars;
//   - a {flow: mapping} of such scalars and flow lists;
//   - key: alone, then a block list indented by two spaces ("  - ") of
//     such values;
//   - key: alone, then a mapping indented by two spaces whose values are as
//     above, or a block list indented by four.
//
// Anything else (a comment, a blank line, a tab, CRLF, an empty value, a
// plain scalar it cannot resolve for sure, such as 0x1F or 1e3) makes it
// give up, and the caller decodes the text with the YAML library, so a file
// reads the same either way (FuzzFastFrontmatter holds the two to that).
func fastFrontmatter(text []byte) (*yaml.Node, bool) {
	if len(text) == 0 || text[len(text)-1] != '\n' {
		return nil, false
	}
	s := fastScanner{text: string(text)}
	root := s.node(yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: 1, Column: 1})
	if !s.mapping(root, 0) || s.pos != len(s.text) {
		return nil, false
	}
	return root, true
}

// fastScanner walks frontmatter text line by line.
type fastScanner struct {
	text  string
	pos   int         // start of the current line
	line  int         // 0-based number of the current line
	nodes []yaml.Node // allocated a slab at a time
}

// node returns a new node holding n.
func (s *fastScanner) node(n yaml.Node) *yaml.Node {
	if len(s.nodes) == cap(s.nodes) {
		s.nodes = make([]yaml.Node, 0, 48)
	}
	s.nodes = append(s.nodes, n)
	return &s.nodes[len(s.nodes)-1]
}

// current returns the current line without its \n, or ok false at the end.
func (s *fastScanner) current() (line string, ok bool) {
	if s.pos >= len(s.text) {
		return "", false
	}
	end := strings.IndexByte(s.text[s.pos:], '\n')
	if end < 0 {
		return "", false // fastFrontmatter checked the text ends with \n
	}
	return s.text[s.pos : s.pos+end], true
}

func (s *fastScanner) next(line string) {
	s.pos += len(line) + 1
	s.line++
}

// indentOf counts the spaces that start line.
func indentOf(line string) int {
	n := 0
	for n < len(line) && line[n] == ' ' {
		n++
	}
	return n
}

// mapping reads the key: value lines at indent into m, up to the first line
// indented less. It reports false on anything it does not recognise.
func (s *fastScanner) mapping(m *yaml.Node, indent int) bool {
	first := true
	for {
		line, ok := s.current()
		if !ok {
			return !first
		}
		in := indentOf(line)
		if in < indent && !first {
			return true
		}
		if in != indent {
			return false
		}
		colon := strings.IndexByte(line, ':')
		if colon < 0 || !fastKey(line[indent:colon]) {
			return false
		}
		key := line[indent:colon]
		keyTag, _ := plainTag(key)
		k := s.node(yaml.Node{Kind: yaml.ScalarNode, Tag: keyTag, Value: key, Line: s.line + 1, Column: indent + 1})
		if first {
			m.Line, m.Column = k.Line, k.Column
			first = false
		}
		rest := line[colon+1:]
		var v *yaml.Node
		switch {
		case rest == "":
			s.next(line)
			if v = s.block(indent); v == nil {
				return false
			}
		case rest[0] == ' ':
			col := colon + 3 // the value starts after ": "
			var end int
			v, end = s.scalarOrFlow(line, col-1, s.line+1)
			if v == nil || end != len(line) {
				return false
			}
			s.next(line)
		default:
			return false
		}
		m.Content = append(m.Content, k, v)
	}
}

// block reads the block collection below a key at indent: a list at indent
// + 2, or a mapping at indent + 2.
func (s *fastScanner) block(indent int) *yaml.Node {
	line, ok := s.current()
	if !ok {
		return nil
	}
	in := indentOf(line)
	if in != indent+2 {
		return nil
	}
	if strings.HasPrefix(line[in:], "- ") {
		seq := s.node(yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: s.line + 1, Column: in + 1})
		for {
			line, ok := s.current()
			if !ok || indentOf(line) != in || !strings.HasPrefix(line[in:], "- ") {
				break
			}
			v, end := s.scalarOrFlow(line, in+2, s.line+1)
			if v == nil || end != len(line) {
				return nil
			}
			seq.Content = append(seq.Content, v)
			s.next(line)
		}
		return seq
	}
	m := s.node(yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"})
	if !s.mapping(m, in) {
		return nil
	}
	return m
}

// fastKey reports whether k is a key fastFrontmatter reads: lower-case
// ASCII letters, digits and underscores, starting with a letter.
func fastKey(k string) bool {
	if k == "" || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for i := 1; i < len(k); i++ {
		if c := k[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// scalarOrFlow reads the value that starts at byte i of line (line number
// n): a quoted or plain scalar, a [flow list] or a {flow mapping}. It
// returns the node and the byte after it, or nil.
func (s *fastScanner) scalarOrFlow(line string, i, n int) (*yaml.Node, int) {
	if i >= len(line) {
		return nil, 0
	}
	switch line[i] {
	case '[':
		return s.flowSeq(line, i, n)
	case '{':
		return s.flowMap(line, i, n)
	case '"', '\'':
		return s.quoted(line, i, n)
	}
	v, end := s.plain(line, i, n, false)
	return v, end
}

// column is the 1-based column, in characters, of byte i of line.
func column(line string, i int) int { return utf8.RuneCountInString(line[:i]) + 1 }

// flowSeq reads a [flow, list] of scalars at byte i.
func (s *fastScanner) flowSeq(line string, i, n int) (*yaml.Node, int) {
	seq := s.node(yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle, Line: n, Column: column(line, i)})
	i++
	i = skipSpaces(line, i)
	if i < len(line) && line[i] == ']' {
		return seq, i + 1
	}
	for {
		var v *yaml.Node
		if i < len(line) && (line[i] == '"' || line[i] == '\'') {
			v, i = s.quoted(line, i, n)
		} else {
			v, i = s.plain(line, i, n, true)
		}
		if v == nil {
			return nil, 0
		}
		seq.Content = append(seq.Content, v)
		var done, ok bool
		if i, done, ok = flowNext(line, i, ']'); !ok {
			return nil, 0
		} else if done {
			return seq, i
		}
	}
}

// flowNext reads what follows an item of a flow collection that end
// closes, at byte i: the end (done, and i after it), or a comma and the
// start of the next item. ok is false for anything else, a trailing comma
// included.
func flowNext(line string, i int, end byte) (next int, done, ok bool) {
	i = skipSpaces(line, i)
	switch {
	case i < len(line) && line[i] == end:
		return i + 1, true, true
	case i < len(line) && line[i] == ',':
		i = skipSpaces(line, i+1)
		return i, false, i >= len(line) || line[i] != end
	}
	return 0, false, false
}

// flowMap reads {k: v, k: [a, b]} at byte i.
func (s *fastScanner) flowMap(line string, i, n int) (*yaml.Node, int) {
	m := s.node(yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle, Line: n, Column: column(line, i)})
	i = skipSpaces(line, i+1)
	for {
		colon := strings.IndexByte(line[i:], ':')
		if colon < 0 || !fastKey(line[i:i+colon]) {
			return nil, 0
		}
		key := line[i : i+colon]
		keyTag, _ := plainTag(key)
		m.Content = append(m.Content, s.node(yaml.Node{Kind: yaml.ScalarNode, Tag: keyTag, Value: key, Line: n, Column: column(line, i)}))
		i += colon + 1
		if i >= len(line) || line[i] != ' ' {
			return nil, 0
		}
		i = skipSpaces(line, i)
		var v *yaml.Node
		switch {
		case i < len(line) && line[i] == '[':
			v, i = s.flowSeq(line, i, n)
		case i < len(line) && (line[i] == '"' || line[i] == '\''):
			v, i = s.quoted(line, i, n)
		default:
			v, i = s.plain(line, i, n, true)
		}
		if v == nil {
			return nil, 0
		}
		m.Content = append(m.Content, v)
		var done, ok bool
		if i, done, ok = flowNext(line, i, '}'); !ok {
			return nil, 0
		} else if done {
			return m, i
		}
	}
}

func skipSpaces(line string, i int) int {
	for i < len(line) && line[i] == ' ' {
		i++
	}
	return i
}

// plain reads a plain scalar at byte i: it starts with a letter, a digit,
// _ or /, and holds letters, digits, spaces and _-./()+@' (and, outside a
// flow collection, commas, and colons with no space after them). In a flow collection it ends before a comma,
// ] or }; otherwise at the end of the line. It ends in no space.
func (s *fastScanner) plain(line string, i, n int, flow bool) (*yaml.Node, int) {
	start := i
	r, size := utf8.DecodeRuneInString(line[i:])
	if !(r < utf8.RuneSelf && (isASCIIAlnum(byte(r)) || r == '_' || r == '/')) && !(r >= utf8.RuneSelf && unicode.IsLetter(r)) {
		return nil, 0
	}
	i += size
	for i < len(line) {
		c := line[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(line[i:])
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				return nil, 0
			}
			i += size
			continue
		}
		if flow && (c == ',' || c == ']' || c == '}') {
			break
		}
		// A colon ends a key when a space or the line's end follows it, and
		// ends a plain scalar in a flow collection.
		colon := c == ':' && !flow && i+1 < len(line) && line[i+1] != ' '
		if !isASCIIAlnum(c) && !strings.ContainsRune(" _-./()+@'", rune(c)) && (flow || c != ',') && !colon {
			return nil, 0
		}
		i++
	}
	value := line[start:i]
	if flow {
		value = strings.TrimRight(value, " ")
	} else if strings.HasSuffix(value, " ") {
		return nil, 0
	}
	tag, ok := plainTag(value)
	if !ok {
		return nil, 0
	}
	return s.node(yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value, Line: n, Column: column(line, start)}), start + len(value)
}

func isASCIIAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// plainTag is the tag the YAML library resolves a plain scalar to, for the
// ones fastFrontmatter reads; ok is false for one it cannot tell for sure
// (a number other than a plain whole one, a date it does not know).
func plainTag(s string) (tag string, ok bool) {
	switch s {
	case "true", "True", "TRUE", "false", "False", "FALSE":
		return "!!bool", true
	case "null", "Null", "NULL":
		return "!!null", true
	}
	c := s[0]
	if c != '+' && c != '-' && c != '.' && (c < '0' || c > '9') {
		return "!!str", true
	}
	if c < '0' || c > '9' {
		return "", false
	}
	digits := true
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			digits = false
			break
		}
	}
	switch {
	case digits && (s == "0" || s[0] != '0') && len(s) <= 18:
		return "!!int", true
	case isDecimal(s):
		return "!!float", true
	case isTimestamp(s):
		return "!!timestamp", true
	}
	return "", false
}

// isDecimal reports whether s is a number with one point and digits on
// both sides, the whole part without a leading zero (12.5, 0.25): what
// Format writes for a fraction, and what the YAML library reads as a float.
func isDecimal(s string) bool {
	whole, frac, ok := strings.Cut(s, ".")
	if !ok || whole == "" || frac == "" || len(s) > 30 || len(whole) > 1 && whole[0] == '0' {
		return false
	}
	for _, part := range []string{whole, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return false
			}
		}
	}
	return true
}

// isTimestamp reports whether s is 2006-01-02 or 2006-01-02T15:04:05Z,
// digits in place and a real date and time: what the YAML library reads as
// a timestamp among the shapes snag writes.
func isTimestamp(s string) bool {
	const day, full = "0000-00-00", "0000-00-00T00:00:00Z"
	var layout string
	switch len(s) {
	case len(day):
		layout = "2006-1-2"
	case len(full):
		layout = "2006-1-2T15:4:5.999999999Z07:00"
	default:
		return false
	}
	for i := 0; i < len(s); i++ {
		if want := full[i]; want == '0' {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		} else if s[i] != want {
			return false
		}
	}
	_, err := time.Parse(layout, s)
	return err == nil
}

// quoted reads a "double" or 'single' quoted scalar that ends on its line,
// at byte i. In double quotes it takes the escapes \\ \" \/ \n \t \r and
// \uXXXX; it gives up on any other escape, and on a tab or a character YAML
// does not allow in a file.
func (s *fastScanner) quoted(line string, i, n int) (*yaml.Node, int) {
	q := line[i]
	col := column(line, i)
	var b strings.Builder
	j := i + 1
	for j < len(line) {
		c := line[j]
		switch {
		case c == q && q == '\'':
			if j+1 < len(line) && line[j+1] == '\'' {
				b.WriteByte('\'')
				j += 2
				continue
			}
			return s.node(yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: yaml.SingleQuotedStyle, Value: b.String(), Line: n, Column: col}), j + 1
		case c == q:
			return s.node(yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: yaml.DoubleQuotedStyle, Value: b.String(), Line: n, Column: col}), j + 1
		case c == '\\' && q == '"':
			if j+1 >= len(line) {
				return nil, 0
			}
			switch e := line[j+1]; e {
			case '\\', '"', '/':
				b.WriteByte(e)
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'u':
				if j+6 > len(line) {
					return nil, 0
				}
				v, err := strconv.ParseUint(line[j+2:j+6], 16, 32)
				if err != nil || !yamlPrintable(rune(v)) {
					return nil, 0
				}
				b.WriteRune(rune(v))
				j += 4
			default:
				return nil, 0
			}
			j += 2
		case c < utf8.RuneSelf:
			if c < 0x20 || c == 0x7f {
				return nil, 0
			}
			b.WriteByte(c)
			j++
		default:
			r, size := utf8.DecodeRuneInString(line[j:])
			if !yamlPrintable(r) || (r == utf8.RuneError && size == 1) {
				return nil, 0
			}
			b.WriteString(line[j : j+size])
			j += size
		}
	}
	return nil, 0
}

// yamlPrintable reports whether YAML allows r in a file, less the line
// breaks, tab and byte order mark that fastFrontmatter leaves to the YAML
// library.
func yamlPrintable(r rune) bool {
	switch {
	case r >= 0x20 && r <= 0x7e:
		return true
	case r >= 0xa0 && r <= 0xd7ff:
		return r != 0x2028 && r != 0x2029
	case r >= 0xe000 && r <= 0xfffd:
		return r != 0xfeff
	case r >= 0x10000 && r <= 0x10ffff:
		return true
	}
	return false
}
