package mcp_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/snagdev/snag/internal/snag"
)

// TestTransportsAuditAlike: the same tool calls, made over the stdio
// bridge (snagd's operations over HTTP) and over /mcp (in process), are
// audited in the same words: the tool, the operation and its target, and
// the outcome.
func TestTransportsAuditAlike(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon(t)
	script := func(t *testing.T, cs *sdk.ClientSession) {
		call(t, cs, "snag_list", nil)
		res, txt, _ := call(t, cs, "snag_get", map[string]any{"id": "SNAG-999"})
		mustErr(t, "get SNAG-999", res, txt, "no such task")
		res, txt, _ = call(t, cs, "snag_search", map[string]any{"query": "checkout"})
		mustOK(t, "search", res, txt)
		claimKey(t, cs, "SNAG-4")
		res, txt, _ = call(t, cs, "snag_get", map[string]any{"id": "SNAG-4"})
		mustOK(t, "get SNAG-4", res, txt)
		res, txt, _ = call(t, cs, "snag_release", map[string]any{"id": "SNAG-4", "reason": "audited alike"})
		mustOK(t, "release SNAG-4", res, txt)
	}
	stdio, _ := e.bridge(t)
	script(t, stdio)
	script(t, hMustConnect(t, e))

	var bySession map[int64][]string
	waitFor(t, 10*time.Second, func() bool {
		bySession = e.toolAudit(t)
		if len(bySession) != 2 {
			return false
		}
		for _, calls := range bySession {
			if len(calls) < 6 {
				return false
			}
		}
		return true
	}, func() string {
		return fmt.Sprintf("want the tool calls of two sessions in the audit log, got %v", bySession)
	})
	var got [][]string
	for _, calls := range bySession {
		got = append(got, calls)
	}
	if !slices.Equal(got[0], got[1]) {
		t.Errorf("the two transports audit the same calls differently:\n%s\n---\n%s", strings.Join(got[0], "\n"), strings.Join(got[1], "\n"))
	}
	want := []string{"snag_list list -> ok", "snag_get get SNAG-999 -> error 404", "snag_search search -> ok",
		"snag_claim claim SNAG-4 -> ok", "snag_get get SNAG-4 -> ok", "snag_release release SNAG-4 -> ok"}
	if !slices.Equal(got[0], want) {
		t.Errorf("tool calls audited:\n%s\nwant:\n%s", strings.Join(got[0], "\n"), strings.Join(want, "\n"))
	}
}

// toolAudit reads snagd's audit log: each session's tool calls, in order,
// as "detail -> outcome".
func (e *env) toolAudit(t *testing.T) map[int64][]string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/audit?tail=1000", e.port), nil)
	req.Header.Set("Authorization", "Bearer "+hToken(t, e))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var log struct{ Entries []snag.AuditEntry }
	if err := json.NewDecoder(resp.Body).Decode(&log); err != nil {
		t.Fatalf("GET /audit: %v", err)
	}
	out := map[int64][]string{}
	for _, en := range log.Entries {
		if en.Action == "tool" {
			out[en.SessionID] = append(out[en.SessionID], en.Detail+" -> "+en.Outcome)
		}
	}
	return out
}
