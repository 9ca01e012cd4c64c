package codec_test

import (
	"bytes"
	"crypto/sha256"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
)

// The holder and the resolve time the round trip uses.
const holder = "VESPER"

var resolvedAt = time.Date(2026, 12, 24, 9, 30, 0, 0, time.UTC)

// roundTripCase is one file of the S5 corpus. golden, when set, is the file
// holding the exact bytes after claim, release, claim, resolve.
type roundTripCase struct {
	name   string
	raw    []byte
	golden string
}

// roundTripCases is the S5 corpus: the files under testdata/roundtrip, the
// sample project's tasks (as they are, with CRLF line endings, and with a
// BOM), and a generated task with a 500 KB body.
func roundTripCases(t *testing.T) []roundTripCase {
	t.Helper()
	var cases []roundTripCase
	for _, f := range corpusFiles(t) {
		cases = append(cases, roundTripCase{name: filepath.Base(f), raw: readFile(t, f),
			golden: filepath.Join("testdata", "roundtrip", "golden", filepath.Base(f))})
	}
	for _, f := range exampleTaskFiles(t) {
		raw := readFile(t, f)
		name := "example/" + filepath.Base(f)
		cases = append(cases, roundTripCase{name: name, raw: raw})
		if !bytes.Contains(raw, []byte("\r\n")) {
			cases = append(cases, roundTripCase{name: name + "+crlf", raw: bytes.ReplaceAll(raw, []byte("\n"), []byte("\r\n"))})
		}
		cases = append(cases, roundTripCase{name: name + "+bom", raw: append([]byte("\xEF\xBB\xBF"), raw...)})
	}
	big := []byte("---\nid: " + testID + "\nkey: SNAG-500\ntitle: A task with a 500 KB body\nstatus: open # big\n---\n")
	cases = append(cases, roundTripCase{name: "generated/500KB-body", raw: append(big, bigBody(500<<10)...)})
	return cases
}

// bigBody is size bytes of markdown that holds everything a body may: lines
// that look like delimiters or frontmatter, tabs, CRLF, unicode, no final
// newline.
func bigBody(size int) []byte {
	pieces := []string{"---\n", "...\n", "\tindented with a tab\n", "plain words, plain words.\n",
		"unicode: 日本語 🛒 e\u0301 \u202eRTL\u202c\n", "status: resolved\n", "a windows line\r\n",
		"   \n", "```yaml\nassignee: nobody\n```\n", "# heading\n", "\n"}
	r := rand.New(rand.NewPCG(5, 500))
	var b bytes.Buffer
	for b.Len() < size {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// daemonLine matches the frontmatter lines snag owns in a claim, release and
// resolve.
var daemonLine = regexp.MustCompile(`^\s*(status|assignee|updated):`)

// TestS5_RoundTripCorpus: for every file of the corpus, the body is the bytes
// after the closing line; a claim and a release restore the original bytes
// (when the file had no assignee key); and after claim, release, claim,
// resolve the body is unchanged and only snag's own lines differ.
func TestS5_RoundTripCorpus(t *testing.T) {
	for _, tc := range roundTripCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.raw
			orig := mustParse(t, raw)
			start, ok := bodyStart(raw)
			if !ok {
				t.Fatal("the split oracle finds no frontmatter")
			}
			bodySum := sha256.Sum256(raw[start:])
			if sha256.Sum256(orig.Body) != bodySum {
				t.Fatalf("Body is not the bytes after the closing line:\n%s", cmp.Diff(string(raw[start:]), string(orig.Body)))
			}

			claim := func(b []byte) []byte {
				return mustEdit(t, b, codec.Set("status", queue.StatusClaimed), codec.Set("assignee", holder))
			}
			release := func(b []byte) []byte {
				return mustEdit(t, b, codec.Set("status", orig.Status), codec.Unset("assignee"))
			}
			resolve := func(b []byte) []byte {
				return mustEdit(t, b, codec.Set("status", queue.StatusVerifying), codec.Set("updated", resolvedAt))
			}

			claimed := claim(raw)
			want := *orig
			want.Status, want.Assignee = queue.StatusClaimed, holder
			checkEdited(t, "claim", claimed, &want, bodySum)

			released := release(claimed)
			if hadAssigneeKey := !bytes.Equal(mustEdit(t, raw, codec.Unset("assignee")), raw); !hadAssigneeKey {
				if diff := cmp.Diff(string(raw), string(released)); diff != "" {
					t.Fatalf("claim then release did not restore the file (-want +got):\n%s", diff)
				}
			}
			want.Status, want.Assignee = orig.Status, ""
			checkEdited(t, "release", released, &want, bodySum)

			final := resolve(claim(released))
			want.Status, want.Assignee, want.Updated = queue.StatusVerifying, holder, resolvedAt
			checkEdited(t, "claim, release, claim, resolve", final, &want, bodySum)
			checkOnlyDaemonLines(t, raw, final, start)

			if tc.golden != "" {
				checkGolden(t, tc.golden, final)
			}
		})
	}
}

// checkEdited checks an edited file: it parses to want, and its body is
// still the one with the given sum.
func checkEdited(t *testing.T, step string, b []byte, want *queue.Task, bodySum [32]byte) {
	t.Helper()
	got, err := codec.Parse(b)
	if err != nil {
		t.Fatalf("after %s the file does not parse: %v\n%s", step, err, b)
	}
	if diff := cmp.Diff(want, got, taskFields); diff != "" {
		t.Fatalf("after %s (-want +got):\n%s", step, diff)
	}
	start, ok := bodyStart(b)
	if !ok || sha256.Sum256(b[start:]) != bodySum || sha256.Sum256(got.Body) != bodySum {
		t.Fatalf("after %s the body changed", step)
	}
}

// checkOnlyDaemonLines diffs the frontmatter lines of before and after: every
// line removed or added must be a status, assignee or updated line, each of
// those keys is there once at the end, and nothing else moved.
func checkOnlyDaemonLines(t *testing.T, before, after []byte, bodyStart int) {
	t.Helper()
	body := before[bodyStart:]
	if !bytes.HasSuffix(after, body) {
		t.Fatal("the body is not at the end of the edited file")
	}
	removed, added := diffLines(lines(before[:bodyStart]), lines(after[:len(after)-len(body)]))
	for _, l := range append(removed, added...) {
		if !daemonLine.MatchString(l) {
			t.Errorf("a line snag does not own changed: %q\nremoved %q\nadded %q", l, removed, added)
		}
	}
	for _, key := range []string{"status", "assignee", "updated"} {
		n := 0
		for _, l := range added {
			if m := daemonLine.FindStringSubmatch(l); m != nil && m[1] == key {
				n++
			}
		}
		if n > 1 {
			t.Errorf("%s added %d times: %q", key, n, added)
		}
	}
}

// lines splits b after each \n, keeping line endings, so a CR that went
// missing shows up as a change.
func lines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n') + 1
		if i == 0 {
			i = len(b)
		}
		out = append(out, string(b[:i]))
		b = b[i:]
	}
	return out
}

// diffLines is a longest-common-subsequence line diff: the lines of a not in
// b (removed) and of b not in a (added).
func diffLines(a, b []string) (removed, added []string) {
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			removed, i = append(removed, a[i]), i+1
		default:
			added, j = append(added, b[j]), j+1
		}
	}
	return append(removed, a[i:]...), append(added, b[j:]...)
}

// checkGolden compares got with the golden file, or rewrites it under -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./queue -run %s -update to write it)", err, t.Name())
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func TestS5_DiffLines(t *testing.T) {
	removed, added := diffLines(
		strings.SplitAfter("a\nstatus: open\nb\nc\n", "\n"),
		strings.SplitAfter("a\nstatus: claimed\nb\nc\nassignee: X\n", "\n"))
	if diff := cmp.Diff([]string{"status: open\n"}, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"status: claimed\n", "assignee: X\n"}, added); diff != "" {
		t.Errorf("added (-want +got):\n%s", diff)
	}
}
