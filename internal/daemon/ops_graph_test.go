package daemon_test

import (
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/snagdev/snag/api"
	snagd "github.com/snagdev/snag/internal/daemon"
	"github.com/snagdev/snag/internal/engine/brief"
	"github.com/snagdev/snag/internal/ops"
)

// GET /graph answers JSON, or with ?format= the drawing snag graph
// --format draws; a format there is none of is refused.
func TestGraphFormats(t *testing.T) {
	t.Parallel()
	d := startInProcess(t, sampleProject(t), "", snagd.Options{})
	personPost(d, "/notes", map[string]any{"title": "Borrowed the cents rule", "type": "observation", "took_from": "N-1", "by": "dana"})
	for _, c := range []struct {
		query, status, contentType, has string
	}{
		{"", "200", "application/json", `"nodes"`},
		{"?format=svg", "200", "image/svg+xml", "<svg"},
		{"?format=dot&type=observation", "200", "text/vnd.graphviz; charset=utf-8", "Decision graph: observation notes"},
		{"?format=mermaid", "200", "text/plain; charset=utf-8", "flowchart"},
		{"?format=png", "400", "application/json", `"bad_format"`},
	} {
		req, _ := http.NewRequest(http.MethodGet, d.url("/graph"+c.query), nil)
		req.Header.Set("Authorization", "Bearer "+d.token)
		resp := d.raw(req)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := strconv.Itoa(resp.StatusCode); got != c.status || resp.Header.Get("Content-Type") != c.contentType || !strings.Contains(string(b), c.has) {
			t.Errorf("GET /graph%s: %s %s %.200q; want %s %s with %q", c.query, got, resp.Header.Get("Content-Type"), b, c.status, c.contentType, c.has)
		}
	}
}

// The queries of GET /notes and GET /branches keep their bounds: a limit
// over the most is read as the most, branches out of 1 to
// brief.MaxActivityBranches is refused.
func TestNoteAndBranchQueries(t *testing.T) {
	t.Parallel()
	f, _ := reflect.TypeFor[ops.BranchQuery]().FieldByName("Branches")
	if max := f.Tag.Get("max"); max != strconv.Itoa(brief.MaxActivityBranches) {
		t.Errorf("ops.BranchQuery takes branches up to %s; the briefing service reads up to %d", max, brief.MaxActivityBranches)
	}
	d := startInProcess(t, sampleProject(t), "", snagd.Options{})
	for _, c := range []struct {
		path string
		code int
		err  string
	}{
		{"/notes?limit=5000", 200, ""},
		{"/notes?kind=decision&limit=0", 200, ""},
		{"/notes?limit=-1", 400, "bad_limit"},
		{"/notes?sort=new", 400, "bad_query"},
		{"/branches", 200, ""},
		{"/branches?branches=" + strconv.Itoa(brief.MaxActivityBranches), 200, ""},
		{"/branches?branches=0", 400, "bad_branches"},
		{"/branches?branches=" + strconv.Itoa(brief.MaxActivityBranches+1), 400, "bad_branches"},
		{"/plans?all=1", 400, "bad_query"},
	} {
		var e api.Error
		if code := d.get(c.path, &e); code != c.code || e.Code != c.err {
			t.Errorf("GET %s: %d %q; want %d %q", c.path, code, e.Code, c.code, c.err)
		}
	}
}
