package brief_test

import (
	"context"
	"testing"

	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/workspace/workspacetest"
)

// TestContext: an agent's context has its own task, the other agent with
// what it holds and last reported, the ready tasks it may claim, and a
// handoff left for it, shown once.
func TestContext(t *testing.T) {
	w := workspacetest.Open(t)
	b, e, ctx := w.Brief, w.Engine, context.Background()
	ada, bea := workspacetest.Register(t, w, "ADA"), workspacetest.Register(t, w, "BEA")
	c, err := e.Claim(ctx, ada, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Report(ctx, ada, "  Halfway through the parser  ", c.Task.Key, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Graph.Handoff(ctx, &ada, "", ops.HandoffRequest{To: "bea", Title: "Look at the lexer next"}); err != nil {
		t.Fatal(err)
	}

	mine, err := b.Context(ctx, ada)
	if err != nil {
		t.Fatal(err)
	}
	if len(mine.Tasks) != 1 || mine.Tasks[0].Key != c.Task.Key || mine.Tasks[0].Epoch != c.Epoch {
		t.Fatalf("ADA's tasks: %+v, want %s at epoch %d", mine.Tasks, c.Task.Key, c.Epoch)
	}
	if len(mine.Reports) != 0 {
		t.Fatalf("ADA's context shows its own reports: %+v", mine.Reports)
	}

	theirs, err := b.Context(ctx, bea)
	if err != nil {
		t.Fatal(err)
	}
	if len(theirs.Others) != 1 || theirs.Others[0].Session.Name != "ADA" {
		t.Fatalf("BEA's others: %+v, want ADA", theirs.Others)
	}
	o := theirs.Others[0]
	if len(o.Tasks) != 1 || o.Tasks[0].Key != c.Task.Key || o.Tasks[0].Title != c.Task.Title {
		t.Fatalf("ADA's tasks as BEA sees them: %+v, want %s %q", o.Tasks, c.Task.Key, c.Task.Title)
	}
	if o.LastReport == nil || o.LastReport.Body != "Halfway through the parser" {
		t.Fatalf("ADA's last report as BEA sees it: %+v, want the report trimmed", o.LastReport)
	}
	if len(theirs.Reports) != 1 || theirs.Reports[0].From != "ADA" {
		t.Fatalf("BEA's reports: %+v, want ADA's", theirs.Reports)
	}
	for _, r := range theirs.Ready {
		if r.Key == c.Task.Key {
			t.Fatalf("BEA's ready tasks list %s, which ADA holds", r.Key)
		}
	}
	if len(theirs.Handoffs) != 1 || theirs.Handoffs[0].Title != "Look at the lexer next" || theirs.HandoffsMore != 0 {
		t.Fatalf("BEA's handoffs: %+v (%d more), want ADA's one", theirs.Handoffs, theirs.HandoffsMore)
	}
	again, err := b.Context(ctx, bea)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Handoffs) != 0 {
		t.Fatalf("BEA's next context shows the handoff again: %+v", again.Handoffs)
	}
}

// TestContextHandoffsWait: a context shows the oldest handoffs it can
// hold whole and counts the rest, which the next context shows.
func TestContextHandoffsWait(t *testing.T) {
	w := workspacetest.Open(t)
	b, ctx := w.Brief, context.Background()
	ada, bea := workspacetest.Register(t, w, "ADA"), workspacetest.Register(t, w, "BEA")
	titles := []string{"one", "two", "three", "four", "five"}
	for _, title := range titles {
		if _, err := w.Graph.Handoff(ctx, &ada, "", ops.HandoffRequest{To: "bea", Title: title}); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	for range 2 {
		tc, err := b.Context(ctx, bea)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range tc.Handoffs {
			seen = append(seen, m.Title)
		}
		if want := len(titles) - len(seen); tc.HandoffsMore != want {
			t.Fatalf("after %v the context counts %d more, want %d", seen, tc.HandoffsMore, want)
		}
	}
	if len(seen) != len(titles) {
		t.Fatalf("two contexts showed %v, want %v", seen, titles)
	}
	for i := range titles {
		if seen[i] != titles[i] {
			t.Fatalf("two contexts showed %v, want %v, oldest first", seen, titles)
		}
	}
}

// TestReport: a report is a message with its event and audit entry, read
// back by Messages; an empty or long one, or one about a task that does
// not exist, is refused with its code.
func TestReport(t *testing.T) {
	w := workspacetest.Open(t)
	b, e, ctx := w.Brief, w.Engine, context.Background()
	ada := workspacetest.Register(t, w, "ADA")
	for _, c := range []struct{ name, message, task, detail, code string }{
		{"empty", "   ", "", "", "no_message"},
		{"long", string(make([]byte, 501)), "", "", "long_message"},
		{"long detail", "ok", "", string(make([]byte, 8001)), "long_detail"},
		{"no such task", "ok", "SNAG-999", "", "not_found"},
		{"bad ref", "ok", "not a ref", "", "bad_ref"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := b.Report(ctx, ada, c.message, c.task, c.detail)
			if workspacetest.CodeOf(err) != c.code {
				t.Fatalf("report: %v, want %s", err, c.code)
			}
		})
	}
	last := e.Events().Last()
	m, err := b.Report(ctx, ada, "Fixed the rounding", "SNAG-1", "in cart.ts")
	if err != nil {
		t.Fatal(err)
	}
	if m.ID == 0 || m.TaskID == "" || m.Detail != "in cart.ts" || m.Kind != index.MessageReport {
		t.Fatalf("the report: %+v", m)
	}
	evs, _, _ := e.Events().Since(last)
	var got *snag.ReportEvent
	for _, ev := range evs {
		if r, ok := ev.Data.(snag.ReportEvent); ok {
			got = &r
		}
	}
	if got == nil || got.From != "ADA" || got.Task != "SNAG-1" || got.Message != "Fixed the rounding" {
		t.Fatalf("the report's event: %+v in %+v", got, evs)
	}
	ms, err := b.Messages(ctx, index.MessageReport, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].ID != m.ID {
		t.Fatalf("the reports: %+v, want the one", ms)
	}
}

// TestMessagesByAddressee: the handoffs to an agent are read by its name
// in any case.
func TestMessagesByAddressee(t *testing.T) {
	w := workspacetest.Open(t)
	b, ctx := w.Brief, context.Background()
	ada := workspacetest.Register(t, w, "ADA")
	workspacetest.Register(t, w, "BEA")
	if _, err := w.Graph.Handoff(ctx, &ada, "", ops.HandoffRequest{To: "bea", Title: "yours"}); err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{"bea", "BEA"} {
		ms, err := b.Messages(ctx, index.MessageHandoff, to, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 1 || ms[0].To != "BEA" {
			t.Fatalf("handoffs to %q: %+v, want one to BEA", to, ms)
		}
	}
	if ms, _ := b.Messages(ctx, index.MessageHandoff, "ada", 10); len(ms) != 0 {
		t.Fatalf("handoffs to ADA: %+v, want none", ms)
	}
}

// TestActivity: the activity lists a live agent's lease by its branch
// and the branch's recent claim; the board's team view is off when
// snagd runs alone.
func TestActivity(t *testing.T) {
	w := workspacetest.Open(t)
	b, e, ctx := w.Brief, w.Engine, context.Background()
	// An agent over HTTP says its branch (the sample is no git checkout).
	ada, err := e.Register(ctx, index.Session{Name: "ADA", Client: "test", Transport: "http", Branch: "parser"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.Claim(ctx, ada, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	a, err := b.Activity(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.Workspace != e.Workspace() || a.Now.IsZero() {
		t.Fatalf("the activity's workspace %q at %v, want %q now", a.Workspace, a.Now, e.Workspace())
	}
	if len(a.Tasks) != 1 || a.Tasks[0].Key != c.Task.Key || a.Tasks[0].Holder != "ADA" || a.Tasks[0].Title != c.Task.Title ||
		a.Tasks[0].Branch != "parser" {
		t.Fatalf("the activity's tasks: %+v, want %s held by ADA on parser", a.Tasks, c.Task.Key)
	}
	if len(a.Recent) != 1 || a.BranchesTotal != 1 || a.Recent[0].Branch != "parser" ||
		len(a.Recent[0].Claimed) != 1 || a.Recent[0].Claimed[0] != c.Task.Key {
		t.Fatalf("the recent activity: %+v (of %d), want parser's claim of %s", a.Recent, a.BranchesTotal, c.Task.Key)
	}
	if tb := b.TeamBoard(ctx); tb.On || tb.Unreachable != "" || len(tb.Agents) != 0 {
		t.Fatalf("the board's team view alone: %+v, want none", tb)
	}
}
