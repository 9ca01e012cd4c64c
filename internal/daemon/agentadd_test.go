package daemon_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// An agent's add (a request with its session) lands unvetted in the inbox;
// a person's is vetted and open. A request made for a tool call is in the
// audit log with its session, agent and outcome; a dry run's as a dry run.
func TestAgentAddIsUnvettedAndToolCallsAreAudited(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, sampleProject(t), "")
	var s struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	if code := d.do(http.MethodPost, "/sessions", map[string]any{"name": "WREN", "client": "test"}, &s); code != http.StatusCreated {
		t.Fatalf("register: %d", code)
	}
	send := func(method, path string, body any, tool string) (int, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, d.url(path), bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+d.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Snag-Session", strconv.FormatInt(s.ID, 10))
		if tool != "" {
			req.Header.Set("X-Snag-Tool", tool)
		}
		resp := d.raw(req)
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	code, out := send(http.MethodPost, "/tasks", map[string]any{"title": "Found a flaky test in checkout"}, "snag_add")
	if code != http.StatusCreated || out["status"] != "inbox" || out["trust"] != "unvetted" {
		t.Fatalf("agent add: %d %v", code, out)
	}
	var mine struct {
		Row struct{ Status, Trust string }
	}
	d.get("/tasks/"+out["key"].(string), &mine)
	if mine.Row.Status != "inbox" || mine.Row.Trust != "unvetted" {
		t.Errorf("the agent's task reads back as %+v", mine.Row)
	}
	var person map[string]any
	if code := d.do(http.MethodPost, "/tasks", map[string]any{"title": "A person's task", "by": "dana"}, &person); code != http.StatusCreated ||
		person["status"] != "open" || person["trust"] != "vetted" {
		t.Errorf("person add: %d %v", code, person)
	}
	if code, _ := send(http.MethodGet, "/tasks/SNAG-999", nil, "snag_get"); code != http.StatusNotFound {
		t.Errorf("get of a missing task: %d", code)
	}
	// A dry run changes nothing: its tool call is logged as a dry run, not
	// as an ok that reads like a check.
	if code, out := send(http.MethodPost, "/verify/SNAG-1", map[string]any{"dry_run": true}, "snag_resolve"); code != http.StatusOK {
		t.Errorf("dry run: %d %v", code, out)
	}
	// The holder's resolve takes dry_run too: the same plan, nothing changes.
	if code, out := send(http.MethodPost, "/tasks/SNAG-1/resolve", map[string]any{"dry_run": true}, ""); code != http.StatusOK || out["code"] == nil {
		t.Errorf("dry run of a resolve: %d %v", code, out)
	}
	// A person's move is a person's: an agent's is refused, saying so.
	if code, out := send(http.MethodPost, "/tasks/"+out["key"].(string)+"/promote", map[string]any{}, ""); code != http.StatusForbidden ||
		out["error"] != "person_only" || out["message"] == "" {
		t.Errorf("an agent's promote: %d %v", code, out)
	}
	var audit struct {
		Entries []struct {
			SessionID int64  `json:"session_id"`
			Agent     string `json:"agent"`
			Action    string `json:"action"`
			Outcome   string `json:"outcome"`
			Detail    string `json:"detail"`
		} `json:"entries"`
	}
	d.get("/audit", &audit)
	var tools []string
	for _, e := range audit.Entries {
		if e.Action == "tool" {
			if e.SessionID != s.ID || e.Agent != "WREN" {
				t.Errorf("tool entry without its session: %+v", e)
			}
			tools = append(tools, e.Detail+" -> "+e.Outcome)
		}
	}
	got := strings.Join(tools, "\n")
	if !strings.Contains(got, "snag_add add -> ok") || !strings.Contains(got, "snag_get get SNAG-999 -> error 404") ||
		!strings.Contains(got, "snag_resolve verify_plan SNAG-1 -> dry-run") {
		t.Errorf("tool calls in the audit log:\n%s", got)
	}
}
