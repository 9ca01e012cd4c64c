package snag_test

import (
	"encoding/json"
	"testing"

	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// TestEventJSON pins each kind's JSON, as the engine publishes it, to what
// the engine's map[string]any events wrote before the kinds were types:
// the same keys with the same values (the want strings are those maps'
// json.Marshal, keys sorted; the got is compared with its keys sorted
// too). One row per place the engine publishes, with the zero values that
// are news where they can happen.
func TestEventJSON(t *testing.T) {
	tests := []struct {
		name string
		ev   snag.Event
		kind string
		want string
	}{
		{"task: a file read", snag.TaskEvent{Path: "tasks/SNAG-1 - a.md", Added: new(true), Removed: new(false)}, "task",
			`{"added":true,"path":"tasks/SNAG-1 - a.md","removed":false}`},
		{"task: a rename's old path", snag.TaskEvent{Path: "tasks/a.md", Added: new(false), Removed: new(true), Renamed: "tasks/b.md"}, "task",
			`{"added":false,"path":"tasks/a.md","removed":true,"renamed":"tasks/b.md"}`},
		{"task: a merge", snag.TaskEvent{Path: "tasks/a.md", Added: new(false), Removed: new(false), Merged: true}, "task",
			`{"added":false,"merged":true,"path":"tasks/a.md","removed":false}`},
		{"task: kept aside", snag.TaskEvent{Path: "tasks/a.md", Recovered: ".snag/recovered/a.md"}, "task",
			`{"path":"tasks/a.md","recovered":".snag/recovered/a.md"}`},
		{"task: edited", snag.TaskEvent{Key: "SNAG-1", Status: queue.StatusOpen, Edited: true}, "task",
			`{"edited":true,"key":"SNAG-1","status":"open"}`},
		{"task: added", snag.TaskEvent{Path: "tasks/a.md", Added: new(true), Key: "SNAG-1"}, "task",
			`{"added":true,"key":"SNAG-1","path":"tasks/a.md"}`},
		{"task: moved", snag.TaskEvent{Key: "SNAG-1", Status: queue.StatusVerifying}, "task",
			`{"key":"SNAG-1","status":"verifying"}`},
		{"problem", snag.ProblemEvent{Path: "tasks/a.md", Error: "line 2: bad"}, "problem",
			`{"added":false,"error":"line 2: bad","path":"tasks/a.md","removed":false}`},
		{"lease: granted", snag.LeaseEvent{Task: "SNAG-1", Holder: "VESPER", Epoch: 3}, "lease",
			`{"epoch":3,"holder":"VESPER","task":"SNAG-1"}`},
		{"lease: handed off", snag.LeaseEvent{Task: "SNAG-1", Holder: "VESPER", Epoch: 3, Handoff: true}, "lease",
			`{"epoch":3,"handoff":true,"holder":"VESPER","task":"SNAG-1"}`},
		{"lease: released", snag.LeaseEvent{Task: "SNAG-1", Action: queue.ActRelease, Status: queue.StatusOpen}, "lease",
			`{"action":"release","status":"open","task":"SNAG-1"}`},
		{"lease: resolved", snag.LeaseEvent{Task: "SNAG-1", Action: queue.ActResolve, Status: queue.StatusResolved}, "lease",
			`{"action":"resolve","status":"resolved","task":"SNAG-1"}`},
		{"lease: ended", snag.LeaseEvent{Task: "SNAG-1", Ended: true, Reason: "released by ana"}, "lease",
			`{"ended":true,"reason":"released by ana","task":"SNAG-1"}`},
		{"lease: ended by the team", snag.LeaseEvent{Task: "SNAG-1", Ended: true, Reason: "holder's clone gone silent", Source: "team"}, "lease",
			`{"ended":true,"reason":"holder's clone gone silent","source":"team","task":"SNAG-1"}`},
		{"lease: none given up", snag.LeaseEvent{GivenUp: new(0), Reason: "store gone"}, "lease",
			`{"given_up":0,"reason":"store gone"}`},
		{"lease: reconciled", snag.LeaseEvent{Reconciled: true, Released: 2}, "lease",
			`{"reconciled":true,"released":2}`},
		{"session: renamed", snag.SessionEvent{ID: 4, Name: "VESPER", Was: "AGENT-4"}, "session",
			`{"id":4,"name":"VESPER","was":"AGENT-4"}`},
		{"session: started", snag.SessionEvent{ID: 4, Name: "VESPER", Started: true}, "session",
			`{"id":4,"name":"VESPER","started":true}`},
		{"session: ended holding nothing", snag.SessionEvent{ID: 4, Ended: true, Reason: "process gone", Released: new(0)}, "session",
			`{"ended":true,"id":4,"reason":"process gone","released":0}`},
		{"files: claimed", snag.FilesEvent{Holder: "VESPER", Claimed: []string{"web/**"}}, "files",
			`{"claimed":["web/**"],"holder":"VESPER"}`},
		{"files: released", snag.FilesEvent{Holder: "VESPER", Released: []string{"web/a.ts"}}, "files",
			`{"holder":"VESPER","released":["web/a.ts"]}`},
		{"files: freed by a person", snag.FilesEvent{Released: []string{"web/a.ts"}, By: "ana"}, "files",
			`{"by":"ana","released":["web/a.ts"]}`},
		{"handoff: with a task", snag.HandoffEvent{From: "VESPER", To: "ORCA", Title: "finish it", Task: "SNAG-1"}, "handoff",
			`{"from":"VESPER","task":"SNAG-1","title":"finish it","to":"ORCA"}`},
		{"handoff: a message", snag.HandoffEvent{From: "VESPER", To: "ORCA", Title: "look"}, "handoff",
			`{"from":"VESPER","title":"look","to":"ORCA"}`},
		{"note: changed", snag.NoteEvent{Changed: 2}, "note", `{"changed":2}`},
		{"note: written outside git", snag.NoteEvent{Note: "N-1", Type: "decision", Branch: new(""), By: "VESPER"}, "note",
			`{"branch":"","by":"VESPER","note":"N-1","type":"decision"}`},
		{"note: linked", snag.NoteEvent{Note: "N-1", Link: "SNAG-2", LinkKind: "about", By: "VESPER"}, "note",
			`{"by":"VESPER","kind":"about","link":"SNAG-2","note":"N-1"}`},
		{"plan: created", snag.PlanEvent{Plan: "launch", Created: true}, "plan", `{"created":true,"plan":"launch"}`},
		{"plan: status", snag.PlanEvent{Plan: "launch", Status: queue.PlanActive}, "plan", `{"plan":"launch","status":"active"}`},
		{"report: of no task", snag.ReportEvent{From: "VESPER", Message: "done"}, "report",
			`{"from":"VESPER","message":"done","task":""}`},
		{"renumber", snag.RenumberEvent{Task: "SNAG-9", Was: "SNAG-3", ID: "01J", KeptBy: "01H"}, "renumber",
			`{"id":"01J","kept_by":"01H","task":"SNAG-9","was":"SNAG-3"}`},
		{"rescan: nothing added", snag.RescanEvent{Reasons: []string{"timer"}, Files: 3, Added: new(0), Updated: new(1), Removed: new(0)}, "rescan",
			`{"added":0,"files":3,"reasons":["timer"],"removed":0,"updated":1}`},
		{"rescan: no reasons", snag.RescanEvent{Files: 3, Added: new(1), Updated: new(0), Removed: new(0)}, "rescan",
			`{"added":1,"files":3,"reasons":null,"removed":0,"updated":0}`},
		{"rescan: reindex", snag.RescanEvent{Reasons: []string{"reindex"}, Files: 3}, "rescan",
			`{"files":3,"reasons":["reindex"]}`},
		{"verify: started", snag.VerifyEvent{Task: "SNAG-1", Run: 7, Verifier: "command", Started: true}, "verify",
			`{"run":7,"started":true,"task":"SNAG-1","verifier":"command"}`},
		{"verify: not applied", snag.VerifyEvent{Task: "SNAG-1", Run: 7, VerifyOutcome: &snag.VerifyOutcome{Outcome: snag.OutcomePass}}, "verify",
			`{"applied":false,"outcome":"pass","reason":"","run":7,"status":"","task":"SNAG-1"}`},
		{"verify: needs approval", snag.VerifyEvent{Task: "SNAG-1", VerifyOutcome: &snag.VerifyOutcome{Outcome: snag.OutcomeNeedsApproval,
			Reason: "new command", Status: queue.StatusNeedsReview, Applied: true}}, "verify",
			`{"applied":true,"outcome":"needs_approval","reason":"new command","status":"needs_review","task":"SNAG-1"}`},
		{"team", snag.TeamEvent{Resync: true, Source: "team"}, "team", `{"resync":true,"source":"team"}`},
		{"relayed", snag.Relayed{Type: "clone", Data: map[string]any{"joined": true, "source": "team", "host": "h", "branch": ""}}, "clone",
			`{"branch":"","host":"h","joined":true,"source":"team"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.ev.Kind(); got != tt.kind {
				t.Errorf("kind %q, want %q", got, tt.kind)
			}
			if got := sorted(t, tt.ev); got != tt.want {
				t.Errorf("JSON (-want +got):\n-%s\n+%s", tt.want, got)
			}
		})
	}
}

// sorted is ev's JSON with its keys sorted, as a map's.
func sorted(t *testing.T, ev snag.Event) string {
	t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(m)
	return string(b)
}

// TestTaskOf checks that TaskOf finds the task each kind names, as the
// MCP bridge's Watch read it from the maps: key, else task.
func TestTaskOf(t *testing.T) {
	for _, tt := range []struct {
		ev   snag.Event
		want string
	}{
		{snag.TaskEvent{Key: "SNAG-1"}, "SNAG-1"},
		{snag.TaskEvent{Path: "tasks/a.md"}, ""},
		{snag.LeaseEvent{Task: "SNAG-2"}, "SNAG-2"},
		{snag.VerifyEvent{Task: "SNAG-3"}, "SNAG-3"},
		{snag.HandoffEvent{Task: "SNAG-4"}, "SNAG-4"},
		{snag.ReportEvent{Task: "SNAG-5"}, "SNAG-5"},
		{snag.RenumberEvent{Task: "SNAG-6"}, "SNAG-6"},
		{snag.RescanEvent{}, ""},
		{snag.Relayed{Type: "inbox", Data: map[string]any{"key": "SNAG-7", "task": "x"}}, "SNAG-7"},
		{snag.Relayed{Type: "lease", Data: map[string]any{"task": "SNAG-8"}}, "SNAG-8"},
	} {
		if got := snag.TaskOf(tt.ev); got != tt.want {
			t.Errorf("TaskOf(%#v) = %q, want %q", tt.ev, got, tt.want)
		}
	}
}
