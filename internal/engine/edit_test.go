package engine

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/queue"
)

func ptr[T any](v T) *T { return &v }

func ref(t *testing.T, s string) queue.Ref {
	t.Helper()
	r, err := queue.ParseRef(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// updatedLine is the updated: line, whose time an edit sets.
var updatedLine = regexp.MustCompile(`(?m)^updated: \S+$`)

// TestEditRewritesOnlyWhatChanges edits a hand-written file with comments
// and a quoted title: only the values that change are rewritten (a value's
// comment stays), the changes are in the answer and the audit log, and an
// edit to what the file says already writes nothing.
func TestEditRewritesOnlyWhatChanges(t *testing.T) {
	e := open(t, sample(t))
	ctx := context.Background()
	r := ref(t, "SNAG-6")
	before := readTask(t, e, r)
	ed, err := e.Edit(ctx, r, TaskEdit{Title: ptr("Confirmation email goes out twice on a webhook retry"),
		Severity: ptr(queue.SeverityCritical), Wave: ptr(2), Kind: ptr(queue.KindBug)}, "dana")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"title Order confirmation email is sent twice on retry -> Confirmation email goes out twice on a webhook retry",
		"severity high -> critical", "wave 1 -> 2",
	}
	if diff := cmp.Diff(want, ed.Changed); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
	after := readTask(t, e, r)
	exp := bytes.Replace(before, []byte("title: Order confirmation email is sent twice on retry\n"),
		[]byte("title: Confirmation email goes out twice on a webhook retry\n"), 1)
	exp = bytes.Replace(exp, []byte("severity: high  # bumped"), []byte("severity: critical  # bumped"), 1)
	exp = bytes.Replace(exp, []byte("wave: 1\n"), []byte("wave: 2\n"), 1)
	exp = updatedLine.ReplaceAll(exp, []byte("updated: X"))
	if got := updatedLine.ReplaceAll(after, []byte("updated: X")); !bytes.Equal(got, exp) {
		t.Errorf("the file after the edit:\n%s\nwant:\n%s", got, exp)
	}
	if ed.Task.Status != queue.StatusVerifying || ed.Task.Assignee != "dana" {
		t.Errorf("the edit moved the task: %s @%s", ed.Task.Status, ed.Task.Assignee)
	}
	log, err := e.AuditLog(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	last := log[len(log)-1]
	if last.Action != "edit" || last.Agent != "dana" || last.Outcome != "ok" || !strings.Contains(last.Detail, "severity high -> critical") {
		t.Errorf("audit: %+v", last)
	}

	again, err := e.Edit(ctx, r, TaskEdit{Severity: ptr(queue.SeverityCritical)}, "dana")
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Changed) != 0 || !bytes.Equal(readTask(t, e, r), after) {
		t.Errorf("an edit to the same value changed %v or the file", again.Changed)
	}
}

// TestEditRefusesWhatAFileMustNotSay tries each bad value: each is refused
// with a sentence that names the fix, and the file keeps its bytes.
func TestEditRefusesWhatAFileMustNotSay(t *testing.T) {
	e := open(t, sample(t))
	ctx := context.Background()
	for _, tc := range []struct {
		name, task string
		ed         TaskEdit
		code, says string
	}{
		{"empty title", "SNAG-11", TaskEdit{Title: ptr("  ")}, "bad_title", "empty title"},
		{"unknown severity", "SNAG-11", TaskEdit{Severity: ptr(queue.Severity("urgent"))}, "bad_severity", "want one of critical"},
		{"unknown kind", "SNAG-11", TaskEdit{Kind: ptr(queue.Kind("epic"))}, "bad_kind", "want one of"},
		{"negative wave", "SNAG-11", TaskEdit{Wave: ptr(-1)}, "bad_wave", "from 0"},
		{"bad plan", "SNAG-11", TaskEdit{Plan: ptr("Checkout Revamp!")}, "bad_plan", "snag plans lists them"},
		{"file outside", "SNAG-11", TaskEdit{Files: &[]queue.FileRef{{Path: "../etc/passwd"}}}, "bad_file", "suspect_files"},
		{"missing dependency", "SNAG-11", TaskEdit{AddDeps: []string{"SNAG-404"}}, "bad_ref", "no task SNAG-404: snag list shows the tasks"},
		{"itself", "SNAG-11", TaskEdit{AddDeps: []string{"SNAG-11"}}, "cycle", "cannot depend on itself"},
		{"cycle", "SNAG-7", TaskEdit{AddDeps: []string{"SNAG-9"}}, "cycle", "SNAG-7 -> SNAG-9 -> SNAG-7"},
		{"not a dependency", "SNAG-9", TaskEdit{RemoveDeps: []string{"SNAG-3"}}, "not_a_dependency", "SNAG-9 does not depend on SNAG-3 (it has depends_on: SNAG-7)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ref(t, tc.task)
			before := readTask(t, e, r)
			_, err := e.Edit(ctx, r, tc.ed, "dana")
			var re *Error
			if !errors.As(err, &re) || re.Code != tc.code || !strings.Contains(re.Message, tc.says) {
				t.Fatalf("Edit = %v; want a %s refusal saying %q", err, tc.code, tc.says)
			}
			if !bytes.Equal(readTask(t, e, r), before) {
				t.Error("a refused edit changed the file")
			}
		})
	}
}

// TestEditDependenciesAndFiles adds and removes dependencies (written by
// id, with the key in a comment; a person's entry by key is matched too)
// and replaces and clears the suspect files.
func TestEditDependenciesAndFiles(t *testing.T) {
	e := open(t, sample(t))
	ctx := context.Background()
	r11 := ref(t, "SNAG-11")
	ed, err := e.Edit(ctx, r11, TaskEdit{AddDeps: []string{"SNAG-12", "SNAG-3"}}, "dana")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"depends_on + SNAG-12", "depends_on + SNAG-3"}, ed.Changed); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
	if !bytes.Contains(readTask(t, e, r11), []byte("depends_on: [tsk_01M7MQ69QSHGZWDAA2TC1ZGK28, tsk_01M6JVE3WEXHX1PAX0DDNE2B4Q] # SNAG-12, SNAG-3\n")) {
		t.Errorf("depends_on line:\n%s", readTask(t, e, r11))
	}
	it, err := e.Get(ctx, r11)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"SNAG-12"}, it.BlockedBy); diff != "" {
		t.Errorf("blocked by (-want +got):\n%s", diff)
	}
	if ed, err = e.Edit(ctx, r11, TaskEdit{AddDeps: []string{"SNAG-12"}}, "dana"); err != nil || len(ed.Changed) != 0 {
		t.Errorf("adding a dependency it has: changed %v, %v", ed.Changed, err)
	}
	if _, err := e.Edit(ctx, r11, TaskEdit{RemoveDeps: []string{"SNAG-12", "tsk_01M6JVE3WEXHX1PAX0DDNE2B4Q"}}, "dana"); err != nil {
		t.Fatal(err)
	}
	if b := readTask(t, e, r11); bytes.Contains(b, []byte("depends_on")) {
		t.Errorf("removing every dependency left the key:\n%s", b)
	}

	r9 := ref(t, "SNAG-9")
	if ed, err = e.Edit(ctx, r9, TaskEdit{RemoveDeps: []string{"snag-7"}}, "dana"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"depends_on - SNAG-7"}, ed.Changed); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
	if ed, err = e.Edit(ctx, r9, TaskEdit{Files: &[]queue.FileRef{{Path: "web/checkout/Address Book.tsx", Lines: [2]int{4, 40}}}}, "dana"); err != nil {
		t.Fatal(err)
	}
	if b := readTask(t, e, r9); !bytes.Contains(b, []byte("suspect_files: [{path: web/checkout/Address Book.tsx, lines: [4, 40]}]\n")) {
		t.Errorf("suspect files:\n%s", b)
	}
	if ed.Task.SuspectFiles[0].Path != "web/checkout/Address Book.tsx" {
		t.Errorf("the task holds %v", ed.Task.SuspectFiles)
	}
	if _, err = e.Edit(ctx, r9, TaskEdit{Files: &[]queue.FileRef{}, Plan: ptr("")}, "dana"); err != nil {
		t.Fatal(err)
	}
	if b := readTask(t, e, r9); bytes.Contains(b, []byte("suspect_files")) || bytes.Contains(b, []byte("plan:")) {
		t.Errorf("cleared files and plan stayed:\n%s", b)
	}
}

// TestDoneResolvesAnOpenTaskUnverified is snag done on an open task: a
// person's word resolves it, verified stays false, and it is audited.
func TestDoneResolvesAnOpenTaskUnverified(t *testing.T) {
	e := open(t, sample(t))
	ctx := context.Background()
	tk, err := e.Accept(ctx, ref(t, "SNAG-11"), "dana")
	if err != nil {
		t.Fatal(err)
	}
	if tk.Status != queue.StatusResolved || tk.Verified {
		t.Errorf("done: %s verified %v; want resolved, not verified", tk.Status, tk.Verified)
	}
	if _, err := e.Accept(ctx, ref(t, "SNAG-16"), "dana"); !errors.Is(err, ErrTransition) || !strings.Contains(err.Error(), "from inbox a person can promote") {
		t.Errorf("done on an inbox task: %v; want the moves from inbox named", err)
	}
}
