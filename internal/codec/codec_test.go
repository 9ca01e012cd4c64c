package codec_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// exampleDir is the sample project every test may read (never write).
const exampleDir = "../../.snag-example"

// readFile reads a file the test needs, failing the test when it cannot.
func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// glob lists files matching pattern, failing the test when there are none:
// a corpus that silently vanished must not make a test pass.
func glob(t testing.TB, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no files match %s", pattern)
	}
	return files
}

// exampleTaskFiles lists the sample project's task files.
func exampleTaskFiles(t testing.TB) []string {
	t.Helper()
	return glob(t, filepath.Join(exampleDir, "tasks", "*.md"))
}

// corpusFiles lists the round-trip corpus.
func corpusFiles(t testing.TB) []string {
	t.Helper()
	return glob(t, filepath.Join("testdata", "roundtrip", "*.md"))
}

// mustParse parses raw, failing the test when it does not parse.
func mustParse(t testing.TB, raw []byte) *queue.Task {
	t.Helper()
	tk, err := codec.Parse(raw)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return tk
}

// mustEdit edits raw, failing the test when the edit is refused.
func mustEdit(t testing.TB, raw []byte, fields ...codec.Field) []byte {
	t.Helper()
	out, err := codec.Edit(raw, fields...)
	if err != nil {
		t.Fatalf("Edit(%v): %v", fields, err)
	}
	return out
}

// bodyStart is an oracle for the frontmatter split, written apart from the
// codec: an optional BOM, a first line that is exactly ---, then the first
// later line that is exactly --- or ... (ignoring a trailing CR). It returns
// the offset of the first byte after that closing line.
func bodyStart(raw []byte) (int, bool) {
	p := 0
	if bytes.HasPrefix(raw, []byte("\xEF\xBB\xBF")) {
		p = 3
	}
	first := true
	for p < len(raw) {
		nl := bytes.IndexByte(raw[p:], '\n')
		end, next := len(raw), len(raw)
		if nl >= 0 {
			end, next = p+nl, p+nl+1
		}
		line := string(raw[p:end])
		if first {
			if nl < 0 || (line != "---" && line != "---\r") {
				return 0, false
			}
			first = false
		} else if strings.TrimSuffix(line, "\r") == "---" || strings.TrimSuffix(line, "\r") == "..." {
			return next, true
		}
		p = next
	}
	return 0, false
}

// taskFields compares tasks on what they mean, not on their bytes.
var taskFields = cmp.Options{
	cmpopts.IgnoreFields(queue.Task{}, "Raw", "Body"),
	cmpopts.EquateEmpty(),
}

// asParseError unwraps err into a *ParseError, failing the test when it is
// something else.
func asParseError(t testing.TB, err error) *codec.ParseError {
	t.Helper()
	var pe *codec.ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *codec.ParseError", err, err)
	}
	return pe
}

const (
	testID  = "tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y"
	testID2 = "tsk_01M8QEDC00F9NK8T1KQ75MM944"
)

// minimal is the four required keys, as file lines 2 to 5.
const minimal = "id: " + testID + "\nkey: SNAG-1\ntitle: A task\nstatus: open\n"

func TestParse_Fields(t *testing.T) {
	raw := []byte("---\n" +
		"id: tsk_01m8sfmrw0mgv614vd9b66g297\n" +
		"key: snag-120\n" +
		"title: Every known key\n" +
		"status: Verifying\n" +
		"trust: unvetted\n" +
		"severity: critical\n" +
		"kind: perf\n" +
		"wave: 0\n" +
		"plan: checkout-revamp\n" +
		"assignee: ORCA\n" +
		"depends_on: [SNAG-1, 7, tsk_01M8SC6X805BQ21RDVXDARF47C]\n" +
		"suspect_files:\n" +
		"  - {path: web/checkout.ts, lines: [120, 148]}\n" +
		"  - web/cart/store.ts:31-44\n" +
		"  - web/one.ts:9\n" +
		"  - path: internal/x.go\n" +
		"    lines: 7\n" +
		"  - {path: README.md}\n" +
		"capture:\n" +
		"  url: http://localhost:3000/checkout\n" +
		"  anchor: \"#checkout-form button[type=submit]\"\n" +
		"  console_errors: [\"TypeError: cart is undefined\"]\n" +
		"  screenshots: [shots/SNAG-120-0.png]\n" +
		"verify: {command: \"go test ./checkout/...\"}\n" +
		"verified: true\n" +
		"created: 2026-12-01T19:00:00+01:00\n" +
		"updated: 2026-12-01\n" +
		"labels: [ignored, by, snag]\n" +
		"---\n" +
		"body\n")
	got := mustParse(t, raw)
	want := &queue.Task{
		ID:        "tsk_01M8SFMRW0MGV614VD9B66G297",
		Key:       "SNAG-120",
		Title:     "Every known key",
		Status:    queue.StatusVerifying,
		Trust:     queue.TrustUnvetted,
		Severity:  queue.SeverityCritical,
		Kind:      queue.KindPerf,
		Wave:      0,
		Plan:      "checkout-revamp",
		Assignee:  "ORCA",
		DependsOn: []string{"SNAG-1", "7", "tsk_01M8SC6X805BQ21RDVXDARF47C"},
		SuspectFiles: []queue.FileRef{
			{Path: "web/checkout.ts", Lines: [2]int{120, 148}},
			{Path: "web/cart/store.ts", Lines: [2]int{31, 44}},
			{Path: "web/one.ts", Lines: [2]int{9, 9}},
			{Path: "internal/x.go", Lines: [2]int{7, 7}},
			{Path: "README.md"},
		},
		Capture: &queue.Capture{
			URL:           "http://localhost:3000/checkout",
			Anchor:        "#checkout-form button[type=submit]",
			ConsoleErrors: []string{"TypeError: cart is undefined"},
			Screenshots:   []string{"shots/SNAG-120-0.png"},
		},
		Verify:   &queue.VerifySpec{Command: "go test ./checkout/..."},
		Verified: true,
		Created:  time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC),
		Updated:  time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
	}
	if diff := cmp.Diff(want, got, taskFields); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
	if got.Num() != 120 {
		t.Errorf("Num() = %d, want 120", got.Num())
	}
	if !bytes.Equal(got.Raw, raw) || string(got.Body) != "body\n" {
		t.Errorf("Raw/Body not kept: body %q", got.Body)
	}
}

func TestParse_Defaults(t *testing.T) {
	got := mustParse(t, []byte("---\n"+minimal+"---\n"))
	want := &queue.Task{ID: testID, Key: "SNAG-1", Title: "A task", Status: queue.StatusOpen,
		Trust: queue.TrustVetted, Severity: queue.DefaultSeverity, Kind: queue.DefaultKind, Wave: queue.DefaultWave}
	if diff := cmp.Diff(want, got, taskFields); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

func TestParse_NullValues(t *testing.T) {
	got := mustParse(t, []byte("---\n"+minimal+
		"plan:\nassignee: ~\ndepends_on:\nsuspect_files:\ncapture:\nverify:\nverified:\ncreated:\nwave:\n---\n"))
	want := &queue.Task{ID: testID, Key: "SNAG-1", Title: "A task", Status: queue.StatusOpen,
		Trust: queue.TrustVetted, Severity: queue.DefaultSeverity, Kind: queue.DefaultKind}
	if diff := cmp.Diff(want, got, taskFields); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

func TestParse_ExampleTasks(t *testing.T) {
	for _, f := range exampleTaskFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw := readFile(t, f)
			tk := mustParse(t, raw)
			if !queue.IsID(tk.ID) {
				t.Errorf("id %q is not an id", tk.ID)
			}
			if want := queue.FileName(tk.Key, tk.Title); want != filepath.Base(f) {
				t.Errorf("file name = %q, FileName gives %q", filepath.Base(f), want)
			}
		})
	}
}

func TestParseError_Error(t *testing.T) {
	_, err := codec.Parse([]byte("---\n" + strings.Replace(minimal, "status: open", "status: opne", 1) + "---\n"))
	got := codec.WithPath(err, "tasks/SNAG-1 - A task.md").Error()
	want := `parse tasks/SNAG-1 - A task.md: line 5: status: unknown value "opne" (want one of inbox, open, claimed, verifying, needs_review, resolved, cancelled)`
	if got != want {
		t.Errorf("error =\n%s\nwant\n%s", got, want)
	}
	if pe := asParseError(t, err); pe.Path != "" {
		t.Errorf("WithPath changed the original error: Path = %q", pe.Path)
	}
	if other := errors.New("x"); codec.WithPath(other, "p") != other {
		t.Error("WithPath changed an error that is not a *ParseError")
	}
}
