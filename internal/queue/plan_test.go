package queue_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
)

// exampleTasks parses the sample project's tasks, as the daemon would list
// them, in directory order.
func exampleTasks(t *testing.T) []queue.Located {
	t.Helper()
	var out []queue.Located
	for _, f := range exampleTaskFiles(t) {
		out = append(out, queue.Located{Task: mustParse(t, readFile(t, f)), File: "tasks/" + filepath.Base(f)})
	}
	return out
}

func decodePlan(t *testing.T, b []byte) queue.Plan {
	t.Helper()
	var p queue.Plan
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("plan.json does not decode: %v\n%s", err, b)
	}
	return p
}

func TestBuildPlan_Example(t *testing.T) {
	tasks := exampleTasks(t)
	problems := []queue.Problem{
		{File: "tasks/SNAG-30 - z.md", Error: "line 4: status: unknown value"},
		{File: "tasks/SNAG-21 - a.md", Error: "git conflict markers"},
	}
	out := queue.BuildPlan(tasks, problems)
	p := decodePlan(t, out)
	if p.Version != queue.PlanVersion {
		t.Errorf("version = %d", p.Version)
	}

	// Wave, then severity (critical first), then created, then id.
	wantOrder := []string{
		"SNAG-3",                      // wave 1, critical
		"SNAG-1", "SNAG-6", "SNAG-16", // wave 1, high, by created
		"SNAG-2",                                                                 // wave 1, medium
		"SNAG-10",                                                                // wave 2, high
		"SNAG-5", "SNAG-7", "SNAG-8", "SNAG-11", "SNAG-17", "SNAG-18", "SNAG-20", // wave 2, medium, by created
		"SNAG-4",                                              // wave 2, low
		"SNAG-9",                                              // wave 3, high
		"SNAG-12", "SNAG-13", "SNAG-14", "SNAG-15", "SNAG-19", // wave 3, low, by created
	}
	var gotOrder []string
	blocked := map[string][]string{}
	for _, pt := range p.Tasks {
		gotOrder = append(gotOrder, pt.Key)
		if len(pt.BlockedBy) > 0 {
			blocked[pt.Key] = pt.BlockedBy
		}
	}
	if diff := cmp.Diff(wantOrder, gotOrder); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}

	// SNAG-9 waits on SNAG-7 (claimed), SNAG-13 on SNAG-10 (needs review);
	// SNAG-5's SNAG-2 and SNAG-7's SNAG-3 are resolved.
	wantBlocked := map[string][]string{"SNAG-9": {"SNAG-7"}, "SNAG-13": {"SNAG-10"}}
	if diff := cmp.Diff(wantBlocked, blocked); diff != "" {
		t.Errorf("blocked_by (-want +got):\n%s", diff)
	}

	byKey := map[string]queue.PlanTask{}
	for _, pt := range p.Tasks {
		byKey[pt.Key] = pt
	}
	want1 := queue.PlanTask{
		ID: "tsk_01M6DRJYC6CBVR9SGWXEAVTH3Y", Key: "SNAG-1", Title: "Checkout button does nothing on Safari",
		Status: queue.StatusClaimed, Trust: queue.TrustVetted, Severity: queue.SeverityHigh, Kind: queue.KindBug,
		Wave: 1, Plan: "checkout-revamp", Assignee: "VESPER", File: "tasks/SNAG-1 - Checkout button does nothing on Safari.md",
	}
	if diff := cmp.Diff(want1, byKey["SNAG-1"]); diff != "" {
		t.Errorf("SNAG-1 (-want +got):\n%s", diff)
	}
	if got := byKey["SNAG-5"]; !slices.Equal(got.DependsOn, []string{"SNAG-2"}) || got.BlockedBy != nil {
		t.Errorf("SNAG-5: depends_on %v, blocked_by %v", got.DependsOn, got.BlockedBy)
	}

	wantProblems := []queue.Problem{problems[1], problems[0]}
	if diff := cmp.Diff(wantProblems, p.Problems); diff != "" {
		t.Errorf("problems, sorted by file (-want +got):\n%s", diff)
	}

	// Deterministic: the same tasks in any order give the same bytes.
	if again := queue.BuildPlan(tasks, problems); !bytes.Equal(out, again) {
		t.Error("two calls gave different bytes")
	}
	reversed := slices.Clone(tasks)
	slices.Reverse(reversed)
	if again := queue.BuildPlan(reversed, []queue.Problem{problems[1], problems[0]}); !bytes.Equal(out, again) {
		t.Error("the input's order changed the output")
	}
	if !bytes.HasSuffix(out, []byte("}\n")) {
		t.Error("plan.json does not end in a newline")
	}
	if len(tasks) != 20 || tasks[0].Task.Key != "SNAG-1" {
		t.Error("BuildPlan reordered its input")
	}
}

func TestBuildPlan_TieBreaks(t *testing.T) {
	when := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	mk := func(id, key string, wave int, sev queue.Severity, created time.Time, status queue.Status, deps ...string) *queue.Task {
		return &queue.Task{ID: id, Key: key, Title: key, Status: status, Trust: queue.TrustVetted, Severity: sev,
			Kind: queue.KindBug, Wave: wave, Created: created, DependsOn: deps}
	}
	const (
		idA = "tsk_01M8QEDC00F9NK8T1KQ75MM944"
		idB = "tsk_01M8QHV7M062CEJXDQ8BXH6YXZ"
		idC = "tsk_01M8QN9380WJATFJXNCG4BWM2T"
		idD = "tsk_01M8QRPYW0J1JJEVM2KWKPRWWM"
	)
	tasks := []queue.Located{
		{mk(idD, "SNAG-4", 0, queue.SeverityLow, when, queue.StatusResolved, "SNAG-99"), "tasks/d.md"},
		{mk(idC, "SNAG-3", 1, "weird", when, queue.StatusOpen, "snag-1", idD), "tasks/c.md"},
		{mk(idB, "SNAG-2", 1, queue.SeverityLow, when, queue.StatusOpen, "2"), "tasks/b.md"},
		{mk(idA, "SNAG-1", 1, queue.SeverityLow, when, queue.StatusOpen, "SNAG-99", "tsk_01m8qrpyw0j1jjevm2kwkprwwm"), "tasks/a2.md"},
		{mk(idA, "SNAG-1", 1, queue.SeverityLow, when, queue.StatusOpen), "tasks/a1.md"}, // a duplicate id: file decides
	}
	p := decodePlan(t, queue.BuildPlan(tasks, nil))
	var got []string
	blocked := map[string][]string{}
	for _, pt := range p.Tasks {
		got = append(got, pt.File)
		if pt.BlockedBy != nil {
			blocked[pt.File] = pt.BlockedBy
		}
	}
	want := []string{"tasks/d.md", "tasks/a1.md", "tasks/a2.md", "tasks/b.md", "tasks/c.md"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	// Terminal tasks are never blocked; refs resolve in any case, and a
	// task may name itself (SNAG-2 depends on 2, which is open).
	wantBlocked := map[string][]string{
		"tasks/a2.md": {"SNAG-99"},
		"tasks/b.md":  {"2"},
		"tasks/c.md":  {"snag-1"},
	}
	if diff := cmp.Diff(wantBlocked, blocked); diff != "" {
		t.Errorf("blocked_by (-want +got):\n%s", diff)
	}
	if p.Problems != nil {
		t.Errorf("problems = %v, want none", p.Problems)
	}
}

func TestLookup(t *testing.T) {
	a := &queue.Task{ID: testID, Key: "SNAG-1"}
	b := &queue.Task{ID: testID2}
	l := queue.NewLookup([]*queue.Task{a, b})
	for ref, want := range map[string]*queue.Task{
		"SNAG-1": a, "snag-1": a, "1": a, testID: a, " " + testID + " ": a,
		"tsk_01m8qedc00f9nk8t1kq75mm944": b,
		"SNAG-2":                         nil, "": nil, "nonsense": nil,
	} {
		got, ok := l.Find(ref)
		if got != want || ok != (want != nil) {
			t.Errorf("Find(%q) = %v, %v", ref, got, ok)
		}
	}
}

func TestCompare(t *testing.T) {
	base := queue.Task{ID: testID, Wave: 1, Severity: queue.SeverityHigh, Created: time.Unix(100, 0)}
	tests := []struct {
		name string
		b    func(*queue.Task)
		want int // Compare(base, b)
	}{
		{"equal", func(*queue.Task) {}, 0},
		{"later wave", func(t *queue.Task) { t.Wave = 2 }, -1},
		{"earlier wave beats severity", func(t *queue.Task) { t.Wave = 0; t.Severity = queue.SeverityLow }, 1},
		{"critical first", func(t *queue.Task) { t.Severity = queue.SeverityCritical }, 1},
		{"unknown severity last", func(t *queue.Task) { t.Severity = "" }, -1},
		{"older first", func(t *queue.Task) { t.Created = time.Unix(50, 0) }, 1},
		{"then id", func(t *queue.Task) { t.ID = testID2 }, -1},
	}
	for _, tt := range tests {
		b := base
		tt.b(&b)
		if got := queue.Compare(&base, &b); got != tt.want {
			t.Errorf("%s: Compare = %d, want %d", tt.name, got, tt.want)
		}
		if got := queue.Compare(&b, &base); got != -tt.want {
			t.Errorf("%s: Compare reversed = %d, want %d", tt.name, got, -tt.want)
		}
	}
}

// exampleTaskFiles lists the sample project's task files.
func exampleTaskFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(exampleDir, "tasks", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no task files in %s: %v", exampleDir, err)
	}
	return files
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

// readFile reads a file the test needs, failing the test when it cannot.
func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
