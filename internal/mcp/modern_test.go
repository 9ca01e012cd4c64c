package mcp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// modernConnect connects the go-sdk client to snagd's /mcp in MCP
// 2026-07-28, the sessionless protocol (the client's default), and checks
// that it was not answered in an older one.
func modernConnect(t *testing.T, e *env, name string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: name, Version: "2.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: e.hURL(), MaxRetries: -1,
		HTTPClient: &http.Client{Transport: hBearer{hToken(t, e)}}}, &sdk.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("/mcp answered protocol %q, want 2026-07-28", v)
	}
	return cs
}

// M2: over /mcp in the sessionless protocol each request stands alone. A
// read registers no agent; a claim makes one and answers its lease handle
// and its agent handle; a release in another request needs the lease
// handle; the agent handle keeps the agent (it may hold one task); two
// agents on one credential hold separate leases; a handle whose lease
// ended is refused as stale; snag_list's cursor works in the next request;
// GET /sessions shows when each agent ends unless a call names it.
func TestM2_SessionlessClaimReleaseAcrossRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon(t)
	cs := modernConnect(t, e, "go-2026")

	res, txt, sc := call(t, cs, "snag_list", map[string]any{"limit": 1})
	mustOK(t, "list", res, txt)
	next, _ := sc["next"].(string)
	if next == "" {
		t.Fatalf("list of 1: no next cursor: %s", txt)
	}
	res, txt, _ = call(t, cs, "snag_list", map[string]any{"limit": 1, "cursor": next})
	mustOK(t, "list with the cursor of the request before", res, txt)
	if n := len(e.sessions(t).Sessions); n != 0 {
		t.Fatalf("%d sessions after two reads; reads register no agent", n)
	}

	res, txt, sc = call(t, cs, "snag_claim", nil)
	mustOK(t, "claim", res, txt)
	task, _ := sc["task"].(map[string]any)
	if task == nil {
		t.Fatalf("claim: nothing claimed: %s", txt)
	}
	key, name := task["key"].(string), task["assignee"].(string)
	handle, _ := sc["handle"].(string)
	agent, _ := sc["agent"].(string)
	if !strings.HasPrefix(handle, "lh_") || !strings.HasPrefix(agent, "ah_") || !strings.Contains(txt, handle) || !strings.Contains(txt, agent) {
		t.Fatalf("claim: want a lease handle and an agent handle in its answer, got %q, %q:\n%s", handle, agent, txt)
	}

	res, txt, _ = call(t, cs, "snag_release", map[string]any{"id": key, "reason": "no handle"})
	mustErr(t, "release without the handle", res, txt, "handle")

	res, txt, _ = call(t, cs, "snag_claim", map[string]any{"agent": agent})
	mustErr(t, "a second claim by the same agent", res, txt, key)

	res, txt, sc = call(t, cs, "snag_claim", nil) // no handle: another agent
	mustOK(t, "claim by a second agent", res, txt)
	other := sc["task"].(map[string]any)
	if other["key"] == key || other["assignee"] == name {
		t.Fatalf("the second agent got %v as %v; the first holds %s as %s", other["key"], other["assignee"], key, name)
	}

	view := e.sessions(t)
	live := 0
	for _, l := range view.Leases {
		if !l.Detached {
			live++
		}
	}
	if len(view.Sessions) != 2 || live != 2 {
		t.Fatalf("want 2 agents holding 2 leases, got %+v", view)
	}
	for _, s := range view.Sessions {
		if s.Activity.Stream != "handle" || time.Until(s.Activity.EndsAt) < time.Minute || !strings.Contains(s.Activity.Note, "handle") {
			t.Errorf("agent %s: activity %+v; want it known by its handle, ending in about 30 min", s.Name, s.Activity)
		}
	}

	res, txt, sc = call(t, cs, "snag_release", map[string]any{"id": key, "reason": "with the handle", "handle": handle})
	mustOK(t, "release with the handle", res, txt)
	if sc["status"] != "open" {
		t.Errorf("release: %v", sc)
	}
	res, txt, _ = call(t, cs, "snag_release", map[string]any{"id": key, "reason": "again", "handle": handle})
	mustErr(t, "release with a handle whose lease ended", res, txt, "snag_claim")

	res, txt, sc = call(t, cs, "snag_claim", map[string]any{"id": key, "agent": agent})
	mustOK(t, "the first agent claims again by its handle", res, txt)
	if got := sc["task"].(map[string]any)["assignee"]; got != name {
		t.Errorf("claimed by its agent handle as %v, want %s", got, name)
	}
	if sc["agent"] != nil {
		t.Errorf("a claim naming its agent made another: %v", sc["agent"])
	}
}

// M2: a lease handle lets a restarted bridge resolve the task its last
// process claimed: the lease comes back to the new bridge's session.
func TestM2_BridgeRestartResolvesWithTheHandle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon(t)
	first, cmd := e.bridge(t)
	res, txt, sc := call(t, first, "snag_claim", nil)
	mustOK(t, "claim", res, txt)
	key := sc["task"].(map[string]any)["key"].(string)
	handle, _ := sc["handle"].(string)
	if handle == "" {
		t.Fatalf("claim over stdio answered no handle: %s", txt)
	}
	first.Close()
	cmd.Wait()

	second, _ := e.bridge(t)
	res, txt, _ = call(t, second, "snag_resolve", map[string]any{"id": key})
	mustErr(t, "resolve without the handle on a new bridge", res, txt, "handle")
	res, txt, sc = call(t, second, "snag_resolve", map[string]any{"id": key, "handle": handle})
	mustOK(t, "resolve with the handle after the restart", res, txt)
	if st := sc["status"]; st == "open" || st == "claimed" {
		t.Errorf("resolve after the restart: status %v", st)
	}
	res, txt, _ = call(t, second, "snag_release", map[string]any{"id": key, "reason": "stale", "handle": "lh_notonesnagdmade000000"})
	mustErr(t, "a handle snagd never made", res, txt, "not one this snagd made")
}
