package mcp_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snagdev/snag/internal/approval"
)

// approveIn records a person's approval of a command for the env's project,
// as snag approve does.
func (e *env) approve(t *testing.T, command string) {
	t.Helper()
	scope, err := approval.Scope(e.root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := approval.Open(filepath.Join(e.home, "approved")).Approve(scope, command, false); err != nil {
		t.Fatal(err)
	}
}

// setVerify gives the task file named by prefix a verify command of its own.
func (e *env) setVerify(t *testing.T, prefix, command string) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(e.root, ".snag", "tasks", prefix+" - *.md"))
	if len(names) != 1 {
		t.Fatalf("no one task file %s: %v", prefix, names)
	}
	raw, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(raw), "\n---\n", "\nverify: {command: \""+command+"\"}\n---\n", 1)
	if err := os.WriteFile(names[0], []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestResolveThroughVerify is the agent's whole loop through snag mcp:
// claim, resolve (a dry run, then the run), poll snag_get until verify
// decides. A pass resolves the task, verified; a failure gives it back to
// the agent with the command's output.
func TestResolveThroughVerify(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setVerify(t, "SNAG-15", "touch badge-fixed")
	e.setVerify(t, "SNAG-11", "sh -c 'echo email field is empty after a wrong password; exit 1'")
	e.approve(t, "touch badge-fixed")
	e.approve(t, "sh -c 'echo email field is empty after a wrong password; exit 1'")
	e.daemon(t)
	cs, _ := e.bridge(t)

	poll := func(key string) (string, map[string]any) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			res, txt, sc := call(t, cs, "snag_get", map[string]any{"id": key})
			mustOK(t, "get "+key, res, txt)
			v, _ := sc["verify"].(map[string]any)
			if v["running"] != true && v["outcome"] != nil && v["outcome"] != "pending" {
				return txt, sc
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("verify of %s did not end", key)
		return "", nil
	}

	res, txt, _ := call(t, cs, "snag_claim", map[string]any{"id": "SNAG-15"})
	mustOK(t, "claim", res, txt)
	res, txt, sc := call(t, cs, "snag_resolve", map[string]any{"id": "SNAG-15", "note": "badge counts after the update"})
	mustOK(t, "resolve", res, txt)
	if sc["status"] != "verifying" || !strings.Contains(txt, `call snag_get {"id": "SNAG-15"} in about`) {
		t.Fatalf("resolve: %v / %s; want verifying and when to call snag_get", sc, txt)
	}
	txt, sc = poll("SNAG-15")
	task := sc["task"].(map[string]any)
	if v := sc["verify"].(map[string]any); v["outcome"] != "pass" || task["status"] != "resolved" || task["verified"] != true {
		t.Fatalf("after verify: verify %v, task %v", v, task)
	}
	if !strings.Contains(txt, "verify: pass") {
		t.Errorf("snag_get text does not give the outcome: %s", txt)
	}
	if _, err := os.Stat(filepath.Join(e.root, "badge-fixed")); err != nil {
		t.Errorf("the command did not run in the project root: %v", err)
	}

	res, txt, _ = call(t, cs, "snag_claim", map[string]any{"id": "SNAG-11"})
	mustOK(t, "claim", res, txt)
	res, txt, _ = call(t, cs, "snag_resolve", map[string]any{"id": "SNAG-11"})
	mustOK(t, "resolve", res, txt)
	txt, sc = poll("SNAG-11")
	task = sc["task"].(map[string]any)
	if v := sc["verify"].(map[string]any); v["outcome"] != "fail" || task["status"] != "claimed" {
		t.Fatalf("after a failed verify: verify %v, task %v", v, task)
	}
	if !strings.Contains(txt, "email field is empty after a wrong password") {
		t.Errorf("snag_get does not show the failure's output: %s", txt)
	}
	// The task is the agent's again: it releases it.
	res, txt, _ = call(t, cs, "snag_release", map[string]any{"id": "SNAG-11", "reason": "needs a design decision"})
	mustOK(t, "release after a failed verify", res, txt)
}

// TestResolveRefusals: nothing can check a task (no command, no captured
// page) is an error that leaves it claimed; no browser is the one refusal
// where calling snag_resolve again is right.
func TestResolveRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// No project command: SNAG-4 has nothing to check it with; SNAG-12 gets a captured page.
	cfg := `{"version": 1, "browser": {"chromium": "/nonexistent/chromium"}}`
	if err := os.WriteFile(filepath.Join(e.root, ".snag", "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	setCapture(t, e, "SNAG-12")
	e.daemon(t)
	cs, _ := e.bridge(t)

	res, txt, _ := call(t, cs, "snag_claim", map[string]any{"id": "SNAG-4"})
	mustOK(t, "claim", res, txt)
	res, txt, _ = call(t, cs, "snag_resolve", map[string]any{"id": "SNAG-4"})
	mustErr(t, "resolve with nothing to check it", res, txt, "nothing can check SNAG-4")
	if !strings.Contains(txt, "yours meanwhile") {
		t.Errorf("the refusal does not say the task stays the agent's: %s", txt)
	}
	_, _, sc := call(t, cs, "snag_get", map[string]any{"id": "SNAG-4"})
	if st := sc["task"].(map[string]any)["status"]; st != "claimed" {
		t.Errorf("status %v after the refusal, want claimed", st)
	}
	res, txt, _ = call(t, cs, "snag_release", map[string]any{"id": "SNAG-4", "reason": "nothing can check it"})
	mustOK(t, "release", res, txt)

	res, txt, _ = call(t, cs, "snag_claim", map[string]any{"id": "SNAG-12"})
	mustOK(t, "claim", res, txt)
	res, txt, sc = call(t, cs, "snag_resolve", map[string]any{"id": "SNAG-12"})
	mustErr(t, "resolve without a browser", res, txt, "needs a browser and none is available")
	if !strings.Contains(txt, "the one refusal where calling snag_resolve") || sc["status"] != "verifying" {
		t.Errorf("resolve without a browser: %v / %s", sc, txt)
	}
}

// setCapture gives a task a captured page, unless it has one (the
// sample's SNAG-12 does).
func setCapture(t *testing.T, e *env, key string) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(e.root, ".snag", "tasks", key+" - *.md"))
	raw, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "\ncapture:") {
		return
	}
	s := strings.Replace(string(raw), "\n---\n", "\ncapture: {url: \"http://localhost:3000/product/7\"}\n---\n", 1)
	if err := os.WriteFile(names[0], []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestResolveAnswers pins what snag_resolve tells the model for every
// answer of verify's dry run, through real snagd processes: a check that
// runs (ok), a command that waits for a person's approval (the task goes to
// needs_review at once and nothing runs), nothing that can check the task,
// no browser, and a project without verify. Each answer must say what
// really happened and what to do next; the texts are a golden file.
func TestResolveAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := `{"version": 1, "browser": {"chromium": "/nonexistent/chromium"}}`
	if err := os.WriteFile(filepath.Join(e.root, ".snag", "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	e.setVerify(t, "SNAG-15", "true")
	e.approve(t, "true")
	e.setVerify(t, "SNAG-11", "touch should-not-exist")
	setCapture(t, e, "SNAG-12")
	e.daemon(t)

	off := newEnv(t)
	cfg = `{"version": 1, "plan": {"verify_on_resolve": false}}`
	if err := os.WriteFile(filepath.Join(off.root, ".snag", "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	off.daemon(t)

	var all strings.Builder
	var cs *sdk.ClientSession
	// Each case is its own agent: an agent holds one task at a time.
	resolve := func(e *env, code, key string) (bool, string, map[string]any) {
		t.Helper()
		cs, _ = e.bridge(t)
		res, txt, _ := call(t, cs, "snag_claim", map[string]any{"id": key})
		mustOK(t, "claim "+key, res, txt)
		res, txt, sc := call(t, cs, "snag_resolve", map[string]any{"id": key})
		fmt.Fprintf(&all, "## %s (%s)\nisError: %v\n%s\n\n", code, key, res.IsError, txt)
		return res.IsError, txt, sc
	}

	if isErr, txt, sc := resolve(e, "ok", "SNAG-15"); isErr || sc["status"] != "verifying" {
		t.Errorf("ok: %v %v %s", isErr, sc, txt)
	}
	isErr, txt, sc := resolve(e, "needs_approval", "SNAG-11")
	if isErr || sc["status"] != "needs_review" || strings.Contains(txt, "verify is running") || strings.Contains(txt, "snag_get") {
		t.Errorf("needs_approval: the answer must say the task went to needs_review and nothing runs: %v %v %s", isErr, sc, txt)
	}
	for _, want := range []string{"snag approve SNAG-11", "nothing was run", "snag_claim"} {
		if !strings.Contains(txt, want) {
			t.Errorf("needs_approval: the answer does not say %q: %s", want, txt)
		}
	}
	// What it said is what happened: needs_review now, no lease, nothing ran.
	_, _, got := call(t, cs, "snag_get", map[string]any{"id": "SNAG-11"})
	if task := got["task"].(map[string]any); task["status"] != "needs_review" {
		t.Errorf("after the needs_approval answer the task is %v", task)
	}
	if v := got["verify"].(map[string]any); v["outcome"] != "needs_approval" || v["running"] == true {
		t.Errorf("after the needs_approval answer verify says %v", v)
	}
	if _, err := os.Stat(filepath.Join(e.root, "should-not-exist")); err == nil {
		t.Error("the unapproved command ran")
	}
	res, txt2, _ := call(t, cs, "snag_release", map[string]any{"id": "SNAG-11", "reason": "x"})
	if !res.IsError {
		t.Errorf("release after needs_approval succeeded, so the lease did not end: %s", txt2)
	}

	if isErr, txt, sc := resolve(e, "no_capture_url", "SNAG-4"); !isErr || !strings.Contains(txt, "yours meanwhile") {
		t.Errorf("no_capture_url: %v %v %s", isErr, sc, txt)
	}
	if isErr, txt, sc := resolve(e, "verify_unavailable", "SNAG-12"); !isErr || sc["status"] != "verifying" {
		t.Errorf("verify_unavailable: %v %v %s", isErr, sc, txt)
	}
	if isErr, txt, sc := resolve(off, "verify_disabled", "SNAG-5"); isErr || sc["status"] != "resolved" {
		t.Errorf("verify_disabled: %v %v %s", isErr, sc, txt)
	}
	golden(t, "resolve.txt", []byte(all.String()))
}
