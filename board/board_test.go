package board_test

import (
	"bytes"
	"html/template"
	"strings"
	"testing"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/board"
	"github.com/snagdev/snag/graphdraw"
	"github.com/snagdev/snag/queue"
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
	note := api.Note{Key: "N-1", Title: hostile, Type: "decision", Branch: hostile, Commit: hostile, Trust: queue.TrustUnvetted,
		Author: hostile, Tasks: []string{hostile}, Files: []string{hostile}, File: hostile, Worktree: hostile}
	link := api.Link{From: "N-1", To: "N-2", Kind: "chose", Why: hostile, Trust: queue.TrustUnvetted}
	entry := board.Entry{AuditEntry: api.AuditEntry{At: time.Now(), Actor: queue.Agent, Agent: hostile, Action: "claim", Outcome: "ok", Detail: hostile}, Task: "SNAG-1"}
	for _, tc := range []struct {
		page string
		data any
	}{
		{board.PageBoard, &board.BoardPage{Page: page, Columns: []board.Column{{Status: queue.StatusInbox, Title: "Inbox", Cards: []board.Card{card}}}}},
		{board.PageInbox, &board.InboxPage{Page: page, Items: []board.InboxItem{{Card: card, Body: hostile, Capture: task.Capture}}, Severities: queue.Severities}},
		{board.PageTask, &board.TaskPage{Page: page, Card: card, Task: task, Body: board.Markdown([]byte(hostile), false),
			Audit: []board.Entry{entry}, Actions: []board.Action{{Name: "promote", Label: "Promote"}}, Severities: queue.Severities}},
		{board.PageActivity, &board.ActivityPage{Page: page, Entries: []board.Entry{entry}, Agents: []string{hostile}}},
		{board.PageAgents, &board.AgentsPage{Page: page, Agents: []board.Agent{{Session: api.Session{Name: hostile}, Held: []board.Held{{Key: "SNAG-1", Title: hostile}}}}, Team: team}},
		{board.PageProblems, &board.ProblemsPage{Page: page, Problems: []board.Problem{{Path: hostile, Kind: "invalid", Message: hostile}}}},
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
