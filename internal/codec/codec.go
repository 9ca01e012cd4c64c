package codec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/snagdev/snag/internal/queue"
	"go.yaml.in/yaml/v3"
)

// Limits on what the codec will read. They are checked on raw bytes before
// any YAML is decoded, so a hostile file costs little.
const (
	MaxFileSize        = queue.MaxFileSize // a whole task file
	MaxFrontmatterSize = 64 << 10          // the YAML between the delimiters
	MaxDepth           = 20                // nesting of mappings and sequences
)

// ParseError says why a task file could not be read: where, which field,
// and what to do about it. Conflict is set when the file holds git conflict
// markers: the task is then shown as conflict rather than invalid.
type ParseError struct {
	Path     string // the file, relative to .snag/, when known
	Line     int    // 1-based line in the file, 0 when it is about the whole file
	Field    string // the frontmatter key, when the problem is in one
	Msg      string
	Conflict bool
}

func (e *ParseError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString("parse ")
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// WithPath returns err with the file's path filled in when err is a
// *ParseError, and err unchanged otherwise.
func WithPath(err error, path string) error {
	var pe *ParseError
	if errors.As(err, &pe) {
		cp := *pe
		cp.Path = path
		return &cp
	}
	return err
}

var bom = []byte("\xEF\xBB\xBF")

// frontmatter locates the parts of a task file, as byte offsets into it.
type frontmatter struct {
	yamlStart int  // first byte of the YAML (after the opening line)
	yamlEnd   int  // first byte of the closing line
	bodyStart int  // first byte after the closing line
	crlf      bool // the opening line ends in \r\n
}

// split finds the frontmatter on raw bytes: an optional BOM, a first line that
// is exactly ---, and the YAML up to the next line that is --- or ... .
func split(raw []byte) (frontmatter, error) {
	var fm frontmatter
	p := 0
	if bytes.HasPrefix(raw, bom) {
		p = len(bom)
	}
	switch {
	case bytes.HasPrefix(raw[p:], []byte("---\n")):
		fm.yamlStart = p + 4
	case bytes.HasPrefix(raw[p:], []byte("---\r\n")):
		fm.yamlStart, fm.crlf = p+5, true
	case len(raw) == p:
		return fm, &ParseError{Msg: "empty file: a task starts with a line ---, its frontmatter, and a line --- (snag add writes one)"}
	default:
		return fm, &ParseError{Line: 1, Msg: "no frontmatter: the first line must be exactly --- (then id, key, title, status ..., then a line ---)"}
	}
	for q := fm.yamlStart; q < len(raw); {
		if q-fm.yamlStart > MaxFrontmatterSize {
			return fm, &ParseError{Msg: fmt.Sprintf("frontmatter is larger than %d KiB: move long text into the body, below the closing ---", MaxFrontmatterSize>>10)}
		}
		end := bytes.IndexByte(raw[q:], '\n')
		next := len(raw)
		if end >= 0 {
			next = q + end + 1
			end += q
		} else {
			end = len(raw)
		}
		line := bytes.TrimSuffix(raw[q:end], []byte("\r"))
		if string(line) == "---" || string(line) == "..." {
			fm.yamlEnd, fm.bodyStart = q, next
			return fm, nil
		}
		q = next
	}
	return fm, &ParseError{Msg: "frontmatter is not closed: add a line --- after the last key"}
}

// conflictLine returns the 1-based line of the first git conflict marker in
// raw (a <<<<<<< line followed by ======= and >>>>>>>), or 0.
func conflictLine(raw []byte) int {
	if !bytes.Contains(raw, []byte("<<<<<<<")) {
		return 0
	}
	stage, first := 0, 0
	for i, line := range bytes.Split(raw, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		switch {
		case stage == 0 && bytes.HasPrefix(line, []byte("<<<<<<<")):
			stage, first = 1, i+1
		case stage == 1 && (string(line) == "=======" || bytes.HasPrefix(line, []byte("|||||||"))):
			stage = 2
		case stage == 2 && bytes.HasPrefix(line, []byte(">>>>>>>")):
			return first
		}
	}
	return 0
}

// checkBytes applies the rules every file must meet before it is split.
func checkBytes(raw []byte) error {
	if len(raw) > MaxFileSize {
		return &ParseError{Msg: fmt.Sprintf("file is %d bytes, over the %d MiB limit: move attachments to shots/ and long logs elsewhere", len(raw), MaxFileSize>>20)}
	}
	if i := bytes.IndexByte(raw, 0); i >= 0 {
		return &ParseError{Line: 1 + bytes.Count(raw[:i], []byte("\n")), Msg: "file contains a NUL byte: task files are UTF-8 text"}
	}
	if !utf8.Valid(raw) {
		bad := 0
		for i := 0; i < len(raw); {
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n == 1 {
				bad = i
				break
			}
			i += n
		}
		return &ParseError{Line: 1 + bytes.Count(raw[:bad], []byte("\n")), Msg: "file is not valid UTF-8: save it as UTF-8"}
	}
	if n := conflictLine(raw); n > 0 {
		return &ParseError{Line: n, Conflict: true, Msg: "git conflict markers: resolve the merge by hand (keep one side, delete the <<<<<<< ======= >>>>>>> lines)"}
	}
	return nil
}

// document is frontmatter decoded into a YAML node tree that has passed every
// safety rule.
type document struct {
	fm      frontmatter
	root    *yaml.Node // the top-level mapping, or nil for empty frontmatter
	lineOff int        // add to a YAML line number to get the file's line number
}

// noFastFrontmatter turns fastFrontmatter off, for tests that compare the
// two ways of reading.
var noFastFrontmatter = false

// decode splits raw and decodes its frontmatter under the codec's rules:
// the shapes snag writes through fastFrontmatter, anything else through
// the YAML library.
func decode(raw []byte) (doc document, err error) {
	if err := checkBytes(raw); err != nil {
		return doc, err
	}
	if doc.fm, err = split(raw); err != nil {
		return doc, err
	}
	doc.lineOff = 1 // the opening --- line
	text := raw[doc.fm.yamlStart:doc.fm.yamlEnd]
	if err := checkBreaks(text, doc.lineOff); err != nil {
		return doc, err
	}
	root, fast := fastFrontmatter(text)
	if !fast || noFastFrontmatter {
		var n yaml.Node
		if err := safeUnmarshal(text, &n); err != nil {
			return doc, yamlError(err, doc.lineOff)
		}
		if n.Kind == 0 || (n.Kind == yaml.DocumentNode && len(n.Content) == 0) {
			return doc, nil
		}
		root = &n
		if root.Kind == yaml.DocumentNode {
			root = root.Content[0]
		}
	}
	if err := doc.check(root, 1); err != nil {
		return doc, err
	}
	switch {
	case root.Kind == yaml.ScalarNode && root.Tag == "!!null":
		return doc, nil
	case root.Kind != yaml.MappingNode:
		return doc, &ParseError{Line: root.Line + doc.lineOff, Msg: "frontmatter must be key: value lines (a mapping)"}
	}
	doc.root = root
	return doc, nil
}

// safeUnmarshal parses YAML into a node tree, turning a panic in the parser
// into an error: hostile input must never take the process down. The text
// must be one YAML document: the YAML library reads the first and would
// silently drop what follows it (after an indented mapping, a line at
// column 0 ends the document).
func safeUnmarshal(text []byte, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(text))
	if err := dec.Decode(n); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // empty, or only comments
		}
		return err
	}
	var rest yaml.Node
	err = dec.Decode(&rest)
	switch m := yamlLineRE().FindStringSubmatch(fmt.Sprint(err)); {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil:
		return fmt.Errorf("yaml: line %d: a second YAML document: keep the frontmatter to one (no --- inside it)", rest.Line)
	case m != nil && m[2] == "did not find expected <document start>":
		line, _ := strconv.Atoi(m[1])
		return fmt.Errorf("yaml: line %d: text after the end of the key: value lines: indent it like the keys above, or remove it", line+1)
	}
	return err
}

// checkBreaks refuses the line breaks YAML counts but snag's line-based
// editing does not (a lone CR, NEL, U+2028, U+2029): with one in the
// frontmatter, YAML's line numbers would point Edit at the wrong bytes.
func checkBreaks(text []byte, lineOff int) error {
	line := 1
	for i, r := range string(text) {
		switch {
		case r == '\n':
			line++
		case r == '\r' && (i+1 == len(text) || text[i+1] != '\n'), r == '\u0085', r == '\u2028', r == '\u2029':
			return &ParseError{Line: line + lineOff, Msg: fmt.Sprintf("a %U line break in the frontmatter: end lines with \\n or \\r\\n only (in a \"quoted\" value, write it as an escape)", r)}
		}
	}
	return nil
}

// yamlLineRE reads the YAML library's messages; compiled at first use, not
// at the start of every program that links queue.
var yamlLineRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })

// yamlParserProblems are the messages of the YAML parser (not its scanner).
// The YAML library numbers their lines from 0, its scanner's from 1.
var yamlParserProblems = []string{
	"did not find expected ',' or ']'", "did not find expected ',' or '}'",
	"did not find expected '-' indicator", "did not find expected <document start>",
	"did not find expected <stream-start>", "did not find expected key",
	"did not find expected node content", "found duplicate %TAG directive",
	"found duplicate %YAML directive", "found incompatible YAML document",
	"found undefined tag handle",
}

func yamlError(err error, lineOff int) error {
	msg := err.Error()
	if m := yamlLineRE().FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		if slices.Contains(yamlParserProblems, m[2]) {
			n++
		}
		return &ParseError{Line: n + lineOff, Msg: "invalid YAML: " + m[2]}
	}
	return &ParseError{Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

var standardTags = []string{"!!str", "!!int", "!!float", "!!bool", "!!null", "!!timestamp", "!!seq", "!!map"}

// check walks the tree and refuses what the codec does not accept: anchors,
// aliases, merge keys, custom tags, duplicate or complex keys, deep nesting.
func (d *document) check(n *yaml.Node, depth int) error {
	line := n.Line + d.lineOff
	if depth > MaxDepth {
		return &ParseError{Line: line, Msg: fmt.Sprintf("nested more than %d levels deep: flatten it", MaxDepth)}
	}
	if n.Kind == yaml.AliasNode {
		return &ParseError{Line: line, Msg: fmt.Sprintf("YAML alias *%s is not allowed: write the value out", n.Value)}
	}
	if n.Anchor != "" {
		return &ParseError{Line: line, Msg: fmt.Sprintf("YAML anchor &%s is not allowed: write values out in full", n.Anchor)}
	}
	if n.Style&yaml.TaggedStyle != 0 && !slices.Contains(standardTags, n.Tag) {
		return &ParseError{Line: line, Msg: fmt.Sprintf("YAML tag %s is not allowed: remove it", n.Tag)}
	}
	if n.Kind == yaml.MappingNode {
		seen := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			kl := k.Line + d.lineOff
			if k.Kind != yaml.ScalarNode {
				return &ParseError{Line: kl, Msg: "complex mapping keys are not allowed: keys are plain words"}
			}
			if k.Tag == "!!merge" {
				return &ParseError{Line: kl, Msg: "YAML merge key << is not allowed: write the keys out"}
			}
			if prev, dup := seen[k.Value]; dup {
				return &ParseError{Line: kl, Field: k.Value, Msg: fmt.Sprintf("duplicate key (first on line %d): keep one", prev)}
			}
			seen[k.Value] = kl
		}
	}
	for _, c := range n.Content {
		if err := d.check(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// Parse decodes a task file. The error, when there is one, is a *ParseError
// (without a Path: see [WithPath]). Parse never modifies raw; the returned
// task's Raw is raw and its Body a sub-slice of it.
func Parse(raw []byte) (*queue.Task, error) {
	doc, err := decode(raw)
	if err != nil {
		return nil, err
	}
	t := &queue.Task{Raw: raw, Body: raw[doc.fm.bodyStart:], Trust: queue.TrustVetted,
		Severity: queue.DefaultSeverity, Kind: queue.DefaultKind, Wave: queue.DefaultWave}
	var have map[string]bool
	if doc.root != nil {
		have = make(map[string]bool)
		for i := 0; i+1 < len(doc.root.Content); i += 2 {
			k, v := doc.root.Content[i].Value, doc.root.Content[i+1]
			have[k] = true
			if err := doc.field(t, k, v); err != nil {
				return nil, err
			}
		}
	}
	for _, k := range []string{"id", "key", "title", "status"} {
		if !have[k] {
			return nil, &ParseError{Field: k, Msg: missingHint[k]}
		}
	}
	return t, nil
}

func enum[T ~string](d *document, n *yaml.Node, field string, allowed []T) (T, error) {
	s, err := d.str(field, n)
	if err != nil {
		return "", err
	}
	v := T(strings.ToLower(strings.TrimSpace(s)))
	if slices.Contains(allowed, v) {
		return v, nil
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return "", d.errf(n, field, "unknown value %q (want one of %s)", queue.Truncate(s, 40), strings.Join(names, ", "))
}
