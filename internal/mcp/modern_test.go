package mcp_test

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
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
	res, txt, _ = call(t, cs, "snag_claim", map[string]any{"agent": handle})
	mustErr(t, "a claim naming a lease handle as its agent", res, txt, "agent handle")

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

	// Every tool call is audited: a read with no agent as (sessionless),
	// a write as its agent. A call's line is written after its answer.
	var log []byte
	waitFor(t, 10*time.Second, func() bool {
		cmd := exec.Command(snagBin, "log", "--json", "--limit", "200")
		cmd.Dir, cmd.Env = e.root, e.environ()
		log, _ = cmd.Output()
		return bytes.Contains(log, []byte(`"(sessionless)"`)) && bytes.Contains(log, []byte("snag_release release "+key))
	}, func() string {
		return "the audit log lacks the sessionless read or the release by handle:\n" + string(log)
	})
}

// M2: a lease handle lets a restarted bridge resolve the task its last
// process claimed, in either era: the lease comes back to the new
// bridge's session.
func TestM2_BridgeRestartResolvesWithTheHandle(t *testing.T) {
	t.Parallel()
	for _, era := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			opts := &sdk.ClientSessionOptions{ProtocolVersion: era}
			e := newEnv(t)
			// The first bridge's session keeps its lease for the grace
			// after it exits: long enough here for a loaded machine to
			// start the second.
			e.startDaemon(t, "--grace", "2m")
			first, cmd := e.bridgeIn(t, opts)
			if v := first.InitializeResult().ProtocolVersion; v != era {
				t.Fatalf("snag mcp answered %q, want %s", v, era)
			}
			res, txt, sc := call(t, first, "snag_claim", nil)
			mustOK(t, "claim", res, txt)
			key := sc["task"].(map[string]any)["key"].(string)
			handle, _ := sc["handle"].(string)
			if handle == "" {
				t.Fatalf("claim over stdio answered no handle: %s", txt)
			}
			first.Close()
			cmd.Wait()

			second, _ := e.bridgeIn(t, opts)
			res, txt, _ = call(t, second, "snag_resolve", map[string]any{"id": key})
			mustErr(t, "resolve without the handle on a new bridge", res, txt, "handle")
			res, txt, sc = call(t, second, "snag_resolve", map[string]any{"id": key, "handle": handle})
			mustOK(t, "resolve with the handle after the restart", res, txt)
			if st := sc["status"]; st == "open" || st == "claimed" {
				t.Errorf("resolve after the restart: status %v", st)
			}
			res, txt, _ = call(t, second, "snag_release", map[string]any{"id": key, "reason": "stale", "handle": "lh_notonesnagdmade000000"})
			mustErr(t, "a handle snagd never made", res, txt, "not one this snagd made")
		})
	}
}

// M2: an agent known by its handle ends when no call names it for the
// idle time (snagd --handle-idle): its lease goes back to the queue, and
// its handles are refused as stale after.
func TestM2_AHandleExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startDaemon(t, "--handle-idle", "2s")
	cs := modernConnect(t, e, "go-2026")
	res, txt, sc := call(t, cs, "snag_claim", nil)
	mustOK(t, "claim", res, txt)
	key := sc["task"].(map[string]any)["key"].(string)
	handle := sc["handle"].(string)
	if !strings.Contains(txt, handle) {
		t.Errorf("claim's text does not give its handle: %s", txt)
	}
	waitOpen(t, cs, key, 30*time.Second, "its agent's handle went unused past --handle-idle")
	res, txt, _ = call(t, cs, "snag_resolve", map[string]any{"id": key, "handle": handle})
	mustErr(t, "resolve with an expired handle", res, txt, "ended")
}

// M2: over 2025-11-25 sessions a lease handle works across sessions of
// one token: a second MCP session releases the lease the first claimed,
// which moves to it first (the file names its agent).
func TestM2_LegacySessionsShareALeaseByHandle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon(t)
	a, b := hMustConnect(t, e), hMustConnect(t, e)
	if v := a.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("legacy connect answered %q", v)
	}
	res, txt, sc := call(t, a, "snag_claim", nil)
	mustOK(t, "claim in session a", res, txt)
	key := sc["task"].(map[string]any)["key"].(string)
	handle := sc["handle"].(string)
	res, txt, _ = call(t, b, "snag_release", map[string]any{"id": key, "reason": "from b"})
	mustErr(t, "release from session b without the handle", res, txt, "handle")
	res, txt, sc = call(t, b, "snag_release", map[string]any{"id": key, "reason": "from b", "handle": handle})
	mustOK(t, "release from session b with a's handle", res, txt)
	if sc["status"] != "open" {
		t.Errorf("release: %v", sc)
	}
}

// M2: a sessionless agent's identity: snag_context gives a new agent its
// handle (a person reads who it is), a report naming it is that agent's,
// and the handoff it leaves reaches another agent's snag_context.
func TestM2_SessionlessContextAndReports(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon(t)
	c := sdk.NewClient(&sdk.Implementation{Name: "go-2026", Version: "2.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: e.hURL() + "?toolsets=queue,team", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: hBearer{hToken(t, e)}}}, &sdk.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, txt, _ := call(t, cs, "snag_context", map[string]any{"name": "ADA"})
	mustOK(t, "context", res, txt)
	i := strings.Index(txt, "agent: ah_")
	if i < 0 {
		t.Fatalf("snag_context of a new sessionless agent gives no agent handle:\n%s", txt)
	}
	agent := strings.Fields(txt[i+len("agent: "):])[0]
	res, txt, _ = call(t, cs, "snag_report", map[string]any{"message": "looked around", "agent": agent})
	mustOK(t, "report with the handle", res, txt)
	if strings.Contains(txt, "agent: ah_") {
		t.Errorf("a report naming its agent made another:\n%s", txt)
	}
	res, txt, _ = call(t, cs, "snag_handoff", map[string]any{"to": "BOB", "title": "over to you", "agent": agent})
	mustOK(t, "handoff", res, txt)
	res, txt, _ = call(t, cs, "snag_context", map[string]any{"name": "BOB"})
	mustOK(t, "context of BOB", res, txt)
	if !strings.Contains(txt, "over to you") || !strings.Contains(txt, "ADA") {
		t.Errorf("BOB's snag_context does not show ADA's handoff:\n%s", txt)
	}
	j := strings.Index(txt, "agent: ah_")
	if j < 0 {
		t.Fatalf("BOB's first snag_context gives no agent handle:\n%s", txt)
	}
	bob := strings.Fields(txt[j+len("agent: "):])[0]

	// A task handed off with its lease to a sessionless agent: it is
	// named by that agent's handle.
	res, txt, sc := call(t, cs, "snag_claim", map[string]any{"agent": agent})
	mustOK(t, "ADA's claim", res, txt)
	key := sc["task"].(map[string]any)["key"].(string)
	res, txt, _ = call(t, cs, "snag_handoff", map[string]any{"to": "BOB", "title": "finish it", "task": key, "agent": agent})
	mustOK(t, "handoff with the task", res, txt)
	res, txt, sc = call(t, cs, "snag_release", map[string]any{"id": key, "reason": "BOB gives it back", "handle": bob})
	mustOK(t, "BOB releases the handed task by his agent handle", res, txt)
	if sc["status"] != "open" {
		t.Errorf("release of the handed-off task: %v", sc)
	}

	names := map[string]bool{}
	for _, s := range e.sessions(t).Sessions {
		names[s.Name] = true
	}
	if len(names) != 2 || !names["ADA"] || !names["BOB"] {
		t.Errorf("live agents %v, want ADA and BOB only", names)
	}
}

// The one prompt, snag_work: listed, and its message names the task it
// is given and the calls that work it (the capability it brings is what
// server/discover declares).
func TestWorkPrompt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs, _ := e.bridge(t, "--no-autostart")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Prompts == nil {
		t.Fatalf("no prompts capability declared: %+v", caps)
	}
	list, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(list.Prompts) != 1 || list.Prompts[0].Name != "snag_work" {
		t.Fatalf("prompts/list: %+v, %v", list, err)
	}
	for _, c := range []struct{ id, want string }{{"", "snag_claim {}"}, {"SNAG-3", `snag_claim {"id": "SNAG-3"}`}} {
		got, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "snag_work", Arguments: map[string]string{"id": c.id}})
		if err != nil || len(got.Messages) != 1 {
			t.Fatalf("prompts/get snag_work %q: %+v, %v", c.id, got, err)
		}
		text := got.Messages[0].Content.(*sdk.TextContent).Text
		for _, want := range []string{c.want, "snag_resolve", "handle", "unvetted"} {
			if !strings.Contains(text, want) {
				t.Errorf("snag_work %q says %q, not %q", c.id, text, want)
			}
		}
	}
}
