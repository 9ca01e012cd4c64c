package daemon_test

import (
	"net/http"
	"testing"
)

// A person's promote may set the task's severity and wave in the same
// write (the board's inbox does): the task is open with them, and the
// audit log has the move and the edit. A value no task may have is
// refused, and so is either on another move, with nothing changed.
func TestPromoteSetsSeverityAndWave(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, sampleProject(t), "")
	type answer struct {
		Error, Message string
		Key, Status    string
	}
	for _, c := range []struct {
		name, path string
		body       map[string]any
		code       int
		error      string
	}{
		{"an unknown severity", "/tasks/SNAG-16/promote", map[string]any{"by": "dana", "severity": "urgent"}, http.StatusBadRequest, "bad_severity"},
		{"a wave out of range", "/tasks/SNAG-16/promote", map[string]any{"by": "dana", "wave": 10000}, http.StatusBadRequest, "bad_wave"},
		{"a severity on a reject", "/tasks/SNAG-16/reject", map[string]any{"by": "dana", "severity": "low"}, http.StatusBadRequest, "bad_json"},
		{"a wave on an accept", "/tasks/SNAG-16/accept", map[string]any{"by": "dana", "wave": 2}, http.StatusBadRequest, "bad_json"},
		{"a severity on a take-back", "/tasks/SNAG-16/release", map[string]any{"by": "dana", "severity": "low"}, http.StatusBadRequest, "bad_json"},
	} {
		var out answer
		if code := d.do(http.MethodPost, c.path, c.body, &out); code != c.code || out.Error != c.error || out.Message == "" {
			t.Errorf("%s: %d %+v, want %d %s", c.name, code, out, c.code, c.error)
		}
	}
	var out answer
	if code := d.do(http.MethodPost, "/tasks/SNAG-16/promote", map[string]any{"by": "dana", "severity": "low", "wave": 4}, &out); code != http.StatusOK ||
		out.Key != "SNAG-16" || out.Status != "open" {
		t.Fatalf("promote with severity and wave: %d %+v", code, out)
	}
	var got struct {
		Row struct {
			Status, Severity string
			Wave             int
		}
	}
	d.get("/tasks/SNAG-16", &got)
	if got.Row.Status != "open" || got.Row.Severity != "low" || got.Row.Wave != 4 {
		t.Errorf("SNAG-16 after the promote: %+v, want open, low, wave 4", got.Row)
	}
	var audit struct {
		Entries []struct{ Action, Agent, Outcome, Detail string }
	}
	d.get("/audit?tail=5", &audit)
	var moved, edited bool
	for _, e := range audit.Entries {
		moved = moved || (e.Action == "promote" && e.Agent == "dana" && e.Outcome == "ok")
		edited = edited || (e.Action == "edit" && e.Agent == "dana" && e.Detail == "on promotion from the board: severity high -> low, wave 1 -> 4")
	}
	if !moved || !edited {
		t.Errorf("the audit log has the promote %v and the edit %v: %+v", moved, edited, audit.Entries)
	}
	// A promote without them keeps the file's, as before.
	if code := d.do(http.MethodPost, "/tasks/SNAG-17/promote", map[string]any{"by": "dana"}, &out); code != http.StatusOK || out.Status != "open" {
		t.Fatalf("promote: %d %+v", code, out)
	}
	d.get("/tasks/SNAG-17", &got)
	if got.Row.Severity != "medium" || got.Row.Wave != 2 {
		t.Errorf("SNAG-17 after a plain promote: %+v, want medium, wave 2", got.Row)
	}
}
