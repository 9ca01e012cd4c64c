package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// modernEra is MCP 2026-07-28, the sessionless protocol.
var modernEra = &sdk.ClientSessionOptions{ProtocolVersion: "2026-07-28"}

// toolText calls a tool and returns its text, and whether it is an error.
func toolText(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (string, bool, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text + "\n")
		}
	}
	sc, _ := res.StructuredContent.(map[string]any)
	return b.String(), res.IsError, sc
}

// A handle is bound to the credential that made it: a lease handle made
// over the hosted /mcp is refused on the local one (snagd's own token),
// and replacing the hosted token revokes the handles made with the old
// one: their agent ends, and its lease goes back to the queue.
func TestHostedTokenChangeRevokesHandles(t *testing.T) {
	t.Parallel()
	h := startHosted(t)
	cs, b, err := h.connectIn(t, h.tok, "", modernEra)
	if err != nil {
		t.Fatal(err)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("the hosted /mcp answered %q, want 2026-07-28", v)
	}
	txt, isErr, sc := toolText(t, cs, "snag_claim", nil)
	if isErr || sc["task"] == nil {
		t.Fatalf("claim over the hosted /mcp: %s", txt)
	}
	key := sc["task"].(map[string]any)["key"].(string)
	handle, _ := sc["handle"].(string)

	local := modernClient(t, h.daemon, "local-2026")
	txt, isErr, _ = toolText(t, local, "snag_release", map[string]any{"id": key, "reason": "not mine", "handle": handle})
	if !isErr || !strings.Contains(txt, "another credential") {
		t.Errorf("a hosted handle on the local /mcp: %v %s; want it refused as made with another credential", isErr, txt)
	}
	if strings.Contains(h.log.String(), "request failed") {
		t.Errorf("a foreign handle is logged as snagd's own failure:\n%s", h.log.String())
	}

	newTok := newHostedToken(t)
	writeSecret(t, h.tokenFile, newTok)
	h.tok = newTok
	b.tok.Store(&newTok)
	txt, isErr, _ = toolText(t, cs, "snag_release", map[string]any{"id": key, "reason": "old token's handle", "handle": handle})
	if !isErr || !strings.Contains(txt, "snag_claim") {
		t.Errorf("the old token's handle after the token changed: %v %s; want it refused", isErr, txt)
	}
	var task struct{ Row struct{ Status string } }
	if code := h.get("/tasks/"+key, &task); code != 200 || task.Row.Status != "open" {
		t.Errorf("%s after the token its agent's handles were made with changed: %d %q, want open", key, code, task.Row.Status)
	}
	noTokenInLog(t, h.daemon, func() []string { return []string{newTok, handle} })
}

// modernClient connects the go-sdk client, as name, to d's own /mcp with
// its token in MCP 2026-07-28; it is closed when the test ends.
func modernClient(t *testing.T, d *daemon, name string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: name, Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: d.url("/mcp"), MaxRetries: -1,
		HTTPClient: &http.Client{Transport: &bearerOf{tok: d.token}}}, modernEra)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// bearerOf adds a fixed token to every request.
type bearerOf struct{ tok string }

func (b *bearerOf) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// A handle acts only once the call naming it is admitted: a person's
// operation refused to an agent moves no lease even when it names one; a
// lease handle is good for its lease's operations only; the lease moves
// to the session that names it, once, under a new epoch.
func TestAHandleActsOnlyOnceAdmitted(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, sampleProject(t), "")
	c := newAPIClient(t, d, 4)
	a, _ := openSession(t, c, map[string]any{"client": "first"})
	b, bName := openSession(t, c, map[string]any{"client": "second"})
	claim := c.send(a, http.MethodPost, "/claim", map[string]any{})
	var got struct {
		Task   struct{ Key string }
		Handle string
	}
	if claim.Code != http.StatusOK || json.Unmarshal([]byte(claim.Body), &got) != nil || got.Handle == "" {
		t.Fatalf("claim: %v", claim)
	}
	send := func(session int64, handle, method, path string, in any) answer {
		t.Helper()
		req, _ := http.NewRequest(method, d.url(path), nil)
		if in != nil {
			body, _ := json.Marshal(in)
			req, _ = http.NewRequest(method, d.url(path), bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+d.token)
		req.Header.Set("X-Snag-Handle", handle)
		if session != 0 {
			req.Header.Set("X-Snag-Session", strconv.FormatInt(session, 10))
		}
		resp := d.raw(req)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return answer{Code: resp.StatusCode, Body: string(raw)}
	}

	if r := send(b, got.Handle, http.MethodPost, fmt.Sprintf("/sessions/%d/end", a), map[string]any{"by": "x"}); r.Code < 400 {
		t.Errorf("a person's operation by an agent naming a handle: %v, want it refused", r)
	}
	if r := send(b, got.Handle, http.MethodPost, "/reports", map[string]any{"message": "not a lease's"}); r.Code != http.StatusBadRequest ||
		!strings.Contains(r.Body, "agent handle") {
		t.Errorf("a report naming a lease handle: %v, want 400 naming the agent handle", r)
	}
	if v := d.task(got.Task.Key); v.Row.Assignee == bName {
		t.Fatalf("a refused call moved %s to %s", got.Task.Key, bName)
	}
	// Six calls at once from the new session, naming the handle: the lease
	// moves once, and the handle follows it.
	codes := make(chan answer, 6)
	for range 6 {
		go func() {
			codes <- send(b, got.Handle, http.MethodPost, "/files/check", map[string]any{"paths": []string{"a.go"}})
		}()
	}
	for range 6 {
		if r := <-codes; r.Code != http.StatusOK {
			t.Errorf("a check of files naming the handle, six at once: %v", r)
		}
	}
	if v := d.task(got.Task.Key); v.Row.Assignee != bName {
		t.Errorf("%s after the calls naming its handle from %s: assignee %q", got.Task.Key, bName, v.Row.Assignee)
	}
	if r := send(b, got.Handle, http.MethodPost, "/tasks/"+got.Task.Key+"/release", map[string]any{"reason": "taken back"}); r.Code != http.StatusOK {
		t.Fatalf("release by handle from another session: %v", r)
	}
	if r := send(0, got.Handle, http.MethodPost, "/tasks/"+got.Task.Key+"/release", map[string]any{"reason": "again"}); r.Code != http.StatusConflict ||
		!strings.Contains(r.Body, "stale_handle") {
		t.Errorf("the released lease's handle again, as its own agent: %v, want 409 stale_handle", r)
	}
	if !d.auditHas("take_back", got.Task.Key) {
		t.Error("the audit log does not say the lease was taken back")
	}
}
