package codec_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
)

// seedFiles adds every sample task and every corpus file to a fuzz target's
// corpus, plus a few hand-picked hostile inputs; testdata/fuzz/<target>
// holds the crashers found so far.
func seedFiles(f *testing.F, add func(raw []byte)) {
	f.Helper()
	for _, p := range append(exampleTaskFiles(f), corpusFiles(f)...) {
		add(readFile(f, p))
	}
	for _, s := range []string{
		"",
		"---\n---\n",
		"---\n" + minimal + "---",
		"---\r\n" + strings.ReplaceAll(minimal, "\n", "\r\n") + "...\r\n",
		"\xEF\xBB\xBF---\n  " + strings.ReplaceAll(strings.TrimSuffix(minimal, "\n"), "\n", "\n  ") + "\n---\nbody",
		"---\n" + minimal + "assignee:   # who\nstatus2: 'it''s'\n---\n",
		"---\nid: " + testID + "\nkey: SNAG-1\ntitle: t\nstatus: !!str \"open\" # c\nassignee: !!null\n---\n",
		"---\n" + minimal + "x: &a [*a]\n---\n",
		"---\n" + minimal + "<<: {a: 1}\n---\n",
		"---\n" + minimal + "x: !!binary aGk=\n---\n",
		"---\n" + minimal + "plan: a\u2028b\n---\n",
		"---\nid: " + testID + "\nkey: SNAG-1\ntitle: t\nstatus: ! 'open'\nassignee: !\n---\n",
		"---\n? id\n: " + testID + "\n? key\n: SNAG-1\ntitle: t\nstatus: open\n---\n",
		"---\n{id: " + testID + ", key: SNAG-1, title: t, status: open}\n---\n",
		"---\n<<<<<<< a\n" + minimal + "=======\n>>>>>>> b\n---\n",
	} {
		add([]byte(s))
	}
}

// FuzzParse: Parse never panics, refuses with a *ParseError, and when it
// succeeds its Body is exactly the bytes after the closing line.
func FuzzParse(f *testing.F) {
	seedFiles(f, func(raw []byte) { f.Add(raw) })
	f.Fuzz(func(t *testing.T, raw []byte) {
		orig := bytes.Clone(raw)
		tk, err := codec.Parse(raw)
		if !bytes.Equal(raw, orig) {
			t.Fatal("Parse modified its input")
		}
		if err != nil {
			var pe *codec.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			return
		}
		start, ok := bodyStart(raw)
		if !ok {
			t.Fatalf("Parse accepted a file the split oracle does not: %q", raw)
		}
		if !bytes.Equal(tk.Body, raw[start:]) {
			t.Fatalf("Body = %q, want the bytes after the closing line %q", tk.Body, raw[start:])
		}
		if !tk.Status.Valid() || !queue.IsID(tk.ID) || tk.Num() <= 0 || strings.TrimSpace(tk.Title) == "" {
			t.Fatalf("Parse accepted an invalid task: %+v", tk)
		}
	})
}

// FuzzEdit: Edit never panics; on a file Parse accepts it changes the status
// and only the status, and changing it back gives the original bytes when
// the file already wrote the status as snag would; a claim and a release
// restore a file that had no assignee.
func FuzzEdit(f *testing.F) {
	seedFiles(f, func(raw []byte) { f.Add(raw, uint8(0)) })
	f.Fuzz(func(t *testing.T, raw []byte, pick uint8) {
		orig := bytes.Clone(raw)
		tk, perr := codec.Parse(raw)
		other := queue.Statuses[int(pick)%len(queue.Statuses)]
		out, err := codec.Edit(raw, codec.Set("status", other))
		if !bytes.Equal(raw, orig) {
			t.Fatal("Edit modified its input")
		}
		if perr != nil {
			var pe *codec.ParseError
			if err == nil && errors.As(perr, &pe) && (pe.Field == "" || pe.Conflict) {
				t.Fatalf("Edit rewrote a file whose frontmatter Parse cannot read (%v)", perr)
			}
			return
		}
		if err != nil {
			var pe *codec.ParseError
			if errors.As(err, &pe) && strings.Contains(pe.Msg, "flow mapping") {
				return // Parse reads {...} frontmatter; Edit edits key: value lines only
			}
			t.Fatalf("Edit refused a file Parse accepts: %v", err)
		}
		got, err := codec.Parse(out)
		if err != nil {
			t.Fatalf("after Set status %s the file does not parse: %v\n%q", other, err, out)
		}
		want := *tk
		want.Status = other
		if diff := cmp.Diff(&want, got, taskFields); diff != "" {
			t.Fatalf("Set status %s changed more than the status (-want +got):\n%s", other, diff)
		}
		if !bytes.Equal(got.Body, tk.Body) {
			t.Fatal("Set status changed the body")
		}

		back, err := codec.Edit(out, codec.Set("status", tk.Status))
		if err != nil {
			t.Fatalf("setting the status back: %v", err)
		}
		if bytes.Equal(mustEdit(t, raw, codec.Set("status", tk.Status)), raw) && !bytes.Equal(back, raw) {
			t.Fatalf("Set status %s then %s did not restore the file:\n%s", other, tk.Status, cmp.Diff(string(raw), string(back)))
		}
		if again := mustEdit(t, mustEdit(t, back, codec.Set("status", other)), codec.Set("status", tk.Status)); !bytes.Equal(again, back) {
			t.Fatalf("a second change and change back is not stable:\n%s", cmp.Diff(string(back), string(again)))
		}

		if bytes.Equal(mustEdit(t, raw, codec.Unset("assignee")), raw) {
			claimed := mustEdit(t, raw, codec.Set("status", queue.StatusClaimed), codec.Set("assignee", holder))
			if c, err := codec.Parse(claimed); err != nil || c.Assignee != holder || c.Status != queue.StatusClaimed {
				t.Fatalf("claim: %v", err)
			}
			released := mustEdit(t, claimed, codec.Set("status", tk.Status), codec.Unset("assignee"))
			if bytes.Equal(mustEdit(t, raw, codec.Set("status", tk.Status)), raw) && !bytes.Equal(released, raw) {
				t.Fatalf("claim then release did not restore the file:\n%s", cmp.Diff(string(raw), string(released)))
			}
		}
	})
}

// FuzzEditValue: whatever string snag writes into a key (an agent's name,
// a plan), and whatever the key's token looked like before (plain, quoted,
// empty, missing), the file parses back to exactly that string.
func FuzzEditValue(f *testing.F) {
	for _, tok := range []string{"assignee: x\n", "assignee: 'x' # c\n", "assignee: \"x\"\n", "assignee:\n", "assignee: |\n  x\n", ""} {
		f.Add([]byte("---\n"+minimal+tok+"---\nbody\n"), "VESPER")
	}
	f.Add([]byte("---\n"+minimal+"assignee: 'x'\n---\n"), "a\u2028b 'q' \"d\" # c: d")
	f.Add([]byte("---\r\n"+strings.ReplaceAll(minimal, "\n", "\r\n")+"assignee: \"x\"\r\n---\r\n"), "\x00\t\u0085 yes")
	f.Fuzz(func(t *testing.T, raw []byte, value string) {
		value = strings.ToValidUTF8(value, "")
		if _, err := codec.Parse(raw); err != nil {
			return
		}
		for _, key := range []string{"assignee", "plan"} {
			out, err := codec.Edit(raw, codec.Set(key, value))
			if err != nil {
				var pe *codec.ParseError
				if errors.As(err, &pe) && strings.Contains(pe.Msg, "flow mapping") {
					return
				}
				t.Fatalf("Set %s %q: %v", key, value, err)
			}
			got, err := codec.Parse(out)
			if err != nil {
				t.Fatalf("Set %s %q: the file does not parse: %v\n%q", key, value, err, out)
			}
			have := got.Assignee
			if key == "plan" {
				have = got.Plan
			}
			if have != value {
				t.Fatalf("Set %s %q: reads back as %q\n%q", key, value, have, out)
			}
		}
	})
}

// FuzzFormat: a task Format writes parses back to the same task. The
// generator keeps to tasks Parse could have produced: valid UTF-8, a title
// with no control characters, whole seconds, a body with no NUL and no
// conflict markers.
func FuzzFormat(f *testing.F) {
	f.Add("Checkout button does nothing on Safari", "checkout-revamp", "VESPER", "web/checkout.ts", int64(1764583200), []byte("body\n"))
	f.Add("yes", "no", "null", "a,b.ts", int64(0), []byte(""))
	f.Add("It's a \"quoted\": title # not a comment", "a: b", " padded ", "web/a}b{c].ts", int64(-1), []byte("---\n...\n"))
	f.Add("Prix affiché deux fois — 价格 🛒 \u202e", "café", "Zoë", "dir/ünï.go", int64(253402300799), []byte("\r\n\t"))
	f.Add("- [x] 12: #3 & *a !b |c >d %e @f `g", "!tag", "&anchor", "*alias", int64(86400), []byte("x"))
	f.Add("line\u2028sep", "\x00\x01", "\u0085", "a\\b", int64(1), []byte("\xff"))
	f.Fuzz(func(t *testing.T, title, plan, assignee, path string, created int64, body []byte) {
		title = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				return -1
			}
			return r
		}, strings.ToValidUTF8(title, ""))
		if strings.TrimSpace(title) == "" {
			title = "untitled"
		}
		plan, assignee = strings.ToValidUTF8(plan, ""), strings.ToValidUTF8(assignee, "")
		body = bytes.ReplaceAll(bytes.ToValidUTF8(body, nil), []byte{0}, nil)
		if bytes.Contains(body, []byte("<<<<<<<")) || len(body) > 64<<10 {
			body = nil
		}
		in := &queue.Task{
			ID: testID, Key: "SNAG-1", Title: title, Status: queue.StatusOpen, Trust: queue.TrustUnvetted,
			Severity: queue.SeverityHigh, Kind: queue.KindUX, Wave: 2, Plan: plan, Assignee: assignee,
			DependsOn: []string{"SNAG-2", testID2},
			Source:    queue.SourceCapture,
			Capture: &queue.Capture{URL: "http://localhost:3000/" + plan, Title: title, UserAgent: plan,
				Viewport: &queue.Viewport{Width: int(1 + abs(created)%4000), Height: int(1 + abs(created)%3000), Scale: float64(1+abs(created)%12) / 4},
				Anchor:   assignee, AnchorText: title, AnchorBox: &queue.Box{X: float64(created%100000) / 8, Y: float64(abs(created) % 7), Width: float64(abs(created)%5000) / 3, Height: 0.1},
				Scroll:        &queue.Point{X: float64(created % 1000), Y: float64(abs(created)%99999) / 4},
				ConsoleErrors: []string{title}, NetworkErrors: []string{"500 GET http://localhost/" + plan},
				Screenshots: []string{"shots/SNAG-1-0.png"}, Crop: "shots/SNAG-1-anchor.png"},
			Verify:   &queue.VerifySpec{Command: "go test ./... # " + plan},
			Verified: created%2 == 0,
			Body:     body,
		}
		if p := safePath(path); p != "" {
			in.SuspectFiles = []queue.FileRef{{Path: p}, {Path: p, Lines: [2]int{3, 9}}}
		}
		if created%3 != 0 {
			const span = 253402300799 - 3600 // years 1970 to 9999, with room for Updated
			sec := (created%span + span) % span
			in.Created = time.Unix(sec, 0).UTC()
			in.Updated = in.Created.Add(time.Hour)
		}
		raw := codec.Format(in)
		got, err := codec.Parse(raw)
		if err != nil {
			t.Fatalf("Parse(Format(t)): %v\n%s", err, raw)
		}
		if diff := cmp.Diff(in, got, taskFields); diff != "" {
			t.Fatalf("Parse(Format(t)) (-want +got):\n%s\n%s", diff, raw)
		}
		if !bytes.Equal(got.Body, body) {
			t.Fatalf("Body = %q, want %q", got.Body, body)
		}
		if !utf8.Valid(raw) {
			t.Fatal("Format wrote invalid UTF-8")
		}
	})
}

func abs(n int64) int64 {
	if n < 0 {
		return -(n + 1) // never overflows
	}
	return n
}

// safePath turns a fuzzed string into a path the codec accepts: relative,
// inside the repository, without control characters or a drive letter.
func safePath(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == ':' || r == '\\' {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	var parts []string
	for _, p := range strings.Split(s, "/") {
		if p != "" && p != "." && p != ".." {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "/")
}
