package daemon_test

import (
	"context"
	"net/http"
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

	c := sdk.NewClient(&sdk.Implementation{Name: "local-2026", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	local, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: h.url("/mcp"), MaxRetries: -1,
		HTTPClient: &http.Client{Transport: &bearerOf{tok: h.token}}}, modernEra)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	txt, isErr, _ = toolText(t, local, "snag_release", map[string]any{"id": key, "reason": "not mine", "handle": handle})
	if !isErr || !strings.Contains(txt, "another credential") {
		t.Errorf("a hosted handle on the local /mcp: %v %s; want it refused as made with another credential", isErr, txt)
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

// bearerOf adds a fixed token to every request.
type bearerOf struct{ tok string }

func (b *bearerOf) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}
