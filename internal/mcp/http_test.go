package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snagdev/snag/api"
	daemonpkg "github.com/snagdev/snag/internal/daemon"
)

// hBearer adds the bearer token (when set) to every request the SDK's
// client sends.
type hBearer struct{ tok string }

func (b hBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.tok != "" {
		r.Header.Set("Authorization", "Bearer "+b.tok)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func hToken(t *testing.T, e *env) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.home, "token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// hSweeps is snagd's count of its sweeps of the sessions so far (GET
// /health?progress=1).
func hSweeps(t *testing.T, e *env) int64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health?progress=1", e.port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h api.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Progress == nil {
		t.Fatalf("GET /health?progress=1: %v, progress %v", err, h.Progress)
	}
	return h.Progress.Sweeps
}

func (e *env) hURL() string { return fmt.Sprintf("http://127.0.0.1:%d/mcp", e.port) }

// hConnect connects the go-sdk client to snagd's /mcp with the token.
func hConnect(t *testing.T, e *env, tok string) (*sdk.ClientSession, error) {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "go-http-test", Version: "1.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: e.hURL(), MaxRetries: -1,
		HTTPClient: &http.Client{Transport: hBearer{tok}}}, legacyEra)
}

func hMustConnect(t *testing.T, e *env) *sdk.ClientSession {
	t.Helper()
	cs, err := hConnect(t, e, hToken(t, e))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestHTTPTools(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon(t)
	cs := hMustConnect(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	tl, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Tools) != 8 {
		t.Errorf("%d tools over /mcp, want 8", len(tl.Tools))
	}

	res, txt, sc := call(t, cs, "snag_list", nil)
	mustOK(t, "list", res, txt)
	if sc["source"] != "daemon" || !strings.Contains(txt, "source: daemon") {
		t.Errorf("list: want source daemon, got %v / %s", sc["source"], txt)
	}
	for _, row := range sc["tasks"].([]any) {
		if tr := row.(map[string]any)["trust"]; tr != "vetted" && tr != "unvetted" {
			t.Errorf("list: row without trust: %v", row)
		}
	}

	res, txt, sc = call(t, cs, "snag_claim", nil)
	mustOK(t, "claim", res, txt)
	task, _ := sc["task"].(map[string]any)
	if task == nil {
		t.Fatalf("claim: no task: %s", txt)
	}
	key := task["key"].(string)
	res, txt, sc = call(t, cs, "snag_release", map[string]any{"id": key, "reason": "testing release over http"})
	mustOK(t, "release", res, txt)
	if sc["status"] != "open" || sc["source"] != "daemon" {
		t.Errorf("release: %v", sc)
	}

	res, txt, sc = call(t, cs, "snag_add", map[string]any{"title": "Found over HTTP", "kind": "chore"})
	mustOK(t, "add", res, txt)
	if sc["trust"] != "unvetted" || sc["status"] != "inbox" {
		t.Errorf("add: %v", sc)
	}

	// The session snagd registered for this MCP session says it came over
	// HTTP, with the client's name.
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/sessions", e.port), nil)
	req.Header.Set("Authorization", "Bearer "+hToken(t, e))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var ss struct {
		Sessions []struct{ Client, Transport string }
	}
	json.NewDecoder(resp.Body).Decode(&ss)
	resp.Body.Close()
	if !slices.ContainsFunc(ss.Sessions, func(s struct{ Client, Transport string }) bool {
		return s.Client == "go-http-test" && s.Transport == "http"
	}) {
		t.Errorf("no session of go-http-test over http in %+v", ss.Sessions)
	}

	// snag log reads snag.db itself, and a tool call's own line is written
	// after its answer has gone (within index.AuditDelay): look again until
	// every line is there, or for 10 s.
	wants := []string{"snag_list list", "snag_claim claim", "snag_release release " + key,
		"testing release over http", "snag_add add", "go-http-test"}
	var lacking []string
	var out []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		cmd := exec.Command(snagBin, "log", "--json", "--limit", "100")
		cmd.Dir, cmd.Env = e.root, e.environ()
		if out, err = cmd.Output(); err != nil {
			t.Fatalf("snag log: %v", err)
		}
		lacking = slices.DeleteFunc(slices.Clone(wants), func(w string) bool { return strings.Contains(string(out), w) })
		if len(lacking) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range lacking {
		t.Errorf("the audit log does not say %q:\n%s", want, out)
	}
}

// TestHTTPSessionEndReleasesLeases: the MCP client's DELETE ends its snag
// session, and its lease is released after snagd's grace.
func TestHTTPSessionEndReleasesLeases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon(t)
	cs, err := hConnect(t, e, hToken(t, e))
	if err != nil {
		t.Fatal(err)
	}
	res, txt, sc := call(t, cs, "snag_claim", nil)
	mustOK(t, "claim", res, txt)
	key := sc["task"].(map[string]any)["key"].(string)
	if err := cs.Close(); err != nil { // sends DELETE /mcp
		t.Fatalf("close: %v", err)
	}
	other := hMustConnect(t, e)
	waitOpen(t, other, key, 10*time.Second, "its MCP session was deleted")
}

const hInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// hDo sends one raw request to /mcp; set maps header names to values
// ("Host" sets the request's host).
func hDo(t *testing.T, e *env, method, body string, set map[string]string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.hURL(), rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range set {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s /mcp: %v", method, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && method == http.MethodGet {
		return resp, "" // a GET stream lasts: its opening is enough
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestHTTPRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon(t)
	tok := hToken(t, e)
	auth := "Bearer " + tok

	for _, c := range []struct {
		name   string
		set    map[string]string
		status int
	}{
		{"no token", nil, http.StatusUnauthorized},
		{"wrong token", map[string]string{"Authorization": "Bearer not-the-token"}, http.StatusUnauthorized},
		{"foreign origin", map[string]string{"Authorization": auth, "Origin": "http://evil.example"}, http.StatusForbidden},
		{"foreign host", map[string]string{"Authorization": auth, "Host": fmt.Sprintf("evil.example:%d", e.port)}, http.StatusForbidden},
		{"made-up session", map[string]string{"Authorization": auth, "Mcp-Session-Id": "MADEUPSESSIONID0123456789"}, http.StatusNotFound},
	} {
		resp, body := hDo(t, e, http.MethodPost, hInit, c.set)
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d: %s", c.name, resp.StatusCode, c.status, body)
		}
	}
	if _, err := hConnect(t, e, ""); err == nil {
		t.Error("the go-sdk client connected without a token")
	}
	if _, err := hConnect(t, e, "wrong"); err == nil {
		t.Error("the go-sdk client connected with a wrong token")
	}

	// A session's life over raw HTTP: its GET stream opens, DELETE ends
	// it, and its id is then stale: 404.
	resp, body := hDo(t, e, http.MethodPost, hInit, map[string]string{"Authorization": auth})
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d, session %q: %s", resp.StatusCode, id, body)
	}
	withID := map[string]string{"Authorization": auth, "Mcp-Session-Id": id, "Mcp-Protocol-Version": "2025-06-18"}
	resp, body = hDo(t, e, http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, withID)
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("initialized: %d: %s", resp.StatusCode, body)
	}
	resp, body = hDo(t, e, http.MethodGet, "", withID)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Errorf("GET stream: %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp, body = hDo(t, e, http.MethodPost, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, withID)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "snag_claim") {
		t.Errorf("tools/list: %d: %.300s", resp.StatusCode, body)
	}
	// Arguments that are not an object are a tool error, and snagd, which
	// serves every agent, goes on serving (a null once took it down).
	for i, args := range []string{`null`, `[1]`, `"x"`, `{"limit":"x"}`} {
		call := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"snag_list","arguments":%s}}`, 10+i, args)
		resp, body = hDo(t, e, http.MethodPost, call, withID)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"isError":true`) && !strings.Contains(body, `"tasks"`) {
			t.Errorf("snag_list with arguments %s: %d: %.300s", args, resp.StatusCode, body)
		}
	}
	resp, body = hDo(t, e, http.MethodDelete, "", withID)
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE: %d: %s", resp.StatusCode, body)
	}
	resp, body = hDo(t, e, http.MethodPost, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, withID)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("stale session: %d, want 404: %s", resp.StatusCode, body)
	}
}

// hDaemon starts snagd with extra flags and waits until it is ready.
func (e *env) hDaemon(t *testing.T, args ...string) { e.startDaemon(t, args...) }

// TestHTTPIdleSessionEnds: a session with nothing in flight past
// --mcp-idle is closed and its lease released; one whose client holds
// its GET stream open lives on.
func TestHTTPIdleSessionEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const idle = time.Second
	e.hDaemon(t, "--mcp-idle", idle.String())
	tok := hToken(t, e)
	connect := func(noStream bool) *sdk.ClientSession {
		c := sdk.NewClient(&sdk.Implementation{Name: "go-http-test", Version: "1.0"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: e.hURL(), MaxRetries: -1,
			DisableStandaloneSSE: noStream, HTTPClient: &http.Client{Transport: hBearer{tok}}}, legacyEra)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	quiet, held := connect(true), connect(false)
	_, txt, sc := call(t, quiet, "snag_claim", nil)
	quietKey, _ := sc["task"].(map[string]any)["key"].(string)
	_, txt2, sc := call(t, held, "snag_claim", nil)
	heldClaimed := time.Now()
	heldKey, _ := sc["task"].(map[string]any)["key"].(string)
	if quietKey == "" || heldKey == "" {
		t.Fatalf("claims: %s / %s", txt, txt2)
	}
	waitOpen(t, held, quietKey, 30*time.Second, "its session was idle past --mcp-idle and the grace")
	// Were the session with its stream open idle too, its lease would end
	// the idle time and the grace after its last request, at the next
	// sweep: let that time pass (the idle clock and the grace are time
	// itself), then wait for two more sweeps, the first of which may have
	// begun before the moment.
	time.Sleep(time.Until(heldClaimed.Add(idle + daemonpkg.DefaultGrace)))
	after := hSweeps(t, e) + 2
	waitFor(t, 30*time.Second, func() bool { return hSweeps(t, e) >= after },
		func() string { return fmt.Sprintf("snagd counted %d sweeps, want %d", hSweeps(t, e), after) })
	_, _, sc = call(t, held, "snag_get", map[string]any{"id": heldKey})
	if st := sc["task"].(map[string]any)["status"]; st != "claimed" {
		t.Errorf("%s of the session with its stream open: %v, want claimed", heldKey, st)
	}
	res, txt, _ := call(t, held, "snag_release", map[string]any{"id": heldKey, "reason": "done"})
	mustOK(t, "release by the live session", res, txt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := quiet.ListTools(ctx, nil); err == nil {
		t.Error("the idle session still answers")
	}
}

// legacyEra pins a go-sdk client to MCP 2025-11-25 (initialize, an MCP
// session): the tests of that era's sessions over /mcp use it, as the
// client's default is the sessionless 2026-07-28.
var legacyEra = &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
