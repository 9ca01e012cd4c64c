package codec

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/queue"
	"go.yaml.in/yaml/v3"
)

// sameNode compares two node trees on everything the codec and the editor
// read: kind, style, tag, value, anchor, position, comments and children.
// It returns where they first differ, or "".
func sameNode(path string, a, b *yaml.Node) string {
	switch {
	case a == nil || b == nil:
		if a != b {
			return fmt.Sprintf("%s: %v against %v", path, a, b)
		}
		return ""
	case a.Kind != b.Kind, a.Style != b.Style, a.Tag != b.Tag, a.Value != b.Value, a.Anchor != b.Anchor,
		a.Line != b.Line, a.Column != b.Column, a.HeadComment != b.HeadComment,
		a.LineComment != b.LineComment, a.FootComment != b.FootComment, a.Alias != b.Alias:
		return fmt.Sprintf("%s: fast %+v, yaml %+v", path, *a, *b)
	case len(a.Content) != len(b.Content):
		return fmt.Sprintf("%s: fast has %d children, yaml %d", path, len(a.Content), len(b.Content))
	}
	for i := range a.Content {
		if d := sameNode(fmt.Sprintf("%s/%d", path, i), a.Content[i], b.Content[i]); d != "" {
			return d
		}
	}
	return ""
}

// parseBothWays parses raw with fastFrontmatter and without it.
func parseBothWays(raw []byte) (fast, slow *queue.Task, fastErr, slowErr error) {
	fast, fastErr = Parse(raw)
	noFastFrontmatter = true
	defer func() { noFastFrontmatter = false }()
	slow, slowErr = Parse(raw)
	return
}

// fastSeeds are task files in the shapes snag writes and shapes near them.
func fastSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, pattern := range []string{"../../.snag-example/tasks/*.md", "testdata/roundtrip/*.md"} {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			tb.Fatalf("no files match %s", pattern)
		}
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, b)
		}
	}
	for _, t := range formattedTasks() {
		out = append(out, Format(t))
	}
	const head = "---\nid: tsk_01KJ3VV4PG8Q87DGHHMFN2HB3X\nkey: SNAG-7\ntitle: t\nstatus: open\n"
	for _, s := range []string{
		"wave: 012\n", "wave: 0x1F\n", "wave: 1_000\n", "wave: 1e3\n", "wave: -1\n", "wave: 0\n", "wave: 999999\n",
		"plan: yes\n", "plan: null\n", "plan: ~\n", "plan: True\n", "plan: a b  \n", "plan: a, b\n", "plan: a #b\n",
		"plan: a: b\n", "plan: 'it''s'\n", "plan: \"a\\u00e9\\\"b\\\\\"\n", "plan: \"\\x41\"\n", "plan: \"\\ud800\"\n",
		"plan: x\n  continued\n", "depends_on: [SNAG-1, ]\n", "depends_on: []\n", "depends_on: [ SNAG-1 , SNAG-2 ]\n",
		"depends_on:\n  - SNAG-1\n  - SNAG-2\n", "depends_on:\n- SNAG-1\n", "created: 2026-02-30T10:00:00Z\n",
		"created: 2026-02-03\n", "created: 2026-2-3T1:2:3Z\n", "verify: {command: \"go test\"}\n", "verify: {command: }\n",
		"capture:\n  url: \"http://x\"\n  console_errors:\n    - \"e: 1\"\n    - two\n  screenshots: [shots/a.png]\n",
		"capture:\n  url: \"http://x\"\n   anchor: b\n", "suspect_files:\n  - {path: a.go, lines: [1, 2]}\n  - {path: b c.go}\n  - c.go:3\n",
		"suspect_files:\n  - {path: a.go, lines: [1, 2]}\n    - x\n", "null: 1\n", "true: x\n", "a_b2: [\"x\", 'y']\n",
		"title: Prix affiché — 价格\n", "title: \"🛒 \u00a0x\"\n", "title: _x/y (z) +@.\n", "title: 2.625\n", "title: 0.5\n", "title: 00.5\n", "title: 1.\n", "title: .5\n", "title: 1.2.3\n",
		"capture: {viewport: {width: 390, height: 844, scale: 2.5}, anchor_box: {x: -1.5, y: 0, width: 1e3, height: 0.25}}\n", "plan:\tx\n", "plan: x\r\n",
	} {
		out = append(out, []byte(head+s+"---\nbody\n"))
	}
	return out
}

// formattedTasks are tasks with every field set in turn, for Format.
func formattedTasks() []*queue.Task {
	created := time.Date(2026, 2, 22, 23, 44, 34, 0, time.UTC)
	base := func() *queue.Task {
		return &queue.Task{ID: "tsk_01KJ3VV4PG8Q87DGHHMFN2HB3X", Key: "SNAG-10000", Title: "Move timeout request into its own the",
			Status: queue.StatusResolved, Trust: queue.TrustVetted, Severity: queue.SeverityHigh, Kind: queue.KindLayout, Wave: 2,
			SuspectFiles: []queue.FileRef{{Path: "Makefile"}}, Created: created, Updated: created.Add(time.Hour),
			Body: []byte("Worker when page.\n")}
	}
	all := base()
	all.Title = `Checkout: the "Buy" button # does nothing — 价格`
	all.Plan, all.Assignee = "checkout-revamp", "VESPER"
	all.DependsOn = []string{"SNAG-2", "tsk_01KJ3VV4PG8Q87DGHHMFN2HB3Y"}
	all.SuspectFiles = []queue.FileRef{{Path: "web/checkout.ts", Lines: [2]int{120, 148}}, {Path: "web/a b.ts"}}
	all.Source = queue.SourceCapture
	all.Capture = &queue.Capture{URL: "http://localhost:3000/checkout", Title: "Checkout — Shop", Viewport: &queue.Viewport{Width: 390, Height: 844, Scale: 2.625},
		UserAgent: "Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0.0.0 Safari/537.36",
		Anchor:    "#checkout-form button[type=submit]", AnchorText: "Pay now", AnchorBox: &queue.Box{X: 12.5, Y: 640, Width: 366, Height: 48.25}, Scroll: &queue.Point{X: 0, Y: 300.5},
		ConsoleErrors: []string{"TypeError: cart is undefined", "second\tline"}, NetworkErrors: []string{"500 GET http://localhost:3000/api/cart", "failed GET http://localhost:9/x: net::ERR_CONNECTION_REFUSED"},
		Screenshots: []string{"shots/SNAG-1-0.png"}, Crop: "shots/SNAG-1-anchor.png"}
	all.Verify = &queue.VerifySpec{Command: `go test ./checkout/... -run 'Test\d'`}
	all.Verified = true
	odd := base()
	odd.Title, odd.Plan, odd.Assignee = "yes", "null", "a, b"
	return []*queue.Task{base(), all, odd}
}

// TestFastFrontmatterReadsWhatFormatWrites: the tasks snag writes take the
// fast path (a cold reindex parses them all), and read as through YAML.
func TestFastFrontmatterReadsWhatFormatWrites(t *testing.T) {
	for i, tk := range formattedTasks() {
		raw := Format(tk)
		fm, err := split(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := fastFrontmatter(raw[fm.yamlStart:fm.yamlEnd]); !ok {
			t.Errorf("task %d: fastFrontmatter gave up on what Format wrote:\n%s", i, raw)
		}
		fast, slow, ferr, serr := parseBothWays(raw)
		if ferr != nil || serr != nil {
			t.Fatalf("task %d: %v / %v", i, ferr, serr)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("task %d: fast %+v, yaml %+v", i, fast, slow)
		}
	}
}

// FuzzFastFrontmatter: wherever fastFrontmatter accepts a text, the YAML
// library reads the same tree from it, and a file parses to the same task,
// or fails with the same error, with the fast path and without it.
func FuzzFastFrontmatter(f *testing.F) {
	for _, raw := range fastSeeds(f) {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		text := raw
		if fm, err := split(raw); err == nil {
			text = raw[fm.yamlStart:fm.yamlEnd]
		}
		if fast, ok := fastFrontmatter(text); ok {
			var n yaml.Node
			if err := safeUnmarshal(text, &n); err != nil {
				t.Fatalf("fastFrontmatter read what YAML refuses (%v):\n%q", err, text)
			}
			if n.Kind != yaml.DocumentNode || len(n.Content) != 1 {
				t.Fatalf("fastFrontmatter read a mapping where YAML has %+v:\n%q", n, text)
			}
			if d := sameNode("", fast, n.Content[0]); d != "" {
				t.Fatalf("%s\n%q", d, text)
			}
		}
		fast, slow, ferr, serr := parseBothWays(raw)
		if fmt.Sprint(ferr) != fmt.Sprint(serr) || !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast: %+v, %v\nyaml: %+v, %v\n%q", fast, ferr, slow, serr, raw)
		}
	})
}

// TestFastFrontmatterGivesUp: shapes it must leave to the YAML library.
func TestFastFrontmatterGivesUp(t *testing.T) {
	for _, text := range []string{
		"", "id: x", "# comment\nid: x\n", "id: x # c\n", "id: x\n\nkey: y\n", "id: 012\n", "id: 1e3\n",
		"id: x\n  more\n", "id: |\n  x\n", "id: &a x\n", "id: *a\n", "id: !!str x\n", "Id: x\n", "id:\n",
		"id: \"a\nb\"\n", "id: x\r\n", "id:\tx\n", "id: 'x\n", "id: [a, ]\n", "id: -x\n", "id: a:\n",
		"list:\n- a\n", "list:\n  - a\n    - b\n", "id: \"\\x41\"\n", "{id: x}\n", "id: x \n",
	} {
		if n, ok := fastFrontmatter([]byte(text)); ok {
			t.Errorf("fastFrontmatter read %q as %+v", text, n)
		}
	}
	if !strings.HasSuffix(string(Format(formattedTasks()[0])), "Worker when page.\n") {
		t.Fatal("Format lost the body")
	}
}

// BenchmarkParse parses a task file as snag writes it, through the fast
// path and through the YAML library.
func BenchmarkParse(b *testing.B) {
	raw := Format(formattedTasks()[1])
	for _, bc := range []struct {
		name string
		off  bool
	}{{"fast", false}, {"yaml", true}} {
		b.Run(bc.name, func(b *testing.B) {
			noFastFrontmatter = bc.off
			defer func() { noFastFrontmatter = false }()
			for b.Loop() {
				if _, err := Parse(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
