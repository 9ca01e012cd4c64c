package codec_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
)

// TestS5_EditExactBytes pins, byte for byte, what Edit writes for the edits
// snag makes: only the changed value tokens move; quoting, comments, line
// endings, indentation and everything else stay as they were.
func TestS5_EditExactBytes(t *testing.T) {
	when := time.Date(2026, 12, 24, 9, 30, 0, 0, time.UTC)
	const id = "id: " + testID + "\n"
	tests := []struct {
		name   string
		in     string
		fields []codec.Field
		want   string
	}{
		{
			name:   "plain token",
			in:     "---\n" + minimal + "---\nbody\n",
			fields: []codec.Field{codec.Set("status", queue.StatusClaimed)},
			want:   "---\n" + strings.Replace(minimal, "status: open", "status: claimed", 1) + "---\nbody\n",
		},
		{
			name:   "double quoted token keeps its quotes",
			in:     "---\n" + id + "key: SNAG-1\ntitle: t\nstatus: \"open\"\n---\n",
			fields: []codec.Field{codec.Set("status", queue.StatusClaimed)},
			want:   "---\n" + id + "key: SNAG-1\ntitle: t\nstatus: \"claimed\"\n---\n",
		},
		{
			name:   "single quoted token keeps its quotes",
			in:     "---\n" + id + "key: SNAG-1\ntitle: t\nstatus: 'open'\n---\n",
			fields: []codec.Field{codec.Set("status", queue.StatusClaimed)},
			want:   "---\n" + id + "key: SNAG-1\ntitle: t\nstatus: 'claimed'\n---\n",
		},
		{
			name:   "single quoted value escapes a quote the YAML way",
			in:     "---\n" + id + "key: SNAG-1\ntitle: 'old'\nstatus: open\n---\n",
			fields: []codec.Field{codec.Set("title", "it's new")},
			want:   "---\n" + id + "key: SNAG-1\ntitle: 'it''s new'\nstatus: open\n---\n",
		},
		{
			name:   "double quoted value with escapes inside is replaced whole",
			in:     "---\n" + id + "key: SNAG-1\ntitle: \"a \\\"b\\\" c\" # note\nstatus: open\n---\n",
			fields: []codec.Field{codec.Set("title", `say "hi"`)},
			want:   "---\n" + id + "key: SNAG-1\ntitle: \"say \\\"hi\\\"\" # note\nstatus: open\n---\n",
		},
		{
			name:   "tagged quoted value replaced whole",
			in:     "---\n" + id + "key: SNAG-1\ntitle: t\nstatus: !!str \"open\" # tagged\nwave: 2\n---\n",
			fields: []codec.Field{codec.Set("status", queue.StatusClaimed)},
			want:   "---\n" + id + "key: SNAG-1\ntitle: t\nstatus: claimed\nwave: 2\n---\n",
		},
		{
			name:   "value behind a non-specific ! tag replaced whole",
			in:     "---\n" + id + "key: SNAG-1\ntitle: t\nstatus: ! \"open\"\nassignee: !\n---\n",
			fields: []codec.Field{codec.Set("status", queue.StatusClaimed), codec.Set("assignee", "VESPER")},
			want:   "---\n" + id + "key: SNAG-1\ntitle: t\nstatus: claimed\nassignee: VESPER\n---\n",
		},
		{
			name:   "quoted time keeps its quotes",
			in:     "---\n" + minimal + "updated: '2026-11-11T15:12:00Z'\n---\n",
			fields: []codec.Field{codec.Set("updated", when)},
			want:   "---\n" + minimal + "updated: '2026-12-24T09:30:00Z'\n---\n",
		},
		{
			name:   "trailing comment kept",
			in:     "---\n" + id + "key: SNAG-1\ntitle: t\nstatus: open   # changed by snag\n---\n",
			fields: []codec.Field{codec.Set("status", queue.StatusNeedsReview)},
			want:   "---\n" + id + "key: SNAG-1\ntitle: t\nstatus: needs_review   # changed by snag\n---\n",
		},
		{
			name:   "tab before a trailing comment kept",
			in:     "---\n" + id + "key: SNAG-1\ntitle: t\nstatus: open\t# tab\n---\n",
			fields: []codec.Field{codec.Set("status", queue.StatusClaimed)},
			want:   "---\n" + id + "key: SNAG-1\ntitle: t\nstatus: claimed\t# tab\n---\n",
		},
		{
			name:   "value after a multi-byte key and value",
			in:     "---\n" + minimal + "prénom: Zoë # ë\n---\n",
			fields: []codec.Field{codec.Set("prénom", "Ana")},
			want:   "---\n" + minimal + "prénom: Ana # ë\n---\n",
		},
		{
			name:   "missing key appended before the closing line",
			in:     "---\n" + minimal + "# last comment\n---\nbody\n",
			fields: []codec.Field{codec.Set("assignee", "VESPER")},
			want:   "---\n" + minimal + "# last comment\nassignee: VESPER\n---\nbody\n",
		},
		{
			name:   "missing key appended with CRLF in a CRLF file",
			in:     "---\r\nid: " + testID + "\r\nkey: SNAG-1\r\ntitle: t\r\nstatus: open\r\n---\r\nbody\r\n",
			fields: []codec.Field{codec.Set("status", queue.StatusClaimed), codec.Set("assignee", "VESPER")},
			want:   "---\r\nid: " + testID + "\r\nkey: SNAG-1\r\ntitle: t\r\nstatus: claimed\r\nassignee: VESPER\r\n---\r\nbody\r\n",
		},
		{
			name:   "missing key appended before a ... closing line",
			in:     "---\n" + minimal + "...\nbody\n",
			fields: []codec.Field{codec.Set("assignee", "VESPER")},
			want:   "---\n" + minimal + "assignee: VESPER\n...\nbody\n",
		},
		{
			name:   "missing key appended when the closing line is the last byte",
			in:     "---\n" + minimal + "---",
			fields: []codec.Field{codec.Set("assignee", "VESPER")},
			want:   "---\n" + minimal + "assignee: VESPER\n---",
		},
		{
			name:   "missing key appended with the mapping's indentation",
			in:     "---\n  id: " + testID + "\n  key: SNAG-1\n  title: t\n  status: open\n---\n",
			fields: []codec.Field{codec.Set("assignee", "VESPER")},
			want:   "---\n  id: " + testID + "\n  key: SNAG-1\n  title: t\n  status: open\n  assignee: VESPER\n---\n",
		},
		{
			name:   "missing key appended at column 0 after an explicit ? key",
			in:     "---\n? id\n: " + testID + "\nkey: SNAG-1\ntitle: t\nstatus: open\n---\n",
			fields: []codec.Field{codec.Set("assignee", "VESPER")},
			want:   "---\n? id\n: " + testID + "\nkey: SNAG-1\ntitle: t\nstatus: open\nassignee: VESPER\n---\n",
		},
		{
			name:   "several missing keys appended in the order given",
			in:     "---\n" + minimal + "---\n",
			fields: []codec.Field{codec.Set("assignee", "VESPER"), codec.Set("updated", when), codec.Set("verified", true)},
			want:   "---\n" + minimal + "assignee: VESPER\nupdated: 2026-12-24T09:30:00Z\nverified: true\n---\n",
		},
		{
			name:   "BOM kept",
			in:     "\xEF\xBB\xBF---\n" + minimal + "---\n",
			fields: []codec.Field{codec.Set("status", queue.StatusClaimed)},
			want:   "\xEF\xBB\xBF---\n" + strings.Replace(minimal, "open", "claimed", 1) + "---\n",
		},
		{
			name:   "empty assignee filled in after the colon",
			in:     "---\n" + minimal + "assignee:\nwave: 2\n---\n",
			fields: []codec.Field{codec.Set("assignee", "VESPER")},
			want:   "---\n" + minimal + "assignee: VESPER\nwave: 2\n---\n",
		},
		{
			name:   "empty assignee with a comment filled in after the colon",
			in:     "---\r\n" + strings.ReplaceAll(minimal, "\n", "\r\n") + "assignee:   # who holds it\r\n---\r\n",
			fields: []codec.Field{codec.Set("assignee", "VESPER")},
			want:   "---\r\n" + strings.ReplaceAll(minimal, "\n", "\r\n") + "assignee: VESPER   # who holds it\r\n---\r\n",
		},
		{
			name:   "folded multi-line value replaced by one line",
			in:     "---\n" + id + "key: SNAG-1\ntitle: >-\n  A folded\n  title\nstatus: open\n---\n",
			fields: []codec.Field{codec.Set("title", "One line")},
			want:   "---\n" + id + "key: SNAG-1\ntitle: One line\nstatus: open\n---\n",
		},
		{
			name:   "plain value continued on the next line replaced by one line",
			in:     "---\n" + id + "key: SNAG-1\ntitle: A plain\n  continued title\nstatus: open\n---\n",
			fields: []codec.Field{codec.Set("title", "One line")},
			want:   "---\n" + id + "key: SNAG-1\ntitle: One line\nstatus: open\n---\n",
		},
		{
			name:   "value on the line below its key replaced by one line",
			in:     "---\n" + minimal + "plan:\n  checkout-revamp\nwave: 2\n---\n",
			fields: []codec.Field{codec.Set("plan", "search")},
			want:   "---\n" + minimal + "plan: search\nwave: 2\n---\n",
		},
		{
			name:   "block list replaced by one line, comment above the next key kept",
			in:     "---\n" + minimal + "assignee:\n  - VESPER\n  - ORCA\n\n# the wave\nwave: 2\n---\n",
			fields: []codec.Field{codec.Set("assignee", "dana")},
			want:   "---\n" + minimal + "assignee: dana\n\n# the wave\nwave: 2\n---\n",
		},
		{
			name:   "unset removes exactly the key's line and keeps the comments above the next key",
			in:     "---\n" + minimal + "assignee: VESPER # holder\n# about the wave\n\nwave: 2\n---\n",
			fields: []codec.Field{codec.Unset("assignee")},
			want:   "---\n" + minimal + "# about the wave\n\nwave: 2\n---\n",
		},
		{
			name:   "unset keeps a comment above its own key",
			in:     "---\n" + minimal + "# who holds it\nassignee: VESPER\nwave: 2\n---\n",
			fields: []codec.Field{codec.Unset("assignee")},
			want:   "---\n" + minimal + "# who holds it\nwave: 2\n---\n",
		},
		{
			name:   "unset removes a multi-line value whole",
			in:     "---\n" + minimal + "assignee:\n  - VESPER\n  # an indented comment belongs to the value\n  - ORCA\nwave: 2\n---\n",
			fields: []codec.Field{codec.Unset("assignee")},
			want:   "---\n" + minimal + "wave: 2\n---\n",
		},
		{
			name:   "unset the last key keeps the comment before the closing line",
			in:     "---\r\n" + strings.ReplaceAll(minimal, "\n", "\r\n") + "assignee: VESPER\r\n# end\r\n---\r\n",
			fields: []codec.Field{codec.Unset("assignee")},
			want:   "---\r\n" + strings.ReplaceAll(minimal, "\n", "\r\n") + "# end\r\n---\r\n",
		},
		{
			name:   "unset a key that is not there changes nothing",
			in:     "---\n" + minimal + "---\n",
			fields: []codec.Field{codec.Unset("assignee")},
			want:   "---\n" + minimal + "---\n",
		},
		{
			name:   "values that are not plain-safe are quoted",
			in:     "---\n" + minimal + "plan: a\nassignee: b\n---\n",
			fields: []codec.Field{codec.Set("plan", "yes"), codec.Set("assignee", "a: b # c"), codec.Set("owner", " padded ")},
			want:   "---\n" + minimal + "plan: \"yes\"\nassignee: \"a: b # c\"\nowner: \" padded \"\n---\n",
		},
		{
			name:   "a line separator leaves single quotes for an escape",
			in:     "---\n" + minimal + "assignee: 'x' # c\n---\n",
			fields: []codec.Field{codec.Set("assignee", "a\u2028b")},
			want:   "---\n" + minimal + "assignee: \"a\\u2028b\" # c\n---\n",
		},
		{
			name:   "bool, int and time",
			in:     "---\n" + minimal + "wave: 1\nverified: false\nupdated: 2026-11-11T15:12:00Z # last\n---\n",
			fields: []codec.Field{codec.Set("wave", 3), codec.Set("verified", true), codec.Set("updated", when.In(time.FixedZone("CET", 3600)))},
			want:   "---\n" + minimal + "wave: 3\nverified: true\nupdated: 2026-12-24T09:30:00Z # last\n---\n",
		},
		{
			name: "claim in one edit: replace, fill in and append",
			in:   "---\n" + minimal + "assignee:\n---\n",
			fields: []codec.Field{codec.Set("status", queue.StatusClaimed), codec.Set("assignee", "VESPER"),
				codec.Set("updated", when)},
			want: "---\n" + strings.Replace(minimal, "open", "claimed", 1) + "assignee: VESPER\nupdated: 2026-12-24T09:30:00Z\n---\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustEdit(t, []byte(tt.in), tt.fields...)
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("Edit (-want +got):\n%s", diff)
			}
			if _, err := codec.Parse(got); err != nil {
				t.Errorf("the edited file does not parse: %v", err)
			}
		})
	}
}

// TestS5_SetSameValueIsNoop: setting a key to the value it has returns raw
// itself, for every file of the corpus and the sample project.
func TestS5_SetSameValueIsNoop(t *testing.T) {
	files := append(corpusFiles(t), exampleTaskFiles(t)...)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw := readFile(t, f)
			tk := mustParse(t, raw)
			fields := []codec.Field{codec.Set("status", tk.Status), codec.Set("key", tk.Key)}
			if tk.Assignee != "" {
				fields = append(fields, codec.Set("assignee", tk.Assignee))
			}
			for _, fl := range fields {
				got := mustEdit(t, raw, fl)
				if &got[0] != &raw[0] || len(got) != len(raw) {
					t.Errorf("Set(%q, %q) did not return raw itself:\n%s", fl.Key, fl.Value, cmp.Diff(string(raw), string(got)))
				}
			}
		})
	}
}

func TestEdit_Refusals(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		fields []codec.Field
		want   string
	}{
		{"flow mapping frontmatter", "---\n{id: " + testID + ", key: SNAG-1, title: t, status: open}\n---\n",
			[]codec.Field{codec.Set("status", queue.StatusClaimed)}, "one key per line"},
		{"overlapping changes", "---\n" + minimal + "---\n",
			[]codec.Field{codec.Set("status", queue.StatusClaimed), codec.Unset("status")}, "overlapping changes"},
		{"the same key set twice", "---\n" + minimal + "---\n",
			[]codec.Field{codec.Set("status", queue.StatusClaimed), codec.Set("status", queue.StatusVerifying)}, "overlapping changes to status"},
		{"conflict markers", "---\n<<<<<<< a\n" + minimal + "=======\n" + minimal + ">>>>>>> b\n---\n",
			[]codec.Field{codec.Set("status", queue.StatusClaimed)}, "conflict markers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := codec.Edit([]byte(tt.in), tt.fields...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Edit = %q, %v; want an error containing %q", got, err, tt.want)
			}
		})
	}
	// Parse reads a flow-mapping frontmatter; only Edit refuses it.
	mustParse(t, []byte("---\n{id: "+testID+", key: SNAG-1, title: t, status: open}\n---\n"))
}
