package daemon_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestTasksQueryParameters: GET /tasks reads all=1, yes and true alike (it
// used to take ?all=1 as not-all), and refuses a value it cannot read or a
// parameter it does not know with a 400 that names it, as /search,
// /audit, /reports, /handoffs, /sessions and /events do.
func TestTasksQueryParameters(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, sampleProject(t), "")
	type page struct {
		Tasks   []map[string]any `json:"tasks"`
		Message string           `json:"message"`
	}
	var open, all page
	if code := d.get("/tasks?limit=1000", &open); code != http.StatusOK {
		t.Fatalf("GET /tasks: %d %s", code, open.Message)
	}
	if code := d.get("/tasks?all=true&limit=1000", &all); code != http.StatusOK || len(all.Tasks) <= len(open.Tasks) {
		t.Fatalf("all=true: %d, %d tasks (not-all: %d)", code, len(all.Tasks), len(open.Tasks))
	}
	for _, v := range []string{"1", "yes", "TRUE", "Yes"} {
		var got page
		if code := d.get("/tasks?limit=1000&all="+v, &got); code != http.StatusOK || len(got.Tasks) != len(all.Tasks) {
			t.Errorf("all=%s: HTTP %d, %d tasks; want 200 and %d", v, code, len(got.Tasks), len(all.Tasks))
		}
	}
	for _, v := range []string{"0", "no", "false", ""} {
		var got page
		if code := d.get("/tasks?limit=1000&all="+v, &got); code != http.StatusOK || len(got.Tasks) != len(open.Tasks) {
			t.Errorf("all=%s: HTTP %d, %d tasks; want 200 and %d", v, code, len(got.Tasks), len(open.Tasks))
		}
	}
	for _, c := range []struct{ query, says string }{
		{"/tasks?all=maybe", `all="maybe": want 1, true or yes`},
		{"/tasks?al=1", `unknown query parameter "al"`},
		{"/tasks?all=1&all=0", `"all" is given 2 times`},
		{"/tasks?wave=two", `wave="two": want a whole number`},
		{"/tasks?limit=0", `limit="0": want a whole number from 1`},
		{"/tasks?kind=bugs", `unknown kind "bugs" (want one of bug,`},
		{"/tasks?status=opne", `unknown status "opne" (want one of`},
		{"/search?q=checkout&limit=lots", `limit="lots"`},
		{"/search?query=checkout", `unknown query parameter "query"`},
		{"/audit?after=-1", `after="-1"`},
		{"/audit?tail=lots", `tail="lots": want a whole number from 0`},
		{"/reports?limit=-1", `limit="-1": want a whole number from 0`},
		{"/handoffs?to=ADA&to=LYNX", `"to" is given 2 times`},
		{"/handoffs?from=ADA", `unknown query parameter "from" (this endpoint takes to, limit)`},
		{"/sessions?all=1", `unknown query parameter "all" (this endpoint takes none)`},
		{"/events?since=yesterday", `since="yesterday"`},
		{"/events?from=3", `unknown query parameter "from"`},
	} {
		var got page
		code := d.get(c.query, &got)
		if code != http.StatusBadRequest || !strings.Contains(got.Message, c.says) {
			t.Errorf("GET %s: HTTP %d %q; want 400 saying %q", c.query, code, got.Message, c.says)
		}
	}
	// A limit or tail above the most one answer holds is read as that most.
	for _, q := range []string{"/audit?limit=5000", "/audit?tail=5000&after=3", "/reports?limit=5000", "/handoffs?limit=201&to=ADA"} {
		var got page
		if code := d.get(q, &got); code != http.StatusOK {
			t.Errorf("GET %s: HTTP %d %q; want 200", q, code, got.Message)
		}
	}
}
