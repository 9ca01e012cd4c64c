package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestWrongTokenNamesCause: an MCP host starts snag mcp with a reduced
// environment, so a bridge can read another token file than the snagd
// that runs for the project (started with the person's $SNAG_HOME). The
// bridge must name that cause, the token file it reads and the fix, and not
// tell the agent to start snagd, which would fail: one runs. Real
// processes: snagd with one SNAG_HOME, snag mcp with another.
func TestWrongTokenNamesCause(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon(t)
	other := filepath.Join(t.TempDir(), "other-home")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	bridgeEnv := &env{root: e.root, home: other, port: e.port}
	cs, _ := bridgeEnv.bridge(t)

	res, txt, _ := call(t, cs, "snag_claim", nil)
	mustErr(t, "claim with another token", res, txt, "proof does not match")
	for _, want := range []string{filepath.Join(other, "token"), "SNAG_HOME", "snag install", "cannot help, one runs"} {
		if !strings.Contains(txt, want) {
			t.Errorf("the error does not say %q: %s", want, txt)
		}
	}
	if strings.Contains(txt, "start it with") {
		t.Errorf("the error tells the agent to start snagd, which runs already: %s", txt)
	}
	res, txt, _ = call(t, cs, "snag_list", nil)
	mustOK(t, "list from the files", res, txt)
	if !strings.Contains(txt, "another token") {
		t.Errorf("a read from the files does not say why: %s", txt)
	}
}

// TestAgentErrorsNameCalls: errors that reach an agent through MCP name MCP
// calls, never CLI commands (there is no snag claim, and snag list is a
// person's): an unknown task, a blocked one, one in the inbox.
func TestAgentErrorsNameCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon(t)
	cs, _ := e.bridge(t)
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"snag_get", map[string]any{"id": "SNAG-999"}, "snag_list or snag_search"},
		{"snag_claim", map[string]any{"id": "SNAG-999"}, "snag_list or snag_search"},
		{"snag_claim", map[string]any{"id": "SNAG-9"}, `snag_claim {"id": "SNAG-9", "force": true}`},
		{"snag_claim", map[string]any{"id": "SNAG-16"}, "snag_claim with no id"},
	} {
		res, txt, _ := call(t, cs, c.tool, c.args)
		mustErr(t, c.tool+" "+c.args["id"].(string), res, txt, c.want)
		for _, cli := range []string{"snag list", "snag claim", "snag show", "claim it with force"} {
			if strings.Contains(txt, cli) {
				t.Errorf("%s %v: the error names %q, a CLI command: %s", c.tool, c.args, cli, txt)
			}
		}
	}
}

// TestShotResourcesStayInShots: snag://shot/ reads only plain files of
// .snag/shots: a name that climbs out, names a folder, or reaches a task
// file is refused as not found.
func TestShotResourcesStayInShots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs, _ := e.bridge(t, "--no-autostart")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "snag://shot/SNAG-1-0.png"}); err != nil || len(rr.Contents[0].Blob) == 0 {
		t.Fatalf("read a screenshot: %v", err)
	}
	for _, uri := range []string{"snag://shot/..%2Fconfig.json", "snag://shot/%2E%2E%2Fconfig.json", "snag://shot/..", "snag://shot/",
		"snag://shot/tasks%2FSNAG-1%20-%20Checkout%20button%20does%20nothing%20on%20Safari.md", "snag://shot/%2Fetc%2Fpasswd"} {
		if rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("%s was read: %d bytes", uri, len(rr.Contents[0].Blob)+len(rr.Contents[0].Text))
		}
	}
}

// TestListCursorIsShort: snag_list's more: cursor is a short token that
// continues the list, and an unknown one says how to start again.
func TestListCursorIsShort(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon(t)
	cs, _ := e.bridge(t)
	_, txt, sc := call(t, cs, "snag_list", map[string]any{"limit": 5})
	next, _ := sc["next"].(string)
	if next == "" || len(next) > 8 || !strings.Contains(txt, `more: snag_list {"cursor": "`+next+`"}`) {
		t.Fatalf("first page: next %q, text %s", next, txt)
	}
	seen := map[string]bool{}
	for _, r := range sc["tasks"].([]any) {
		seen[r.(map[string]any)["key"].(string)] = true
	}
	res, txt, sc := call(t, cs, "snag_list", map[string]any{"limit": 5, "cursor": next})
	mustOK(t, "second page", res, txt)
	for _, r := range sc["tasks"].([]any) {
		if k := r.(map[string]any)["key"].(string); seen[k] {
			t.Errorf("%s on both pages", k)
		}
	}
	res, txt, _ = call(t, cs, "snag_list", map[string]any{"cursor": "c999"})
	mustErr(t, "unknown cursor", res, txt, "snag_list without a cursor")
}

// TestSchemasHaveNoTypeUnions: no input or output schema uses a type
// union (type: [null, ...]), which some hosts' tool dialects refuse (the
// MCP Inspector's --strict warns of each); a nullable output is anyOf.
func TestSchemasHaveNoTypeUnions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs, _ := e.bridge(t, "--no-autostart")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tl, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var walk func(tool, at string, v any)
	walk = func(tool, at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v["type"].([]any); ok {
				t.Errorf("%s: %s has a type union %v", tool, at, v["type"])
			}
			for k, x := range v {
				walk(tool, at+"/"+k, x)
			}
		case []any:
			for i, x := range v {
				walk(tool, fmt.Sprintf("%s/%d", at, i), x)
			}
		}
	}
	for _, tool := range tl.Tools {
		for at, sc := range map[string]any{"inputSchema": tool.InputSchema, "outputSchema": tool.OutputSchema} {
			b, _ := json.Marshal(sc)
			var v any
			json.Unmarshal(b, &v)
			walk(tool.Name, at, v)
		}
	}
}
