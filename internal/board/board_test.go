package board_test

import (
	"bytes"
	"html/template"
	"strings"
	"testing"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/board"
	"github.com/snagdev/snag/internal/graphdraw"
	"github.com/snagdev/snag/internal/queue"
)

const hostile = `<script>alert(1)</script>"><img src=x onerror=alert(2)>`

// TestBoardPagesRender draws every page with task text that tries to be markup:
// it must come out escaped on each.
func TestBoardPagesRender(t *testing.T) {
	v, err := board.New()
	if err != nil {
		t.Fatal(err)
	}
	card := board.Card{ID: "tsk_1", Key: "SNAG-1", Title: hostile, Status: queue.StatusInbox, Trust: queue.TrustUnvetted,
		Severity: queue.SeverityHigh, Kind: queue.KindBug, Wave: 1, Assignee: hostile, BlockedBy: []string{"SNAG-2"},
		Team: &board.TeamHold{Holder: hostile, Host: hostile, Branch: hostile, Epoch: 2}}
	team := board.Team{On: true, Clones: []board.TeamClone{{Host: hostile, Root: hostile, Branch: hostile, Agents: 1}},
		Agents: []board.TeamAgent{{Name: hostile, Client: hostile, Host: hostile, Root: hostile, Branch: hostile,
			Held:  []board.TeamHeld{{Held: board.Held{Key: "SNAG-1", Title: hostile}, Here: true}, {Held: board.Held{Key: hostile}}},
			Files: []api.FileClaim{{Path: hostile, Holder: hostile}}}}}
	page := board.Page{Head: hostile, CSRF: "tok", Live: true, Inbox: 1}
	task := &queue.Task{ID: "tsk_1", Key: "SNAG-1", Title: hostile, Capture: &queue.Capture{URL: "javascript:alert(3)", ConsoleErrors: []string{hostile}}}
	capture := &queue.Capture{URL: "javascript:alert(3)", Title: hostile, UserAgent: hostile, Anchor: hostile, AnchorText: hostile,
		Viewport: &queue.Viewport{Width: 1024, Height: 640, Scale: 2}, AnchorBox: &queue.Box{X: 1, Y: 2, Width: 3, Height: 4},
		ConsoleErrors: []string{hostile}, NetworkErrors: []string{hostile}, Screenshots: []string{"shots/a.png"}, Crop: "shots/b.png"}
	note := api.Note{Key: "N-1", Title: hostile, Type: "decision", Branch: hostile, Commit: hostile, Trust: queue.TrustUnvetted,
		Author: hostile, Tasks: []string{hostile}, Files: []string{hostile}, File: hostile, Worktree: hostile}
	link := api.Link{From: "N-1", To: "N-2", Kind: "chose", Why: hostile, Trust: queue.TrustUnvetted}
	entry := board.Entry{AuditEntry: api.AuditEntry{At: time.Now(), Actor: queue.Agent, Agent: hostile, Action: "claim", Outcome: "ok", Detail: hostile}, Task: "SNAG-1"}
	for _, tc := range []struct {
		page string
		data any
	}{
		{board.PageBoard, &board.BoardPage{Page: page, Columns: []board.Column{{Status: queue.StatusInbox, Title: "Inbox", Cards: []board.Card{card}}}}},
		{board.PageInbox, &board.InboxPage{Page: page, Items: []board.InboxItem{{Card: card, Body: hostile, Capture: capture,
			Thumb: &board.Picture{URL: "/board/shots/b.png", Width: 160, Height: 48}, ThumbAlt: hostile}}, Severities: queue.Severities}},
		{board.PageTask, &board.TaskPage{Page: page, Card: card, Task: task, Body: board.Markdown([]byte(hostile), false),
			Audit: []board.Entry{entry}, Actions: []board.Action{{Name: "promote", Label: "Promote"}}, Severities: queue.Severities}},
		{board.PageTask, &board.TaskPage{Page: page, Card: card, Task: task, Body: board.Markdown([]byte(hostile), false),
			Capture: &board.CaptureView{Capture: capture, Shot: &board.Picture{URL: "/board/shots/a.png", Width: 1024, Height: 640},
				Crop: &board.Picture{URL: "/board/shots/b.png"}, Outline: &board.Outline{ViewW: 1024, ViewH: 640, X: 1, Y: 2, W: 3, H: 4}, Fold: hostile},
			Visual: &board.VisualView{Before: &board.Picture{URL: "/board/shots/b.png"}, After: &board.Picture{URL: "/board/shots/c.png"},
				Visual: api.Visual{Changed: 0.125}, Outcome: hostile, Decide: true}}},
		{board.PageActivity, &board.ActivityPage{Page: page, Entries: []board.Entry{entry}, Agents: []string{hostile}}},
		{board.PageAgents, &board.AgentsPage{Page: page, Agents: []board.Agent{{Session: api.Session{Name: hostile}, Held: []board.Held{{Key: "SNAG-1", Title: hostile}}}}, Team: team}},
		{board.PageProblems, &board.ProblemsPage{Page: page, Found: []board.Problem{{Path: hostile, Kind: "invalid", Message: hostile}}}},
		{board.PageMessage, &board.MessagePage{Page: page, Heading: hostile, Message: hostile, Command: "snag open"}},
		{board.PageNotes, &board.NotesPage{Page: page, Notes: []api.Note{note}}},
		{board.PageNote, &board.NotePage{Page: page, Note: &api.NoteDetail{Note: note, Body: hostile}, Body: board.Markdown([]byte(hostile), false),
			Out: []board.NoteLink{{Link: link, Key: "N-2", Title: hostile}}, In: []board.NoteLink{{Link: link, Key: "N-3", Title: hostile}}}},
		{board.PageGraph, &board.GraphPage{Page: page, Branches: []string{hostile}, Tasks: []string{hostile},
			Picture: template.HTML(graphdraw.SVG(graphdraw.Graph{Title: hostile, Nodes: []graphdraw.Node{{Key: "N-1", Title: hostile, Type: hostile,
				Branch: hostile, Href: "/team/notes/N-1"}, {Key: "N-2", Title: hostile, Href: "javascript:alert(3)"}},
				Edges: []graphdraw.Edge{{From: "N-1", To: "N-2", Kind: hostile, Why: hostile}}})),
			Nodes: []board.GraphNode{{Note: note, Out: []board.NoteLink{{Link: link, Key: "N-2", Title: hostile}}}}}},
	} {
		t.Run(tc.page, func(t *testing.T) {
			var buf bytes.Buffer
			if err := v.Render(&buf, tc.page, tc.data); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, bad := range []string{"<script>alert", "<img src=x", `href="javascript`} {
				if strings.Contains(out, bad) {
					t.Errorf("%s page holds %q unescaped", tc.page, bad)
				}
			}
			for _, want := range []string{`<html lang="en">`, "<title>", `<main id="main"`, "<h1"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s page lacks %s", tc.page, want)
				}
			}
			if !strings.Contains(out, "&lt;script&gt;alert(1)&lt;/script&gt;") {
				t.Errorf("%s page does not show the hostile text escaped", tc.page)
			}
		})
	}
}

// TestProblemsTabCountsWhatThePageLists: the Problems tab of the problems
// page shows the count the page was given (rows and dangling entries
// alike), a number, never the page's list.
func TestProblemsTabCountsWhatThePageLists(t *testing.T) {
	v, err := board.New()
	if err != nil {
		t.Fatal(err)
	}
	found := []board.Problem{{Path: "a.md", Kind: "invalid", Message: "x"}, {Path: "b.md", Kind: "dangling", Message: "y"}, {Path: "c.md", Kind: "duplicate", Message: "z"}}
	var buf bytes.Buffer
	if err := v.Render(&buf, board.PageProblems, &board.ProblemsPage{Page: board.Page{Head: "Problems", CSRF: "tok", Problems: len(found)}, Found: found}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, `<span class="count warn" aria-label="3 problems">3</span>`) || strings.Contains(out, "[{") {
		t.Errorf("the Problems tab does not show the count 3:\n%s", out)
	}
}

// TestVisualFigure: how much of the element changed, as the task's page
// says it: one decimal at most, never 0% or 100% when it is not.
func TestVisualFigure(t *testing.T) {
	for _, tc := range []struct {
		v    api.Visual
		want string
	}{
		{api.Visual{Changed: 0.125}, "12.5% of the element's pixels changed"},
		{api.Visual{Changed: 0.25}, "25% of the element's pixels changed"},
		{api.Visual{Changed: 0.03125}, "3.1% of the element's pixels changed"},
		{api.Visual{Changed: 0.0004}, "under 0.1% of the element's pixels changed"},
		{api.Visual{Changed: 0.9996}, "over 99.9% of the element's pixels changed"},
		{api.Visual{Changed: 1}, "100% of the element's pixels changed"},
		{api.Visual{Changed: 0}, "0% of the element's pixels changed"},
		{api.Visual{Changed: 0.0004, Identical: true}, "The element looks exactly as captured"},
	} {
		if got := (board.VisualView{Visual: tc.v}).Figure(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestPictureFit: a thumbnail keeps its picture's shape and never grows.
func TestPictureFit(t *testing.T) {
	for _, tc := range []struct {
		in, want board.Picture
	}{
		{board.Picture{Width: 1024, Height: 640}, board.Picture{Width: 160, Height: 100}},
		{board.Picture{Width: 200, Height: 60}, board.Picture{Width: 160, Height: 48}},
		{board.Picture{Width: 100, Height: 600}, board.Picture{Width: 20, Height: 120}},
		{board.Picture{Width: 50, Height: 20}, board.Picture{Width: 50, Height: 20}},
		{board.Picture{Width: 4000, Height: 1}, board.Picture{Width: 160, Height: 1}},
		{board.Picture{}, board.Picture{}},
	} {
		if got := tc.in.Fit(160, 120); got != tc.want {
			t.Errorf("%+v fit in 160 by 120: %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
