package codec_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
)

// corpusLink is the link the note corpus adds to every file: its why holds
// everything FormatLink must quote.
var corpusLink = queue.Link{To: "N-9", Kind: "led_to", Why: `review said "ship it" \ see #12, [a] {b}: é`}

// noteCase is one file of the note corpus. golden, when set, is the file
// holding the exact bytes AddLink(raw, corpusLink) must return.
type noteCase struct {
	name   string
	raw    []byte
	golden string
}

// noteCorpusFiles lists the note corpus: note files written by hand in
// every shape a links list can take.
func noteCorpusFiles(t testing.TB) []string {
	t.Helper()
	return glob(t, filepath.Join("testdata", "notes", "*.md"))
}

// noteCases is the note corpus: the files under testdata/notes, the
// sample project's notes, and each with CRLF line endings and with a BOM.
func noteCases(t testing.TB) []noteCase {
	t.Helper()
	var cases []noteCase
	variants := func(name string, raw []byte) {
		if !bytes.Contains(raw, []byte("\r\n")) {
			cases = append(cases, noteCase{name: name + "+crlf", raw: bytes.ReplaceAll(raw, []byte("\n"), []byte("\r\n"))})
		}
		if !bytes.HasPrefix(raw, []byte("\xEF\xBB\xBF")) {
			cases = append(cases, noteCase{name: name + "+bom", raw: append([]byte("\xEF\xBB\xBF"), raw...)})
		}
	}
	for _, f := range noteCorpusFiles(t) {
		raw := readFile(t, f)
		cases = append(cases, noteCase{name: filepath.Base(f), raw: raw,
			golden: filepath.Join("testdata", "notes", "golden", filepath.Base(f))})
		variants(filepath.Base(f), raw)
	}
	for _, f := range glob(t, filepath.Join(exampleDir, "notes", "*.md")) {
		raw := readFile(t, f)
		name := "example/" + filepath.Base(f)
		cases = append(cases, noteCase{name: name, raw: raw})
		variants(name, raw)
	}
	return cases
}

// mustParseNote parses a note, failing the test when it does not parse.
func mustParseNote(t testing.TB, raw []byte) *queue.Note {
	t.Helper()
	n, err := codec.ParseNote(raw)
	if err != nil {
		t.Fatalf("ParseNote: %v\n%q", err, raw)
	}
	return n
}

// noteFields compares notes: a nil list is an empty one.
var noteFields = cmpopts.EquateEmpty()

// TestS5_NoteAddLinkCorpus: for every note of the corpus, AddLink returns
// the golden bytes; they parse to the note as it was with the new link
// last; and the only change is an insertion that holds the link, so
// removing it gives back the input byte for byte.
func TestS5_NoteAddLinkCorpus(t *testing.T) {
	for _, tc := range noteCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			in := bytes.Clone(tc.raw)
			out, err := codec.AddLink(in, corpusLink)
			if err != nil {
				t.Fatalf("AddLink refused a note ParseNote reads: %v", err)
			}
			if !bytes.Equal(in, tc.raw) {
				t.Fatal("AddLink modified its input")
			}
			if err := addLinkProblem(tc.raw, out, corpusLink); err != nil {
				t.Fatalf("%v\ninput:\n%s\noutput:\n%s", err, tc.raw, out)
			}
			if ins, ok := insertion(tc.raw, out, codec.FormatLink(corpusLink)); !ok {
				t.Fatalf("AddLink did more than insert one span holding the link (-in +out):\n%s", cmp.Diff(string(tc.raw), string(out)))
			} else if n := strings.Count(ins, "\n"); n > 2 || (n == 2 && !strings.Contains(ins, "links:")) {
				t.Errorf("AddLink inserted %d lines for one link: %q", n, ins)
			}
			if tc.golden != "" {
				checkGolden(t, tc.golden, out)
			}
		})
	}
}

// addLinkProblem checks what AddLink(in, l) returned: out parses to the
// note in parsed to, with l after its links and the same body. It returns
// nil, or what is wrong.
func addLinkProblem(in, out []byte, l queue.Link) error {
	before, err := codec.ParseNote(in)
	if err != nil {
		return fmt.Errorf("the input does not parse: %v", err)
	}
	after, err := codec.ParseNote(out)
	if err != nil {
		return fmt.Errorf("the output does not parse: %v", err)
	}
	want := *before
	want.Links = append(slices.Clone(before.Links), l)
	if diff := cmp.Diff(&want, after, noteFields); diff != "" {
		return fmt.Errorf("the output does not read as the note plus the link (-want +got):\n%s", diff)
	}
	if !bytes.HasSuffix(out, before.Body) {
		return errors.New("the body is not at the end of the output")
	}
	return yamlProblem(in, out)
}

// yamlProblem decodes the frontmatter of in and out as plain YAML and
// checks that they differ only by the last item of links, so a change to
// a key or a link field that ParseNote ignores is seen too.
func yamlProblem(in, out []byte) error {
	var a, b map[string]any
	if err := yaml.Unmarshal(frontmatterOf(in), &a); err != nil {
		return fmt.Errorf("the input's frontmatter: %v", err)
	}
	if err := yaml.Unmarshal(frontmatterOf(out), &b); err != nil {
		return fmt.Errorf("the output's frontmatter: %v", err)
	}
	links, _ := b["links"].([]any)
	if len(links) == 0 {
		return errors.New("the output's frontmatter has no links")
	}
	b["links"] = links[:len(links)-1]
	if old, ok := a["links"]; !ok && len(links) == 1 {
		delete(b, "links") // AddLink wrote the key
	} else if old == nil && len(links) == 1 {
		b["links"] = nil // links: with nothing, or ~
	}
	if diff := cmp.Diff(a, b, cmpopts.EquateNaNs()); diff != "" {
		return fmt.Errorf("the frontmatter changed beyond the new link (-in +out):\n%s", diff)
	}
	return nil
}

// frontmatterOf is the text between a file's opening line and its closing
// one: an oracle written apart from the codec's split.
func frontmatterOf(raw []byte) []byte {
	s := strings.TrimPrefix(string(raw), "\xEF\xBB\xBF")
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines[1:] {
		if t := strings.TrimRight(l, "\r\n"); t == "---" || t == "..." {
			break
		}
		b.WriteString(l)
	}
	return []byte(b.String())
}

// insertion reports whether out is in with one span inserted that holds
// item, and returns that span. Where the span could sit is ambiguous when
// the bytes around it repeat it (a line inserted after a line like it), so
// every place between the common prefix and the common suffix is tried,
// the last first, so a line inserted after a line is seen whole.
func insertion(in, out []byte, item string) (string, bool) {
	k := len(out) - len(in)
	if k <= 0 {
		return "", false
	}
	p := 0
	for p < len(in) && in[p] == out[p] {
		p++
	}
	s := 0
	for s < len(in) && in[len(in)-1-s] == out[len(out)-1-s] {
		s++
	}
	for i := p; i >= len(in)-s; i-- {
		if ins := out[i : i+k]; bytes.Contains(ins, []byte(item)) {
			return string(ins), true
		}
	}
	return "", false
}

// nullValue matches the value of a links key that holds nothing, which
// AddLink may replace with a flow list: ~, null, a !!null or ! tag.
var nullValue = regexp.MustCompile(`^\s*(!!null|!)?\s*(~|null|Null|NULL)?\s*$`)

// replacedNull reports whether out is in with the null value of its links
// key replaced by a flow list holding item.
func replacedNull(in, out []byte, item string) bool {
	p := 0
	for p < len(in) && p < len(out) && in[p] == out[p] {
		p++
	}
	s := 0
	for s < len(in)-p && s < len(out)-p && in[len(in)-1-s] == out[len(out)-1-s] {
		s++
	}
	removed, added := in[p:len(in)-s], out[p:len(out)-s]
	return nullValue.Match(removed) && bytes.Contains(added, []byte("["+item+"]"))
}

// noteHead is the start of a note that parses, for the tables below.
const noteHead = "---\nkey: N-1\ntype: decision\ntitle: T\n"

// TestS5_NoteAddLinkRefuses: a note ParseNote refuses is refused by
// AddLink with the same *ParseError, which names the field and the value
// at fault; the input is never modified. A note whose frontmatter is one
// {flow mapping} reads, but AddLink, which edits lines, refuses it.
func TestS5_NoteAddLinkRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		raw   string
		line  int
		field string
		words string // in the message
	}{
		{"bad type", "---\nkey: N-1\ntype: opinion\ntitle: T\n---\n", 3, "type", `unknown type "opinion"`},
		{"bad legacy kind", "---\nkey: N-1\nkind: idea\ntitle: T\n---\n", 3, "kind", `unknown type "idea"`},
		{"bad link kind", noteHead + "links: [{to: N-2, kind: inspired}]\n---\n", 5, "links", `kind "inspired": want one of took_from, led_to`},
		{"bad link kind in a block list", noteHead + "links:\n  - to: N-2\n    kind: chose\n  - to: N-3\n    kind: Chose\n---\n", 8, "links", `kind "Chose"`},
		{"link to a task", noteHead + "links: [{to: SNAG-2, kind: chose}]\n---\n", 5, "links", `to "SNAG-2": want a note key like N-3`},
		{"link to N-0", noteHead + "links:\n  - {to: N-0, kind: chose}\n---\n", 6, "links", `to "N-0"`},
		{"link without to", noteHead + "links: [{kind: chose}]\n---\n", 5, "links", `to "": want a note key`},
		{"link to a list", noteHead + "links: [{to: [N-2], kind: chose}]\n---\n", 5, "links", `to: want a single value`},
		{"link that is not a mapping", noteHead + "links: [N-2]\n---\n", 5, "links", "each link is {to: N-3, kind: led_to}"},
		{"links that are not a list", noteHead + "links: N-2\n---\n", 5, "links", "want a list like"},
		{"bad link trust", noteHead + "links: [{to: N-2, kind: chose, trust: maybe}]\n---\n", 5, "links", `trust "maybe"`},
		{"two links keys", noteHead + "links: []\nlinks: []\n---\n", 6, "links", "duplicate key"},
		{"bad key", "---\nkey: SNAG-1\ntitle: T\n---\n", 2, "key", `"SNAG-1" is not a note key`},
		{"bad trust", noteHead + "trust: maybe\n---\n", 5, "trust", `unknown value "maybe"`},
		{"bad created", noteHead + "created: yesterday\n---\n", 5, "created", "want a time like"},
		{"no title", "---\nkey: N-1\ntype: decision\n---\n", 0, "title", "missing"},
		{"title a list", "---\nkey: N-1\ntitle: [a]\n---\n", 3, "title", "want a single value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte(tc.raw)
			_, perr := codec.ParseNote(raw)
			var pe *codec.ParseError
			if !errors.As(perr, &pe) {
				t.Fatalf("ParseNote: %v (%T), want a *ParseError", perr, perr)
			}
			if pe.Line != tc.line || pe.Field != tc.field || !strings.Contains(pe.Msg, tc.words) {
				t.Errorf("ParseNote: line %d, field %q, %q; want line %d, field %q, a message with %q", pe.Line, pe.Field, pe.Msg, tc.line, tc.field, tc.words)
			}
			if !strings.Contains(perr.Error(), tc.field+": ") {
				t.Errorf("the error %q does not name the field %s", perr, tc.field)
			}
			checkRefused(t, raw, perr)
		})
	}

	t.Run("conflict markers", func(t *testing.T) {
		raw := []byte(noteHead + "<<<<<<< HEAD\nlinks: [{to: N-2, kind: chose}]\n=======\nlinks: [{to: N-3, kind: chose}]\n>>>>>>> other\n---\n")
		_, perr := codec.ParseNote(raw)
		var pe *codec.ParseError
		if !errors.As(perr, &pe) || !pe.Conflict || pe.Line != 5 || !strings.Contains(pe.Msg, "conflict markers") {
			t.Fatalf("ParseNote: %#v, want a conflict on line 5", perr)
		}
		checkRefused(t, raw, perr)
	})

	t.Run("flow mapping frontmatter", func(t *testing.T) {
		raw := []byte("---\n{key: N-1, type: decision, title: T, links: [{to: N-2, kind: chose}]}\n---\nbody\n")
		n, err := codec.ParseNote(raw)
		if err != nil || len(n.Links) != 1 {
			t.Fatalf("ParseNote: %+v, %v; want the note, as Parse reads a task's {flow mapping}", n, err)
		}
		out, err := codec.AddLink(raw, corpusLink)
		var pe *codec.ParseError
		if !errors.As(err, &pe) || pe.Line != 2 || !strings.Contains(pe.Msg, "flow mapping") || !strings.Contains(pe.Msg, "one key per line") {
			t.Fatalf("AddLink: %q, %v; want a *ParseError on line 2 that asks for one key per line", out, err)
		}
	})

	t.Run("no frontmatter", func(t *testing.T) {
		raw := []byte("key: N-1\ntitle: T\n")
		_, perr := codec.ParseNote(raw)
		var pe *codec.ParseError
		if !errors.As(perr, &pe) || pe.Line != 1 || !strings.Contains(pe.Msg, "no frontmatter") {
			t.Fatalf("ParseNote: %v", perr)
		}
		checkRefused(t, raw, perr)
	})
}

// checkRefused checks that AddLink refuses raw with the error ParseNote
// gave, and leaves raw as it was.
func checkRefused(t *testing.T, raw []byte, perr error) {
	t.Helper()
	orig := bytes.Clone(raw)
	out, err := codec.AddLink(raw, corpusLink)
	var pe *codec.ParseError
	if out != nil || !errors.As(err, &pe) {
		t.Fatalf("AddLink: %q, %v (%T); want a *ParseError", out, err, err)
	}
	if err.Error() != perr.Error() {
		t.Errorf("AddLink refused with %q, ParseNote with %q", err, perr)
	}
	if !bytes.Equal(raw, orig) {
		t.Error("AddLink modified its input")
	}
}

// TestS5_NoteAddLinkShapes pins where AddLink puts a link in the shapes a
// person or an agent may leave a links list in, beyond the corpus.
func TestS5_NoteAddLinkShapes(t *testing.T) {
	l := queue.Link{To: "N-4", Kind: "chose"}
	for _, tc := range []struct {
		name, links, want string
	}{
		{"tilde", "links: ~\n", "links: [{to: N-4, kind: chose}]\n"},
		{"null with a comment", "links: null # none\n", "links: [{to: N-4, kind: chose}] # none\n"},
		{"a null tag", "links: !!null\n", "links: [{to: N-4, kind: chose}]\n"},
		{"a seq tag", "links: !!seq [{to: N-2, kind: chose}]\n", "links: !!seq [{to: N-2, kind: chose}, {to: N-4, kind: chose}]\n"},
		{"empty flow list on two lines", "links: [\n  ]\n", "links: [\n  {to: N-4, kind: chose}]\n"},
		{"an indentless block list", "links:\n- {to: N-2, kind: chose}\n", "links:\n- {to: N-2, kind: chose}\n- {to: N-4, kind: chose}\n"},
		{"dash alone on its line", "links:\n  -\n    to: N-2\n    kind: chose\n", "links:\n  -\n    to: N-2\n    kind: chose\n  - {to: N-4, kind: chose}\n"},
		{"why across lines in a flow list", "links: [{to: N-2, kind: chose, why: \"a\n  b\"}]\n", "links: [{to: N-2, kind: chose, why: \"a\n  b\"}, {to: N-4, kind: chose}]\n"},
		{"brackets inside quotes", "links: [{to: N-2, kind: chose, why: \"]}\"}, {to: N-3, kind: chose, why: ']}'''}]\n",
			"links: [{to: N-2, kind: chose, why: \"]}\"}, {to: N-3, kind: chose, why: ']}'''}, {to: N-4, kind: chose}]\n"},
		{"a comment with a bracket after a flow list", "links: [{to: N-2, kind: chose}] # see [x]\n", "links: [{to: N-2, kind: chose}, {to: N-4, kind: chose}] # see [x]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte(noteHead + tc.links + "author: ADA\n---\nbody\n")
			out, err := codec.AddLink(raw, l)
			if err != nil {
				t.Fatalf("AddLink: %v", err)
			}
			if diff := cmp.Diff(noteHead+tc.want+"author: ADA\n---\nbody\n", string(out)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if err := addLinkProblem(raw, out, l); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestS5_NoteAddLinkRefusesWhatItCannotKeep: shapes AddLink once got
// wrong (a kept block scalar before the insertion point; a # or an
// apostrophe that misled the search for a flow list's ]) now come back
// either right or refused, never changed elsewhere.
func TestS5_NoteAddLinkRefusesWhatItCannotKeep(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		l         queue.Link
	}{
		{"kept block scalar", noteHead + "links:\n  - to: N-2\n    kind: chose\n    why: |+\n      text\n\n---\nbody\n", queue.Link{To: "N-3", Kind: "chose"}},
		{"kept block scalar, unknown key", noteHead + "links:\n  - to: N-3\n    kind: chose\n    x: >+\n      an unknown key, kept\n\n# a comment\n\nauthor: ADA\n---\n", queue.Link{To: "N-4", Kind: "chose"}},
		{"comment at a line start", noteHead + "links: [\n# ]\n  {to: N-3, kind: chose}]\n---\nbody\n", queue.Link{To: "N-3", Kind: "chose"}},
		{"apostrophe in a plain scalar", noteHead + "links: [{to: N-2, kind: chose, why: it's}, {to: N-3, kind: chose}]\nauthor: 'T ]]'\n---\n", queue.Link{To: "N-3", Kind: "chose"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte(tc.raw)
			mustParseNote(t, raw)
			out, err := codec.AddLink(raw, tc.l)
			if err != nil {
				return // refused: the file stays as it is
			}
			if problem := addLinkProblem(raw, out, tc.l); problem != nil {
				t.Fatalf("AddLink(%q) changed more than the link: %v\n%q", raw, problem, out)
			}
		})
	}
}
