package codec_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
)

// hardWhys are reasons an agent may give for a link: everything a YAML
// flow mapping or a double-quoted scalar gives a meaning to.
var hardWhys = []string{
	"",
	"plain words",
	`she said "no"`,
	`C:\temp\x and \n written out`,
	"two\nlines\n",
	"tab\there",
	"a\r\nwindows line",
	"# not a comment",
	"see #12",
	"] closes, } closes, and , separates",
	"{to: N-1, kind: chose}",
	"key: value",
	"- a dash",
	"'single' and ''doubled''",
	"  leading and trailing spaces  ",
	"naïve → résumé, 日本語, 🛒, e\u0301",
	"\u202eRTL\u202c and \u200dZWJ",
	"NUL \x00, ESC \x1b, DEL \x7f, C1 \u0085",
	"line and paragraph separators \u2028 \u2029",
	"a BOM \ufeff and a tag \U000E0001",
	"yes", "null", "~", "123", "1e3", "true",
	"...", "---",
	"\\",
	`"`,
	`\"`,
}

// TestS5_NoteFormatRoundTrip: ParseNote(FormatNote(n)) is n, for every
// field, and for links whose why holds anything a person may type.
func TestS5_NoteFormatRoundTrip(t *testing.T) {
	created := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	full := queue.Note{
		ID: "note_01M6KSRJYGY2QAKK1FYX7AYVB1", Key: "N-42", Type: "decision", Title: `Cents, "always": #1 [a] {b}`,
		Branch: "feat/checkout-revamp", Commit: "0123456789abcdef0123456789abcdef01234567", Trust: queue.TrustUnvetted,
		Author: "ORCA \"the\" agent", Created: created, Tasks: []string{"SNAG-3", "SNAG-7"},
		Files: []string{"web/cart.ts", "src/a b.go", "x, y [z].md"},
		Links: []queue.Link{
			{To: "N-1", Kind: "took_from", Why: "the cents rule"},
			{To: "note_01M72NHSJC5EHS8HW2TWT1H8P5", Kind: "rejected", Why: `too "clever"`, Trust: queue.TrustVetted},
			{To: "N-3", Kind: "blocks", Trust: queue.TrustUnvetted},
		},
		Body: []byte("Because.\n---\n...\nlinks: [{to: N-9, kind: chose}]\n"),
	}
	type tc struct {
		name string
		n    queue.Note
	}
	cases := []tc{
		{"every field", full},
		{"the least", queue.Note{Key: "N-1", Type: "goal", Title: "T", Trust: queue.TrustVetted, Created: created}},
		{"one task", queue.Note{Key: "N-2", Type: "action", Title: "T", Trust: queue.TrustVetted, Created: created, Tasks: []string{"SNAG-12"}}},
		{"a CRLF body", queue.Note{Key: "N-3", Type: "outcome", Title: "T", Trust: queue.TrustVetted, Created: created, Body: []byte("a\r\nb\r\n")}},
		{"a created time elsewhere", queue.Note{Key: "N-4", Type: "question", Title: "T", Trust: queue.TrustVetted,
			Created: time.Date(2026, 12, 3, 11, 0, 0, 0, time.FixedZone("CET", 3600))}},
	}
	for _, typ := range queue.NoteTypes {
		cases = append(cases, tc{"type " + typ, queue.Note{Key: "N-5", Type: typ, Title: typ, Trust: queue.TrustVetted, Created: created}})
	}
	for _, s := range []string{"yes", "null", "123", "- dash", "# hash", "a: b", "[x]", "{x}", "'q'", "Ünïcode ☕ 日本語 🛒", "  spaces  ", "a\\b", "...", "---"} {
		cases = append(cases, tc{"title, branch, author, task, file " + s, queue.Note{Key: "N-6", Type: "option", Title: s, Branch: s, Commit: s,
			Author: s, Trust: queue.TrustVetted, Created: created, Tasks: []string{s}, Files: []string{s}}})
	}
	for _, kind := range queue.LinkKinds {
		cases = append(cases, tc{"link kind " + kind, queue.Note{Key: "N-7", Type: "decision", Title: "T", Trust: queue.TrustVetted, Created: created,
			Links: []queue.Link{{To: "N-8", Kind: kind}}}})
	}
	for _, why := range hardWhys {
		cases = append(cases, tc{"why " + why, queue.Note{Key: "N-9", Type: "decision", Title: "T", Trust: queue.TrustVetted, Created: created,
			Links: []queue.Link{{To: "N-1", Kind: "chose", Why: why}, {To: "N-2", Kind: "rejected", Why: why, Trust: queue.TrustUnvetted}}}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := codec.FormatNote(&c.n)
			got, err := codec.ParseNote(raw)
			if err != nil {
				t.Fatalf("ParseNote(FormatNote(n)): %v\n%s", err, raw)
			}
			if diff := cmp.Diff(&c.n, got, noteFields); diff != "" {
				t.Errorf("ParseNote(FormatNote(n)) (-want +got):\n%s\n%s", diff, raw)
			}

			// The link snag adds to a note it wrote goes in as one line of
			// its block list, or as its first list.
			l := queue.Link{To: "N-99", Kind: "relates", Why: "added " + c.name}
			out, err := codec.AddLink(raw, l)
			if err != nil {
				t.Fatalf("AddLink to a note FormatNote wrote: %v\n%s", err, raw)
			}
			if err := addLinkProblem(raw, out, l); err != nil {
				t.Fatal(err)
			}
			ins, ok := insertion(raw, out, codec.FormatLink(l))
			want := "  - " + codec.FormatLink(l) + "\n"
			if len(c.n.Links) == 0 {
				want = "links:\n" + want
			}
			if !ok || ins != want {
				t.Errorf("AddLink inserted %q, want %q", ins, want)
			}
		})
	}
}

// TestS5_NoteFormatDefaults pins what FormatNote does with values it does
// not keep as they are: a created time is written to the second in UTC,
// and a body gets a final newline.
func TestS5_NoteFormatDefaults(t *testing.T) {
	n := queue.Note{Key: "N-1", Type: "goal", Title: "T", Trust: queue.TrustVetted,
		Created: time.Date(2026, 12, 3, 11, 0, 0, 999, time.FixedZone("CET", 3600)), Body: []byte("no newline")}
	raw := string(codec.FormatNote(&n))
	if !strings.Contains(raw, "\ncreated: 2026-12-03T10:00:00Z\n") || !strings.HasSuffix(raw, "---\nno newline\n") {
		t.Errorf("FormatNote:\n%s", raw)
	}
}
