package daemon_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClaimLimitOverHTTP: through the JSON API, a session that holds a
// task is refused a second one (409 holding), by id or claim-next, with the
// task held and the calls that free it; a project with
// claim.max_per_session 0 lets a session hold any number.
func TestClaimLimitOverHTTP(t *testing.T) {
	t.Parallel()
	t.Run("default", func(t *testing.T) {
		d := startDaemon(t, sampleProject(t), "")
		a := startAgent(t, d, "")
		if a.Name == "VESPER" || a.Name == "ORCA" {
			t.Errorf("an agent that asked no name is %s, the assignee of a claimed task in the files", a.Name)
		}
		a.claim("SNAG-4")
		for _, cmd := range []string{"claim SNAG-11", "claim"} {
			ans := a.do(cmd)
			var e struct {
				Code    string `json:"error"`
				Message string
			}
			if !strings.HasPrefix(ans, "err 409 ") || json.Unmarshal([]byte(ans[len("err 409 "):]), &e) != nil {
				t.Fatalf("%s while holding SNAG-4: %s", cmd, ans)
			}
			if e.Code != "holding" || !strings.Contains(e.Message, "you already hold SNAG-4") ||
				!strings.Contains(e.Message, "snag_release") || !strings.Contains(e.Message, "snag_resolve") {
				t.Errorf("%s while holding SNAG-4: %+v", cmd, e)
			}
		}
		if st := d.task("SNAG-11").Row.Status; st != "open" {
			t.Errorf("SNAG-11 after a refused claim: %s", st)
		}
		if !d.auditHas("claim", "you already hold SNAG-4") {
			t.Error("the refused claim is not in the audit log")
		}
	})
	t.Run("unlimited", func(t *testing.T) {
		root := sampleProject(t)
		if err := os.WriteFile(filepath.Join(root, ".snag", "config.json"), []byte(`{"version": 1, "claim": {"max_per_session": 0}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		d := startDaemon(t, root, "")
		a := startAgent(t, d, "")
		for _, k := range []string{"SNAG-4", "SNAG-8", "SNAG-11", "SNAG-12"} {
			a.claim(k)
		}
	})
}

// manyClaims lets one session hold any number of tasks in the project at
// root (claim.max_per_session 0), for tests that drain the queue with one
// agent; the rest of its config.json stays.
func manyClaims(t testing.TB, root string) string {
	t.Helper()
	p := filepath.Join(root, ".snag", "config.json")
	cfg := map[string]any{"version": 1}
	if b, err := os.ReadFile(p); err == nil {
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
	}
	claim, _ := cfg["claim"].(map[string]any)
	if claim == nil {
		claim = map[string]any{}
	}
	claim["max_per_session"] = 0
	cfg["claim"] = claim
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}
