package codec_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/taskfs"
)

// hostileFile is a file the codec must refuse, and how.
type hostileFile struct {
	name     string
	raw      string
	line     int      // want ParseError.Line
	field    string   // want ParseError.Field
	msg      []string // ParseError.Msg contains each
	conflict bool
	value    bool // a bad field value: Edit still edits it (snag doctor --fix does)
}

// hostileFiles are the X9 inputs, and the other ways a task file can be
// wrong: each with the line, field and message Parse must give.
func hostileFiles() []hostileFile {
	head := "---\n" + minimal // the frontmatter's lines 1-5
	big := func(n int) string {
		return strings.Repeat("# filler filler filler filler filler filler filler\n", n/52+1)
	}
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	laughs := "lol0: &l0 [lol]\n"
	for i := 1; i <= 9; i++ {
		laughs += "lol" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [" +
			strings.TrimSuffix(strings.Repeat("*l"+string(rune('0'+i-1))+", ", 10), ", ") + "]\n"
	}
	return []hostileFile{
		{name: "empty file", raw: "", msg: []string{"empty file", "snag add"}},
		{name: "only a BOM", raw: "\xEF\xBB\xBF", msg: []string{"empty file"}},
		{name: "no frontmatter", raw: "# A task\n\nstatus: open\n", line: 1, msg: []string{"no frontmatter", "first line must be exactly ---"}},
		{name: "indented opening line", raw: " ---\n" + minimal + "---\n", line: 1, msg: []string{"no frontmatter"}},
		{name: "opening line alone", raw: "---", line: 1, msg: []string{"no frontmatter"}},
		{name: "not closed", raw: head + "body without a closing line\n", msg: []string{"not closed", "add a line ---"}},
		{name: "empty frontmatter", value: true, raw: "---\n---\nbody\n", field: "id", msg: []string{"missing", "snag doctor --fix"}},
		{name: "comments only", value: true, raw: "---\n# nothing\n---\n", field: "id", msg: []string{"missing"}},
		{name: "invalid YAML, flow sequence not closed", raw: head + "labels: [a, b\n---\n", line: 6, msg: []string{"invalid YAML", "did not find expected ',' or ']'"}},
		{name: "invalid YAML, flow mapping not closed", raw: head + "meta: {a: 1\n---\n", line: 6, msg: []string{"invalid YAML"}},
		{name: "invalid YAML, mapping value in a plain value", raw: "---\nid: " + testID + "\nkey: SNAG-1\ntitle: a: b\nstatus: open\n---\n", line: 4, msg: []string{"invalid YAML", "mapping values"}},
		{name: "invalid YAML, stray indentation", raw: head + "  wave: 2\n---\n", line: 6, msg: []string{"invalid YAML"}},
		{name: "invalid YAML, unterminated quote", raw: head + "plan: \"checkout\n---\n", line: 6, msg: []string{"invalid YAML"}},
		{name: "invalid YAML, block entry without a key", raw: head + "plan: x\n- a\n---\n", line: 7, msg: []string{"invalid YAML", "did not find expected key"}},
		{name: "frontmatter over 64 KiB", raw: head + big(100<<10) + "---\n", msg: []string{"larger than 64 KiB", "move long text into the body"}},
		// Invalid YAML at the top of an oversized frontmatter: the size
		// error, not a YAML error, shows the limit is checked first.
		{name: "frontmatter over 64 KiB is not decoded", raw: "---\nlabels: [a, *b, !!binary c, &d\n" + big(100<<10) + "---\n", msg: []string{"64 KiB"}},
		{name: "frontmatter of 2 MB", raw: head + big(2<<20) + "---\n", msg: []string{"over the 1 MiB limit"}},
		{name: "file of 10 MB", raw: head + "---\n" + big(10<<20), msg: []string{"over the 1 MiB limit", "move attachments"}},
		{name: "unclosed frontmatter of 2 MB", raw: head + big(2<<20), msg: []string{"limit"}},
		{name: "billion laughs", raw: head + laughs + "---\n", line: 6, msg: []string{"anchor &l0 is not allowed"}},
		{name: "alias without anchor", raw: head + "x: *nothing\n---\n", msg: []string{"invalid YAML", "anchor"}},
		{name: "anchor alone", raw: head + "x: &a 1\n---\n", line: 6, msg: []string{"anchor &a is not allowed", "write values out"}},
		{name: "merge key", raw: head + "x:\n  <<: {plan: y}\n---\n", line: 7, msg: []string{"merge key << is not allowed"}},
		{name: "merge key at the top", raw: head + "<<: {plan: y}\n---\n", line: 6, msg: []string{"merge key"}},
		{name: "custom tag", raw: head + "x: !foo bar\n---\n", line: 6, msg: []string{"tag !foo is not allowed", "remove it"}},
		{name: "binary tag", raw: head + "x: !!binary aGVsbG8=\n---\n", line: 6, msg: []string{"tag !!binary is not allowed"}},
		{name: "python tag", raw: head + "x: !!python/object:os.system {}\n---\n", line: 6, msg: []string{"tag !!python/object:os.system is not allowed"}},
		{name: "set tag", raw: head + "x: !!set {a}\n---\n", line: 6, msg: []string{"tag !!set is not allowed"}},
		{name: "tag on a key", raw: head + "!foo x: 1\n---\n", line: 6, msg: []string{"tag !foo is not allowed"}},
		{name: "tag on status", raw: "---\nid: " + testID + "\nkey: SNAG-1\ntitle: t\nstatus: !open open\n---\n", line: 5, msg: []string{"tag !open is not allowed"}},
		{name: "duplicate key", raw: head + "status: claimed\n---\n", line: 6, field: "status", msg: []string{"duplicate key (first on line 5)", "keep one"}},
		{name: "duplicate nested key", raw: head + "capture:\n  url: a\n  url: b\n---\n", line: 8, field: "url", msg: []string{"duplicate key (first on line 7)"}},
		{name: "complex key", raw: head + "? [a]\n: b\n---\n", line: 6, msg: []string{"complex mapping keys"}},
		{name: "1,000-deep flow nesting", raw: head + "x: " + nest(1000) + "\n---\n", line: 6, msg: []string{"nested more than 20 levels", "flatten it"}},
		{name: "1,000-deep block sequence", raw: head + "x:\n  " + strings.Repeat("- ", 1000) + "x\n---\n", line: 7, msg: []string{"nested more than 20 levels"}},
		{name: "1,000-deep mapping in flow", raw: head + "x: " + strings.Repeat("{a: ", 1000) + "1" + strings.Repeat("}", 1000) + "\n---\n", line: 6, msg: []string{"nested more than 20 levels"}},
		{name: "invalid UTF-8 in the title", raw: "---\nid: " + testID + "\nkey: SNAG-1\ntitle: caf\xe9\nstatus: open\n---\n", line: 4, msg: []string{"not valid UTF-8", "save it as UTF-8"}},
		{name: "invalid UTF-8 in the body", raw: head + "---\nline 7\n\xff\n", line: 8, msg: []string{"not valid UTF-8"}},
		{name: "NUL in the frontmatter", raw: head + "plan: a\x00b\n---\n", line: 6, msg: []string{"NUL byte"}},
		{name: "NUL in the body", raw: head + "---\n\x00", line: 7, msg: []string{"NUL byte"}},
		{name: "missing id", value: true, raw: "---\nkey: SNAG-1\ntitle: t\nstatus: open\n---\n", field: "id", msg: []string{"missing", "snag doctor --fix adds one"}},
		{name: "missing key", value: true, raw: "---\nid: " + testID + "\ntitle: t\nstatus: open\n---\n", field: "key", msg: []string{"missing", "key: SNAG-12"}},
		{name: "missing title", value: true, raw: "---\nid: " + testID + "\nkey: SNAG-1\nstatus: open\n---\n", field: "title", msg: []string{"missing", "add a title line"}},
		{name: "missing status", value: true, raw: "---\nid: " + testID + "\nkey: SNAG-1\ntitle: t\n---\n", field: "status", msg: []string{"missing", "status: open"}},
		{name: "unknown status", value: true, raw: "---\nid: " + testID + "\nkey: SNAG-1\ntitle: t\nstatus: opne\n---\n", line: 5, field: "status",
			msg: []string{`unknown value "opne"`, "want one of inbox, open, claimed, verifying, needs_review, resolved, cancelled"}},
		{name: "empty status", value: true, raw: "---\nid: " + testID + "\nkey: SNAG-1\ntitle: t\nstatus:\n---\n", line: 5, field: "status", msg: []string{`unknown value ""`}},
		{name: "unknown severity", value: true, raw: head + "severity: urgent\n---\n", line: 6, field: "severity", msg: []string{"want one of critical, high, medium, low"}},
		{name: "unknown trust", value: true, raw: head + "trust: maybe\n---\n", line: 6, field: "trust", msg: []string{"want one of vetted, unvetted"}},
		{name: "unknown kind", value: true, raw: head + "kind: epic\n---\n", line: 6, field: "kind", msg: []string{"want one of bug, ux"}},
		{name: "status as a list", value: true, raw: "---\nid: " + testID + "\nkey: SNAG-1\ntitle: t\nstatus: [open]\n---\n", line: 5, field: "status", msg: []string{"want a single value"}},
		{name: "bad id", value: true, raw: "---\nid: tsk_123\nkey: SNAG-1\ntitle: t\nstatus: open\n---\n", line: 2, field: "id", msg: []string{`"tsk_123" is not an id`, "snag doctor --fix"}},
		{name: "bad key", value: true, raw: "---\nid: " + testID + "\nkey: SNAG-01\ntitle: t\nstatus: open\n---\n", line: 3, field: "key", msg: []string{"not an alias", "SNAG-12"}},
		{name: "empty title", value: true, raw: "---\nid: " + testID + "\nkey: SNAG-1\ntitle: \"  \"\nstatus: open\n---\n", line: 4, field: "title", msg: []string{"empty: give the task a title"}},
		{name: "title with a control character", value: true, raw: "---\nid: " + testID + "\nkey: SNAG-1\ntitle: \"a\\x1bb\"\nstatus: open\n---\n", line: 4, field: "title", msg: []string{"control character"}},
		{name: "title with a line break", value: true, raw: "---\nid: " + testID + "\nkey: SNAG-1\ntitle: \"a\\nb\"\nstatus: open\n---\n", line: 4, field: "title", msg: []string{"keep the title on one line"}},
		{name: "negative wave", value: true, raw: head + "wave: -1\n---\n", line: 6, field: "wave", msg: []string{"whole number"}},
		{name: "wave as a word", value: true, raw: head + "wave: two\n---\n", line: 6, field: "wave", msg: []string{`not "two"`}},
		{name: "verified as yes", value: true, raw: head + "verified: yes\n---\n", line: 6, field: "verified", msg: []string{"want true or false"}},
		{name: "created not a time", value: true, raw: head + "created: yesterday\n---\n", line: 6, field: "created", msg: []string{"not a time", "RFC 3339"}},
		{name: "depends_on not a ref", value: true, raw: head + "depends_on: [SNAG-2, the login task]\n---\n", line: 6, field: "depends_on", msg: []string{`"the login task" is not a task id or alias`}},
		{name: "depends_on a mapping", value: true, raw: head + "depends_on: {a: b}\n---\n", line: 6, field: "depends_on", msg: []string{"want a list"}},
		{name: "suspect file outside the repo", value: true, raw: head + "suspect_files: [../../etc/passwd]\n---\n", line: 6, field: "suspect_files", msg: []string{"leaves the repository"}},
		{name: "suspect file absolute", value: true, raw: head + "suspect_files:\n  - {path: /etc/passwd}\n---\n", line: 7, field: "suspect_files", msg: []string{"is absolute"}},
		{name: "suspect file windows drive", value: true, raw: head + "suspect_files: ['C:\\Windows\\win.ini']\n---\n", line: 6, field: "suspect_files", msg: []string{"is absolute"}},
		{name: "suspect lines backwards", value: true, raw: head + "suspect_files: [{path: a.go, lines: [9, 3]}]\n---\n", line: 6, field: "suspect_files", msg: []string{"runs backwards"}},
		{name: "screenshot outside .snag", value: true, raw: head + "capture: {screenshots: [../../../home/u/.ssh/id_rsa]}\n---\n", line: 6, field: "capture.screenshots", msg: []string{"must be a path inside .snag/"}},
		{name: "text after an indented mapping", raw: "---\n  id: " + testID + "\n  key: SNAG-1\n  title: t\n  status: open\nstatus: claimed\n---\n", line: 6,
			msg: []string{"text after the end of the key: value lines", "indent it like the keys above"}},
		{name: "junk after an indented mapping", raw: "---\n  id: " + testID + "\n  key: SNAG-1\n  title: t\n  status: open\n0\n---", line: 6, msg: []string{"text after the end"}},
		{name: "a second YAML document", raw: head + "--- second\n---\n", line: 6, msg: []string{"a second YAML document", "keep the frontmatter to one"}},
		{name: "a document end marker with a comment, then more", raw: head + "... # end\nplan: x\n---\n", line: 7, msg: []string{"text after the end"}},
		{name: "frontmatter a list", raw: "---\n- a\n- b\n---\n", line: 2, msg: []string{"must be key: value lines"}},
		{name: "frontmatter a word", raw: "---\nhello\n---\n", line: 2, msg: []string{"must be key: value lines"}},
		{name: "lone CR in the frontmatter", raw: "---\nid: " + testID + "\nkey: SNAG-1\ntitle: t\rstatus: open\n---\n", line: 4, msg: []string{"line break", "U+000D"}},
		{name: "U+2028 in the frontmatter", raw: head + "plan: a\u2028b\n---\n", line: 6, msg: []string{"U+2028"}},
		{name: "U+2029 in a quoted value", raw: head + "plan: 'a\u2029b'\n---\n", line: 6, msg: []string{"U+2029"}},
		{name: "NEL in the frontmatter", raw: head + "plan: \u0085\n---\n", line: 6, msg: []string{"U+0085"}},
		{name: "git conflict markers", conflict: true, line: 5, msg: []string{"conflict markers", "resolve the merge"},
			raw: "---\nid: " + testID + "\nkey: SNAG-1\ntitle: t\n<<<<<<< HEAD\nstatus: claimed\n=======\nstatus: open\n>>>>>>> main\n---\n"},
		{name: "diff3 conflict markers in the body", conflict: true, line: 7, msg: []string{"conflict markers"},
			raw: head + "---\n<<<<<<< ours\na\n||||||| base\nb\n=======\nc\n>>>>>>> theirs\n"},
		{name: "conflict markers with CRLF", conflict: true, line: 2, msg: []string{"conflict markers"},
			raw: "---\r\n<<<<<<< HEAD\r\nid: x\r\n=======\r\nid: y\r\n>>>>>>> b\r\n---\r\n"},
	}
}

// TestX9_HostileYAML holds the codec to DESIGN section 3's defensive rules:
// every bad file yields a *ParseError that names the line, the field and the
// fix; Parse never panics; and Edit refuses the same file, so it is never
// rewritten.
func TestX9_HostileYAML(t *testing.T) {
	for _, tt := range hostileFiles() {
		t.Run(tt.name, func(t *testing.T) {
			raw := []byte(tt.raw)
			orig := bytes.Clone(raw)
			tk, err := codec.Parse(raw)
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", tk)
			}
			pe := asParseError(t, err)
			if pe.Line != tt.line || pe.Field != tt.field || pe.Conflict != tt.conflict {
				t.Errorf("Parse: line %d, field %q, conflict %v; want line %d, field %q, conflict %v (%v)",
					pe.Line, pe.Field, pe.Conflict, tt.line, tt.field, tt.conflict, err)
			}
			for _, m := range tt.msg {
				if !strings.Contains(pe.Msg, m) {
					t.Errorf("Parse: message %q does not contain %q", pe.Msg, m)
				}
			}
			if !strings.Contains(pe.Msg, ": ") && !strings.Contains(pe.Msg, "want ") && !strings.Contains(pe.Msg, "like ") {
				t.Errorf("Parse: message %q names no fix (want `problem: fix`, `(want ...)` or `like ...`)", pe.Msg)
			}
			if len(pe.Error()) > 400 {
				t.Errorf("Parse: error is %d bytes long; it should quote little of the file", len(pe.Error()))
			}
			if !bytes.Equal(raw, orig) {
				t.Error("Parse modified its input")
			}
			out, eerr := codec.Edit(raw, codec.Set("assignee", "VESPER"))
			if tt.value {
				if eerr != nil {
					t.Errorf("Edit refused a file whose frontmatter reads safely: %v", eerr)
				}
				return
			}
			if eerr == nil {
				t.Fatalf("Edit rewrote a file Parse refuses:\n%q", out)
			}
			if epe := asParseError(t, eerr); epe.Conflict != tt.conflict {
				t.Errorf("Edit: conflict = %v, want %v", epe.Conflict, tt.conflict)
			}
		})
	}
}

// TestX9_EditRefusesWhatParseRefusesToRead pins the split of duties: Edit
// refuses any file whose frontmatter cannot be read safely, but does not
// judge field values, so snag doctor --fix can give a file its missing id.
func TestX9_EditRefusesWhatParseRefusesToRead(t *testing.T) {
	raw := []byte("---\nkey: SNAG-1\ntitle: t\nstatus: open\n---\nbody\n")
	got := mustEdit(t, raw, codec.Set("id", testID))
	want := "---\nkey: SNAG-1\ntitle: t\nstatus: open\nid: " + testID + "\n---\nbody\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("Edit (-want +got):\n%s", diff)
	}
	mustParse(t, got)
}

// TestX9_BoundedMemory: refusing a hostile file costs memory in proportion to
// the limits, not to the file or to what its YAML would expand to. (Memory,
// not time: tests never assert a duration.)
func TestX9_BoundedMemory(t *testing.T) {
	const budget = 4 << 20 // bytes allocated by one Parse of a hostile file
	for _, h := range hostileFiles() {
		raw := []byte(h.raw)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := codec.Parse(raw)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatalf("%s: parsed", h.name)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > budget {
			t.Errorf("%s: Parse of %d bytes allocated %d bytes, over %d", h.name, len(raw), n, budget)
		}
	}
}

// TestX9_HostileFilesInAProject: hostile files sit among good ones in a real
// tasks folder. Each good file still reads and parses, each hostile one is
// refused with its own error, and an attempt to edit it leaves it untouched.
func TestX9_HostileFilesInAProject(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".snag", "tasks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := taskfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	good := map[string][]byte{}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("SNAG-%d - Good.md", i)
		good[name] = codec.Format(&queue.Task{ID: queue.NewID(time.Now()), Key: queue.Alias(i), Title: "Good",
			Status: queue.StatusInbox, Trust: queue.TrustUnvetted, Severity: queue.SeverityLow, Kind: queue.KindBug,
			Wave: 1, Body: []byte("body\n")})
		writeFile(t, filepath.Join(dir, name), good[name])
	}
	bad := map[string]hostileFile{}
	for i, h := range hostileFiles() {
		if h.value {
			continue
		}
		name := fmt.Sprintf("SNAG-%d - Hostile.md", 100+i)
		bad[name] = h
		writeFile(t, filepath.Join(dir, name), []byte(h.raw))
	}
	entries, err := d.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(good)+len(bad) {
		t.Fatalf("List found %d files, want %d", len(entries), len(good)+len(bad))
	}
	parsed := 0
	for _, e := range entries {
		if e.Problem != nil {
			t.Errorf("%s: %v", e.Name, e.Problem)
			continue
		}
		data, _, err := d.Read(e.Name)
		if err != nil {
			t.Fatalf("Read(%q): %v", e.Name, err)
		}
		_, perr := codec.Parse(data)
		if want, ok := good[e.Name]; ok {
			if perr != nil || !bytes.Equal(data, want) {
				t.Errorf("%s: a good file next to hostile ones: %v", e.Name, perr)
			}
			parsed++
			continue
		}
		h := bad[e.Name]
		if perr == nil {
			t.Errorf("%s (%s): parsed", e.Name, h.name)
			continue
		}
		if msg := codec.WithPath(perr, "tasks/"+e.Name).Error(); !strings.HasPrefix(msg, "parse tasks/"+e.Name+": ") {
			t.Errorf("%s: error %q does not name the file", e.Name, msg)
		}
		before, _ := os.Stat(filepath.Join(dir, e.Name))
		_, _, uerr := d.Update(e.Name, func(cur []byte) ([]byte, error) {
			return codec.Edit(cur, codec.Set("status", queue.StatusClaimed))
		})
		if uerr == nil {
			t.Errorf("%s (%s): Update edited it", e.Name, h.name)
		}
		after, _ := os.Stat(filepath.Join(dir, e.Name))
		if got := readFile(t, filepath.Join(dir, e.Name)); !bytes.Equal(got, []byte(h.raw)) || !os.SameFile(before, after) {
			t.Errorf("%s (%s): the file was rewritten", e.Name, h.name)
		}
	}
	if parsed != len(good) {
		t.Errorf("%d good files parsed, want %d", parsed, len(good))
	}
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if strings.HasSuffix(de.Name(), taskfs.TempSuffix) {
			t.Errorf("temp file left behind: %s", de.Name())
		}
	}
}

// writeFile puts a file at path, failing the test when it cannot.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
