package codec_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
)

// fuzzNote is the note FuzzNoteLinks fuzzes: the fuzzer writes what
// follows links:, and picks the line endings and a BOM.
func fuzzNote(links string, pick uint8) []byte {
	if !strings.HasSuffix(links, "\n") {
		links += "\n"
	}
	raw := "---\nid: note_01M6KSRJYGY2QAKK1FYX7AYVB1\nkey: N-1\ntype: decision\ntitle: A fuzzed note\nlinks:" + links +
		"---\nThe body.\n---\nlinks: [{to: N-2, kind: chose}]\n"
	if pick&1 != 0 {
		raw = strings.ReplaceAll(raw, "\n", "\r\n")
	}
	if pick&2 != 0 {
		raw = "\xEF\xBB\xBF" + raw
	}
	return []byte(raw)
}

// fuzzLink is the link FuzzNoteLinks adds: the fuzzer writes its why and
// picks its target, kind and trust.
func fuzzLink(why string, pick uint8) queue.Link {
	l := queue.Link{To: "N-7", Kind: queue.LinkKinds[int(pick>>2)%len(queue.LinkKinds)], Why: why}
	if pick&0x80 != 0 {
		l.To = "note_01M72NHSJC5EHS8HW2TWT1H8P5"
	}
	if pick&0x40 != 0 {
		l.Trust = queue.TrustUnvetted
	}
	return l
}

// linksText is what follows links: in a note, up to its closing line, or
// "" when it has no links key.
func linksText(raw []byte) string {
	s := strings.ReplaceAll(strings.TrimPrefix(string(raw), "\xEF\xBB\xBF"), "\r\n", "\n")
	_, s, ok := strings.Cut(s, "\nlinks:")
	if !ok {
		return ""
	}
	for _, end := range []string{"\n---\n", "\n...\n", "\n---", "\n..."} {
		if i := strings.Index(s, end); i >= 0 {
			return s[:i+1]
		}
	}
	return s
}

// FuzzNoteLinks: whatever text follows links:, and whatever the why of the
// new link, ParseNote never panics and refuses with a *ParseError; AddLink
// refuses what ParseNote refuses; and on a note that parses, AddLink
// either refuses or returns bytes that parse to the same note with the
// new link last, made by inserting one span that holds the link (or by
// replacing a null links value with a list). A why that is valid UTF-8 is
// always added to a note FormatNote wrote. testdata/fuzz/FuzzNoteLinks
// holds the crashers found so far.
func FuzzNoteLinks(f *testing.F) {
	for _, p := range noteCorpusFiles(f) {
		f.Add(linksText(readFile(f, p)), corpusLink.Why, uint8(0))
	}
	for _, s := range []string{
		"", " []", " ~", " null # c", " !!null", " !!seq [{to: N-2, kind: chose}]", " [\n]",
		" [{to: N-2, kind: chose, why: it's}]",
		" [{to: N-2, kind: chose}, ]",
		" [\n# ]\n  {to: N-2, kind: chose}]",
		"\n  - {to: N-2, kind: chose}\n# top\n",
		"\n  - to: N-2\n    kind: chose\n    why: |+\n      text\n\n",
		"\n  -\n    to: N-2\n    kind: chose\n",
		"\n    -\n      to: N-2\n      kind: chose\n",
		"\n  - {to: N-2, kind: chose}\nauthor: 'x ]'\n",
		" {to: N-2, kind: chose}", " N-2", " [{to: N-2, kind: chose, x: &a [*a]}]",
		"\n<<<<<<< a\n  - {to: N-2, kind: chose}\n=======\n>>>>>>> b\n",
	} {
		f.Add(s, "why", uint8(0))
		f.Add(s, `"\ # ] } , é`+"\n", uint8(3))
	}
	f.Add(" [{to: N-2, kind: chose, why: it's}, {to: N-7, kind: took_from}]\nauthor: 'T ]]'\n", "", uint8(0))
	canonical := codec.FormatNote(&queue.Note{Key: "N-1", Type: "decision", Title: "T", Trust: queue.TrustVetted,
		Created: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC), Links: []queue.Link{{To: "N-2", Kind: "chose", Why: "first"}}})

	f.Fuzz(func(t *testing.T, links, why string, pick uint8) {
		raw := fuzzNote(links, pick)
		l := fuzzLink(why, pick)
		orig := bytes.Clone(raw)
		before, perr := codec.ParseNote(raw)
		out, err := codec.AddLink(raw, l)
		if !bytes.Equal(raw, orig) {
			t.Fatal("ParseNote or AddLink modified its input")
		}
		if perr != nil {
			var pe *codec.ParseError
			if !errors.As(perr, &pe) {
				t.Fatalf("ParseNote: %v (%T), want a *ParseError", perr, perr)
			}
			if err == nil || err.Error() != perr.Error() {
				t.Fatalf("AddLink on a note ParseNote refuses (%v): %q, %v", perr, out, err)
			}
			return
		}
		if before.Body == nil || !bytes.HasSuffix(raw, before.Body) {
			t.Fatalf("Body %q is not the end of the file", before.Body)
		}
		if err == nil {
			if problem := addLinkProblem(raw, out, l); problem != nil {
				t.Fatalf("AddLink(%q, %+v): %v\noutput %q", raw, l, problem, out)
			}
			item := codec.FormatLink(l)
			if _, ok := insertion(raw, out, item); !ok && !(len(before.Links) == 0 && replacedNull(raw, out, item)) {
				t.Fatalf("AddLink changed more than it inserted:\ninput  %q\noutput %q", raw, out)
			}
		}

		if !utf8.ValidString(why) {
			return
		}
		out, err = codec.AddLink(canonical, l)
		if err != nil {
			t.Fatalf("AddLink refused %+v on a note FormatNote wrote: %v", l, err)
		}
		if problem := addLinkProblem(canonical, out, l); problem != nil {
			t.Fatalf("AddLink(FormatNote, %+v): %v\noutput %q", l, problem, out)
		}
	})
}
