package board_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/pgtest"
	"github.com/snagdev/snag/internal/snagdtest"
)

// bins holds the snagd the board's tests run, built once per test process.
var bins *snagdtest.Dir

func TestMain(m *testing.M) {
	dir, err := snagdtest.NewDir("board-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins = dir
	code := pgtest.Main(m) // the team-mode tests share a PostgreSQL cluster
	dir.Remove()
	os.Exit(code)
}

// daemon is a real snagd process serving a project: the board's real
// Backend, behind snagd's real guard.
type daemon struct {
	t     *testing.T
	p     *snagdtest.Process
	root  string
	port  int
	token string
	log   *snagdtest.Buffer
}

// sampleProject is a fresh copy of the sample project.
func sampleProject(t *testing.T) string { return snagdtest.Sample(t) }

// startDaemon runs snagd (built with -race) on root with a SNAG_HOME of
// its own and waits until it is ready.
func startDaemon(t *testing.T, root string) *daemon {
	t.Helper()
	return startDaemonEnv(t, root, nil)
}

// startDaemonEnv is startDaemon with more environment and flags: team
// mode's $SNAG_COORD, say.
func startDaemonEnv(t *testing.T, root string, env []string, args ...string) *daemon {
	t.Helper()
	bin, err := bins.Build("snagd", snagdtest.Snagd, "-race")
	if err != nil {
		t.Fatal(err)
	}
	p := snagdtest.Start(t, snagdtest.Options{Bin: bin, Root: root, Home: filepath.Join(t.TempDir(), "home"),
		Port: snagdtest.FreePort(t), Args: append([]string{"--log", "debug"}, args...), Env: env})
	p.WaitReady(t, 30*time.Second)
	return &daemon{t: t, p: p, root: root, port: p.Port, token: p.Token, log: p.Log}
}

func (d *daemon) url(path string) string { return d.p.URL(path) }

// do sends an API request with the token and decodes the JSON answer into
// out; it returns the status.
func (d *daemon) do(method, path string, in, out any) int {
	d.t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, d.url(path), body)
	req.Header.Set("Authorization", "Bearer "+d.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp := d.raw(req)
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

func (d *daemon) get(path string, out any) int { return d.do(http.MethodGet, path, nil, out) }

// raw sends a request built by the caller.
func (d *daemon) raw(req *http.Request) *http.Response {
	d.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	return resp
}

// register opens an agent's session over the API and returns its id.
func (d *daemon) register(fields map[string]any) int64 {
	d.t.Helper()
	var sess struct {
		ID int64 `json:"id"`
	}
	if code := d.do(http.MethodPost, "/sessions", fields, &sess); code != http.StatusCreated {
		d.t.Fatalf("register %v: %d", fields, code)
	}
	return sess.ID
}

// claim claims a task for a session over the API.
func (d *daemon) claim(session int64, ref string) {
	d.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, d.url("/tasks/"+ref+"/claim"), strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Snag-Session", fmt.Sprint(session))
	resp := d.raw(req)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		d.t.Fatalf("claim %s: %d %s", ref, resp.StatusCode, b)
	}
}

// taskRow is a task's row as GET /tasks/{ref} gives it.
type taskRow struct{ Key, Status, Assignee, State string }

func (d *daemon) task(ref string) taskRow {
	d.t.Helper()
	var v struct {
		Row taskRow `json:"row"`
	}
	if code := d.get("/tasks/"+ref, &v); code != http.StatusOK {
		d.t.Fatalf("GET /tasks/%s: %d", ref, code)
	}
	return v.Row
}

// auditHas reports whether the audit log has an entry of action whose
// detail holds detail.
func (d *daemon) auditHas(action, detail string) bool {
	var out struct {
		Entries []struct{ Action, Detail string }
	}
	d.get("/audit?limit=1000", &out)
	for _, e := range out.Entries {
		if e.Action == action && strings.Contains(e.Detail, detail) {
			return true
		}
	}
	return false
}

// as sends an agent's API request (with its session) and decodes the
// answer into out; it fails the test on an answer other than 2xx.
func (d *daemon) as(session int64, method, path string, in, out any) {
	d.t.Helper()
	b, _ := json.Marshal(in)
	req, _ := http.NewRequest(method, d.url(path), bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Snag-Session", fmt.Sprint(session))
	resp := d.raw(req)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		d.t.Fatalf("%s %s as session %d: %d %s", method, path, session, resp.StatusCode, body)
	}
	if out != nil {
		json.Unmarshal(body, out)
	}
}
