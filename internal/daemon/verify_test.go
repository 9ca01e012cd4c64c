package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/approval"
	verifier "github.com/snagdev/snag/internal/browser"
	"github.com/snagdev/snag/internal/codec"
	snagd "github.com/snagdev/snag/internal/daemon"
	"github.com/snagdev/snag/internal/queue"
)

// verifyView is GET /verify/{ref}.
type verifyView struct {
	Key     string
	Status  string
	Running bool
	Outcome string
	Reason  string
	Shot    string
	Visual  *api.Visual
	History []struct {
		ID       int64
		Verifier string
		Command  string
		Outcome  string
		Reason   string
	}
}

// verifyProject is a project whose config.json is cfg, with the tasks
// given, and the per-user folder its snagd will use.
func verifyProject(t *testing.T, cfg string, tasks ...*queue.Task) (root, home string) {
	t.Helper()
	root, w := newProject(t)
	if err := os.WriteFile(filepath.Join(root, ".snag", "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks {
		w.write(tk)
	}
	return root, filepath.Join(t.TempDir(), "home")
}

// approve records a person's approval of a command for root, as snag
// approve does.
func approve(t *testing.T, root, home, command string, shell bool) {
	t.Helper()
	scope, err := approval.Scope(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := approval.Open(filepath.Join(home, "approved")).Approve(scope, command, shell); err != nil {
		t.Fatal(err)
	}
}

func withCommand(tk *queue.Task, command string) *queue.Task {
	tk.Verify = &queue.VerifySpec{Command: command}
	return tk
}

// waitVerify waits for the task's verify to end and returns its state.
func (d *daemon) waitVerify(ref string) verifyView {
	d.t.Helper()
	var v verifyView
	eventually(d.t, "verify of "+ref+" to end", func() bool {
		v = verifyView{}
		return d.get("/verify/"+ref, &v) == 200 && !v.Running && v.Outcome != "" && v.Status != "verifying"
	})
	return v
}

func (d *daemon) status(ref string) string {
	d.t.Helper()
	var v struct {
		Row struct{ Status, Assignee string }
	}
	d.get("/tasks/"+ref, &v)
	return v.Row.Status
}

// resolveAs resolves ref as the agent holding it, with its epoch, and
// returns the answer's status code and body.
func (a *agent) resolveAs(ref string, epoch int64) (int, map[string]any) {
	a.t.Helper()
	ans := a.do(fmt.Sprintf("resolve-code %s %d", ref, epoch))
	f := strings.SplitN(ans, " ", 3)
	if len(f) != 3 || f[0] != "code" {
		a.t.Fatalf("resolve %s: %q", ref, ans)
	}
	var code int
	var out map[string]any
	fmt.Sscan(f[1], &code)
	json.Unmarshal([]byte(f[2]), &out)
	return code, out
}

// TestVerifyCommand runs the command verifier end to end: an agent
// resolves, snagd answers 202 at once, runs the command in the project root
// and moves the task by its outcome.
func TestVerifyCommand(t *testing.T) {
	cases := []struct {
		name      string
		shell     bool
		project   string // config.json's verify.command
		task      string // the task's verify.command
		approve   string // "" approves whatever runs
		timeout   int
		want      string // outcome
		status    string // the task's status after
		reason    string // in the reason
		marker    string // a file the command creates (must exist after)
		notMarker string // a file that must not exist after
	}{
		{name: "pass", project: "touch passed", want: "pass", status: "resolved", reason: "passed (exit 0)", marker: "passed"},
		{name: "fail with output", shell: true, project: "echo the checkout test broke >&2; exit 3", want: "fail", status: "claimed",
			reason: "the checkout test broke"},
		{name: "timeout", project: "sleep 30", timeout: 1, want: "fail", status: "claimed", reason: "timed out"},
		{name: "not found", project: "no-such-program-snag-test --flag", want: "inconclusive", status: "needs_review",
			reason: "no-such-program-snag-test"},
		{name: "task overrides project", project: "touch project-ran", task: "touch task-ran", want: "pass", status: "resolved",
			marker: "task-ran", notMarker: "project-ran"},
		{name: "unapproved never starts", project: "touch should-not-exist", approve: "touch something-else", want: "needs_approval",
			status: "needs_review", reason: "waits for a person's approval", notMarker: "should-not-exist"},
		{name: "no shell without config", project: "touch a; touch b", want: "inconclusive", status: "needs_review",
			reason: "needs a shell", notMarker: "a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 60
			}
			cfg := fmt.Sprintf(`{"version": 1, "verify": {"command": %q, "timeout_seconds": %d, "shell": %v}}`, tc.project, timeout, tc.shell)
			tk := genTask(1, "Checkout breaks")
			if tc.task != "" {
				withCommand(tk, tc.task)
			}
			root, home := verifyProject(t, cfg, tk)
			runs := tc.project
			if tc.task != "" {
				runs = tc.task
			}
			if tc.approve != "" {
				runs = tc.approve
			}
			approve(t, root, home, runs, tc.shell)
			d := startDaemon(t, root, home)
			a := startAgent(t, d, "")
			_, epoch := a.claim("SNAG-1")
			code, out := a.resolveAs("SNAG-1", epoch)
			switch {
			case tc.want == "needs_approval":
				// Known at the dry run: the answer says what happened, at once.
				if code != http.StatusOK || out["status"] != "needs_review" || out["code"] != "needs_approval" ||
					!strings.Contains(fmt.Sprint(out["message"]), "nothing was run") {
					t.Fatalf("resolve: %d %v, want 200 needs_review, code needs_approval, saying nothing was run", code, out)
				}
			case code != http.StatusAccepted || out["status"] != "verifying":
				t.Fatalf("resolve: %d %v, want 202 verifying", code, out)
			}
			v := d.waitVerify("SNAG-1")
			if v.Outcome != tc.want || v.Status != tc.status || !strings.Contains(v.Reason, tc.reason) {
				t.Fatalf("verify: outcome %q, status %q, reason %q; want %q, %q, reason with %q", v.Outcome, v.Status, v.Reason, tc.want, tc.status, tc.reason)
			}
			if tc.marker != "" {
				if _, err := os.Stat(filepath.Join(root, tc.marker)); err != nil {
					t.Errorf("the command did not run in the project root: %v", err)
				}
			}
			if tc.notMarker != "" {
				if _, err := os.Stat(filepath.Join(root, tc.notMarker)); err == nil {
					t.Errorf("%s exists: a command ran that must not have", tc.notMarker)
				}
			}
			raw, _ := os.ReadFile(filepath.Join(root, ".snag", "tasks", queue.FileName("SNAG-1", "Checkout breaks")))
			file, err := codec.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			if string(file.Status) != tc.status || file.Verified != (tc.want == "pass") {
				t.Errorf("task file: status %s, verified %v; want %s, verified %v", file.Status, file.Verified, tc.status, tc.want == "pass")
			}
			switch tc.status {
			case "claimed": // back to its holder, whose lease still works
				if file.Assignee != a.Name {
					t.Errorf("assignee %q after a failed verify, want the holder %s", file.Assignee, a.Name)
				}
				if ans := a.do(fmt.Sprintf("release SNAG-1 %d the check fails", epoch)); !strings.HasPrefix(ans, "ok ") {
					t.Errorf("the holder's lease did not survive the failed verify: %s", ans)
				}
			default: // the lease ended with the work
				if ans := a.do(fmt.Sprintf("release SNAG-1 %d done", epoch)); strings.HasPrefix(ans, "ok ") {
					t.Errorf("a lease outlived verify's outcome %s: %s", tc.want, ans)
				}
			}
			audit := d.auditText()
			if !strings.Contains(audit, "verify") || !strings.Contains(audit, tc.want) {
				t.Errorf("no verify entry with outcome %s in the audit log:\n%s", tc.want, audit)
			}
			if tc.want == "needs_approval" && !strings.Contains(audit, tc.project) {
				t.Errorf("the audit log does not say which command waits (%s):\n%s", tc.project, audit)
			}
		})
	}
}

// auditText is the audit log as text, one entry a line.
func (d *daemon) auditText() string {
	var got struct{ Entries []map[string]any }
	d.get("/audit?limit=1000", &got)
	var b strings.Builder
	for _, e := range got.Entries {
		fmt.Fprintf(&b, "%v %v %v %v %v\n", e["agent"], e["action"], e["task_id"], e["outcome"], e["detail"])
	}
	return b.String()
}

// TestVerifyChangedCommandNeedsApprovalAgain: an approval is of one exact
// command; a task whose command changed (a git pull) waits again.
func TestVerifyChangedCommandNeedsApprovalAgain(t *testing.T) {
	t.Parallel()
	tk := withCommand(genTask(1, "Checkout breaks"), "touch first")
	root, home := verifyProject(t, `{"version": 1}`, tk)
	approve(t, root, home, "touch first", false)
	d := startDaemon(t, root, home)
	a := startAgent(t, d, "")

	var plan map[string]any
	d.do("POST", "/verify/SNAG-1", map[string]any{"dry_run": true}, &plan)
	if plan["code"] != "ok" || plan["approved"] != true || plan["command"] != "touch first" {
		t.Fatalf("dry run of an approved command: %v", plan)
	}
	// The command changes under the approval, as a pull would change it.
	name := filepath.Join(root, ".snag", "tasks", queue.FileName("SNAG-1", "Checkout breaks"))
	raw, _ := os.ReadFile(name)
	changed := strings.Replace(string(raw), "touch first", "touch second", 1)
	if err := os.WriteFile(name, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the edit to be indexed", func() bool {
		plan = nil
		d.do("POST", "/verify/SNAG-1", map[string]any{"dry_run": true}, &plan)
		return plan["command"] == "touch second"
	})
	if plan["approved"] != false || !strings.Contains(fmt.Sprint(plan["message"]), "snag approve SNAG-1") {
		t.Fatalf("dry run of a changed command: %v, want it unapproved, naming snag approve SNAG-1", plan)
	}
	_, epoch := a.claim("SNAG-1")
	if code, out := a.resolveAs("SNAG-1", epoch); code != http.StatusOK || out["code"] != "needs_approval" {
		t.Fatalf("resolve: %d %v", code, out)
	}
	if v := d.waitVerify("SNAG-1"); v.Outcome != "needs_approval" || v.Status != "needs_review" {
		t.Fatalf("verify of a changed command: %+v", v)
	}
	for _, f := range []string{"first", "second"} {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			t.Errorf("%s exists: a command ran", f)
		}
	}
	// A person approves the new command and checks again.
	approve(t, root, home, "touch second", false)
	var out map[string]any
	if code := d.do("POST", "/verify/SNAG-1", map[string]any{"by": "dana"}, &out); code != http.StatusAccepted {
		t.Fatalf("a person's verify of a needs_review task: %d %v", code, out)
	}
	if v := d.waitVerify("SNAG-1"); v.Outcome != "pass" || v.Status != "resolved" {
		t.Fatalf("verify after approval: %+v", v)
	}
	if _, err := os.Stat(filepath.Join(root, "second")); err != nil {
		t.Errorf("the approved command did not run: %v", err)
	}
}

// TestVerifyDryRunCodes: every answer of a dry run, and what a real
// request does for each.
func TestVerifyDryRunCodes(t *testing.T) {
	t.Run("no_capture_url", func(t *testing.T) {
		t.Parallel()
		root, home := verifyProject(t, `{"version": 1}`, genTask(1, "Nothing checks this"))
		d := startDaemon(t, root, home)
		a := startAgent(t, d, "")
		var plan map[string]any
		if code := d.do("POST", "/verify/SNAG-1", map[string]any{"dry_run": true}, &plan); code != 200 || plan["code"] != "no_capture_url" {
			t.Fatalf("dry run: %d %v", code, plan)
		}
		_, epoch := a.claim("SNAG-1")
		code, out := a.resolveAs("SNAG-1", epoch)
		if code != http.StatusConflict || out["error"] != "no_capture_url" || !strings.Contains(fmt.Sprint(out["message"]), "a person resolves it") {
			t.Fatalf("resolve with nothing to check it: %d %v", code, out)
		}
		if st := d.status("SNAG-1"); st != "claimed" {
			t.Fatalf("status %s, want it to stay claimed", st)
		}
		// A person resolves it.
		var moved map[string]any
		if code := d.do("POST", "/tasks/SNAG-1/accept", map[string]any{"by": "dana"}, &moved); code != 200 || moved["status"] != "resolved" {
			t.Fatalf("a person's resolve: %d %v", code, moved)
		}
		if ans := a.do(fmt.Sprintf("release SNAG-1 %d late", epoch)); strings.HasPrefix(ans, "ok ") {
			t.Errorf("the lease outlived a person's resolve: %s", ans)
		}
	})
	t.Run("verify_disabled", func(t *testing.T) {
		t.Parallel()
		tk := withCommand(genTask(1, "Resolved on the agent's word"), "touch ran")
		root, home := verifyProject(t, `{"version": 1, "plan": {"verify_on_resolve": false}}`, tk)
		approve(t, root, home, "touch ran", false)
		d := startDaemon(t, root, home)
		a := startAgent(t, d, "")
		var plan map[string]any
		if code := d.do("POST", "/verify/SNAG-1", map[string]any{"dry_run": true}, &plan); code != 200 || plan["code"] != "verify_disabled" {
			t.Fatalf("dry run: %d %v", code, plan)
		}
		_, epoch := a.claim("SNAG-1")
		// The agent asks for verify through /verify itself: the daemon
		// enforces the project's setting all the same.
		code, out := a.resolveAs("SNAG-1", epoch)
		if code != 200 || out["status"] != "resolved" || out["verified"] != false || out["code"] != "verify_disabled" {
			t.Fatalf("resolve with verify disabled: %d %v", code, out)
		}
		if _, err := os.Stat(filepath.Join(root, "ran")); err == nil {
			t.Error("a verify command ran although the project disabled verify")
		}
	})
	t.Run("verify_unavailable", func(t *testing.T) {
		t.Parallel()
		tk := genTask(1, "Checkout page throws")
		tk.Capture = &queue.Capture{URL: "http://127.0.0.1:9/checkout", ConsoleErrors: []string{"TypeError: cart is undefined"}}
		root, home := verifyProject(t, `{"version": 1, "browser": {"chromium": "/nonexistent/chromium"}}`, tk)
		d := startDaemon(t, root, home)
		a := startAgent(t, d, "")
		req, _ := http.NewRequest("POST", d.url("/verify/SNAG-1"), strings.NewReader(`{"dry_run": true}`))
		req.Header.Set("Authorization", "Bearer "+d.token)
		req.Header.Set("Content-Type", "application/json")
		resp := d.raw(req)
		var plan map[string]any
		jsonDecode(resp, &plan)
		resp.Body.Close()
		if resp.StatusCode != 503 || plan["code"] != "verify_unavailable" || resp.Header.Get("Retry-After") != "" {
			t.Fatalf("dry run: %d %v (Retry-After %q), want 503 verify_unavailable without Retry-After", resp.StatusCode, plan, resp.Header.Get("Retry-After"))
		}
		_, epoch := a.claim("SNAG-1")
		code, out := a.resolveAs("SNAG-1", epoch)
		if code != 503 || out["error"] != "verify_unavailable" || out["status"] != "verifying" {
			t.Fatalf("resolve without a browser: %d %v", code, out)
		}
		if st := d.status("SNAG-1"); st != "verifying" {
			t.Fatalf("status %s, want verifying", st)
		}
		// Asking again is right, and answers the same while no browser is here.
		if code, out := a.resolveAs("SNAG-1", epoch); code != 503 || out["error"] != "verify_unavailable" {
			t.Fatalf("resolve again: %d %v", code, out)
		}
	})
}

// TestL10_ResolveOnlyThroughVerify: an agent's resolve never sets resolved
// by itself, only the holder may resolve, a failed verify keeps the lease,
// and a person cannot use the agent's resolve.
func TestL10_ResolveOnlyThroughVerify(t *testing.T) {
	t.Parallel()
	root, home := verifyProject(t, `{"version": 1, "verify": {"command": "false"}}`, genTask(1, "One"), genTask(2, "Two"))
	approve(t, root, home, "false", false)
	d := startInProcess(t, root, home, snagd.Options{})
	holder, other := startAgent(t, d, ""), startAgent(t, d, "")
	_, epoch := holder.claim("SNAG-1")
	if code, out := other.resolveAs("SNAG-1", epoch); code != http.StatusConflict || out["error"] != "not_held" {
		t.Fatalf("another agent's resolve: %d %v, want 409 not_held", code, out)
	}
	if code, out := other.resolveAs("SNAG-2", 0); code != http.StatusConflict {
		t.Fatalf("resolve of an unclaimed task: %d %v, want 409", code, out)
	}
	var out map[string]any
	if code := d.do("POST", "/tasks/SNAG-1/resolve", map[string]any{}, &out); code != http.StatusBadRequest {
		t.Fatalf("a person's POST /tasks/SNAG-1/resolve: %d %v, want 400", code, out)
	}
	if code, out := holder.resolveAs("SNAG-1", epoch+1); code != http.StatusConflict || out["error"] != "stale" {
		t.Fatalf("resolve with a stale epoch: %d %v", code, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := d.sse(ctx)
	code, res := holder.resolveAs("SNAG-1", epoch)
	if code != http.StatusAccepted || res["status"] != "verifying" {
		t.Fatalf("resolve: %d %v", code, res)
	}
	v := d.waitVerify("SNAG-1")
	seen := 0 // the run's start and its outcome are on the event stream
	for seen < 2 {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the event stream ended")
			}
			if ev == "verify" {
				seen++
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d verify events on the stream, want 2 (started, outcome)", seen)
		}
	}
	if v.Outcome != "fail" || v.Status != "claimed" || !strings.Contains(v.Reason, "exit 1") {
		t.Fatalf("verify: %+v", v)
	}
	// The failed check kept the lease: the holder resolves again.
	if code, res := holder.resolveAs("SNAG-1", epoch); code != http.StatusAccepted {
		t.Fatalf("resolve again after a failure: %d %v", code, res)
	}
	if v := d.waitVerify("SNAG-1"); len(v.History) != 2 {
		t.Fatalf("history: %+v, want two runs", v.History)
	}
}

// TestVerifyFailWithTheHolderGone: the holder dies while its task is
// checked; the failure sends the task back to the queue.
func TestVerifyFailWithTheHolderGone(t *testing.T) {
	t.Parallel()
	// The check outlasts the 3 s grace a gone holder's session gets.
	root, home := verifyProject(t, `{"version": 1, "verify": {"command": "sh -c 'sleep 6; exit 1'"}}`, genTask(1, "One"))
	approve(t, root, home, "sh -c 'sleep 6; exit 1'", false)
	d := startDaemon(t, root, home)
	a := startAgent(t, d, "")
	_, epoch := a.claim("SNAG-1")
	if code, out := a.resolveAs("SNAG-1", epoch); code != http.StatusAccepted {
		t.Fatalf("resolve: %d %v", code, out)
	}
	a.cmd.Process.Kill()
	v := d.waitVerify("SNAG-1")
	if v.Outcome != "fail" || v.Status != "open" {
		t.Fatalf("verify with the holder gone: %+v, want fail and open", v)
	}
}

// TestVerifyConcurrencyBound: several tasks verify at once, never more than
// verify.max_concurrent. Each command takes a lock folder it must create
// fresh: two at once would fail one of them.
func TestVerifyConcurrencyBound(t *testing.T) {
	t.Parallel()
	const cmd = `sh -c 'mkdir running || exit 9; sleep 0.3; rmdir running'`
	var tasks []*queue.Task
	for i := 1; i <= 4; i++ {
		tasks = append(tasks, genTask(i, fmt.Sprintf("Task %d", i)))
	}
	root, home := verifyProject(t, fmt.Sprintf(`{"version": 1, "verify": {"command": %q, "max_concurrent": 1}}`, cmd), tasks...)
	approve(t, root, home, cmd, false)
	d := startDaemon(t, root, home)
	var agents []*agent
	for i := 1; i <= 4; i++ {
		a := startAgent(t, d, "")
		ref := fmt.Sprintf("SNAG-%d", i)
		_, epoch := a.claim(ref)
		if code, out := a.resolveAs(ref, epoch); code != http.StatusAccepted {
			t.Fatalf("resolve %s: %d %v", ref, code, out)
		}
		agents = append(agents, a)
	}
	for i := 1; i <= 4; i++ {
		if v := d.waitVerify(fmt.Sprintf("SNAG-%d", i)); v.Outcome != "pass" {
			t.Errorf("SNAG-%d: %+v (two runs at once?)", i, v)
		}
	}
}

// TestVerifyRestartDuringARun: snagd is killed while a check runs; the
// next snagd ends the cut-off run as interrupted, queues it again and
// applies its outcome.
func TestVerifyRestartDuringARun(t *testing.T) {
	t.Parallel()
	// The first run waits a minute, long after the kill; the one queued
	// again finishes at once.
	const cmd = `sh -c 'echo $$ >> pids; if [ $(wc -l < pids) -lt 2 ]; then sleep 60; fi; touch ran'`
	root, home := verifyProject(t, fmt.Sprintf(`{"version": 1, "verify": {"command": %q}}`, cmd), genTask(1, "One"))
	approve(t, root, home, cmd, false)
	d := startDaemon(t, root, home)
	a := startAgent(t, d, "")
	_, epoch := a.claim("SNAG-1")
	if code, out := a.resolveAs("SNAG-1", epoch); code != http.StatusAccepted {
		t.Fatalf("resolve: %d %v", code, out)
	}
	var pid int
	eventually(t, "the command to start", func() bool {
		b, _ := os.ReadFile(filepath.Join(root, "pids"))
		_, err := fmt.Sscan(string(b), &pid)
		return err == nil
	})
	d.cmd.Process.Kill()
	<-d.done
	// The command dies with the daemon that started it.
	eventually(t, fmt.Sprintf("the verify command (pid %d) to die with snagd", pid), func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(b), ") Z ")
	})
	d2 := startDaemon(t, root, home)
	v := d2.waitVerify("SNAG-1")
	if v.Outcome != "pass" || v.Status != "resolved" {
		t.Fatalf("verify after a restart: %+v", v)
	}
	if len(v.History) != 2 || v.History[1].Outcome != "interrupted" {
		t.Fatalf("history: %+v, want the interrupted run and the one queued again", v.History)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "pids")); len(strings.Fields(string(b))) != 2 {
		t.Errorf("the command ran %d times, want twice (cut off, then again)", len(strings.Fields(string(b))))
	}
}

// chromiumPath finds Chromium as the browser verifier does, or skips
// (fails in CI, where .ci/run installs it).
func chromiumPath(t testing.TB) string {
	t.Helper()
	p, err := verifier.Find("")
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set: the browser tests must run (.ci/run installs Debian's chromium): %v", err)
	}
	t.Skipf("no Chromium: %v", err)
	return ""
}

// TestVerifyBrowser runs the browser verifier through snagd against pages
// the test serves on 127.0.0.1: the captured error seen again fails, gone
// passes, and a capture with no error to compare goes to a person with a
// fresh screenshot.
func TestVerifyBrowser(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Checkout</title><form id="checkout-form"><button type="submit">Place order</button></form>
<script>console.error("TypeError: cart is undefined")</script>`)
	})
	mux.HandleFunc("/fixed", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Checkout</title><form id="checkout-form"><button type="submit">Place order</button></form>`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	captured := []string{"TypeError: cart is undefined (checkout.ts:131)"}
	mk := func(n int, title, path string, errs []string) *queue.Task {
		tk := genTask(n, title)
		tk.Kind = queue.KindUX
		tk.Capture = &queue.Capture{URL: srv.URL + path, Anchor: "#checkout-form button[type=submit]", ConsoleErrors: errs}
		return tk
	}
	root, home := verifyProject(t, `{"version": 1, "claim": {"max_per_session": 0}}`,
		mk(1, "Broken still", "/broken", captured), mk(2, "Fixed now", "/fixed", captured), mk(3, "Looks off", "/fixed", nil))
	d := startDaemon(t, root, home)
	a := startAgent(t, d, "")
	// One agent resolves all three, so the three checks run side by side.
	for _, ref := range []string{"SNAG-1", "SNAG-2", "SNAG-3"} {
		var plan map[string]any
		if d.do("POST", "/verify/"+ref, map[string]any{"dry_run": true}, &plan); plan["verifier"] != "browser" {
			t.Fatalf("dry run of %s: %v, want the browser verifier", ref, plan)
		}
		_, epoch := a.claim(ref)
		if code, out := a.resolveAs(ref, epoch); code != http.StatusAccepted {
			t.Fatalf("resolve %s: %d %v", ref, code, out)
		}
	}
	for _, c := range []struct{ ref, outcome, status, reason string }{
		{"SNAG-1", "fail", "claimed", "cart is undefined"},
		{"SNAG-2", "pass", "resolved", ""},
		{"SNAG-3", "inconclusive", "needs_review", ""},
	} {
		v := d.waitVerify(c.ref)
		if v.Outcome != c.outcome || v.Status != c.status || !strings.Contains(v.Reason, c.reason) {
			t.Errorf("%s: %+v; want %s, %s, reason with %q", c.ref, v, c.outcome, c.status, c.reason)
			continue
		}
		if v.Shot == "" {
			t.Errorf("%s: no screenshot", c.ref)
			continue
		}
		png, err := os.ReadFile(filepath.Join(root, ".snag", v.Shot))
		if err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
			t.Errorf("%s: screenshot %s: %v", c.ref, v.Shot, err)
		}
	}
}

// TestX12_PulledCommandWaitsForApproval: a teammate's commit changes a
// task's verify command and the project's; after a git pull the new
// commands do not run until a person here approves them, and the audit log
// says which command waits.
func TestX12_PulledCommandWaitsForApproval(t *testing.T) {
	t.Parallel()
	needGit(t)
	tk := withCommand(genTask(1, "Checkout breaks"), "touch approved-ran")
	root, home := verifyProject(t, `{"version": 1, "verify": {"command": "touch project-ran"}}`, tk, genTask(2, "Totals"))
	git(t, root, "init", "-q")
	git(t, root, "add", ".snag/tasks", ".snag/config.json")
	git(t, root, "commit", "-qm", "tasks")
	approve(t, root, home, "touch approved-ran", false)
	approve(t, root, home, "touch project-ran", false)

	// A teammate's clone changes both commands, as an attacker's commit could.
	other := filepath.Join(t.TempDir(), "other")
	git(t, filepath.Dir(other), "clone", "-q", root, other)
	name := filepath.Join(".snag", "tasks", queue.FileName("SNAG-1", "Checkout breaks"))
	raw, _ := os.ReadFile(filepath.Join(other, name))
	if err := os.WriteFile(filepath.Join(other, name), []byte(strings.Replace(string(raw), "touch approved-ran", "touch pulled-task-ran", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, ".snag", "config.json"), []byte(`{"version": 1, "verify": {"command": "touch pulled-project-ran"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, other, "commit", "-qam", "new verify commands")

	d := startInProcess(t, root, home, snagd.Options{})
	git(t, root, "pull", "-q", other, "main")
	eventually(t, "the pulled commands to be indexed", func() bool {
		var p1, p2 map[string]any
		d.do("POST", "/verify/SNAG-1", map[string]any{"dry_run": true}, &p1)
		d.do("POST", "/verify/SNAG-2", map[string]any{"dry_run": true}, &p2)
		return p1["command"] == "touch pulled-task-ran" && p2["command"] == "touch pulled-project-ran"
	})
	a := startAgent(t, d, "")
	for _, ref := range []string{"SNAG-1", "SNAG-2"} {
		_, epoch := a.claim(ref)
		if code, out := a.resolveAs(ref, epoch); code != http.StatusOK || out["code"] != "needs_approval" {
			t.Fatalf("resolve %s: %d %v", ref, code, out)
		}
		if v := d.waitVerify(ref); v.Outcome != "needs_approval" || v.Status != "needs_review" {
			t.Fatalf("%s after the pull: %+v, want needs_approval and needs_review", ref, v)
		}
	}
	for _, f := range []string{"pulled-task-ran", "pulled-project-ran", "approved-ran", "project-ran"} {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			t.Errorf("%s exists: a command ran without approval", f)
		}
	}
	audit := d.auditText()
	for _, cmd := range []string{"touch pulled-task-ran", "touch pulled-project-ran"} {
		if !strings.Contains(audit, "needs_approval") || !strings.Contains(audit, cmd) {
			t.Errorf("the audit log does not name the waiting command %q:\n%s", cmd, audit)
		}
	}
}

// BenchmarkVerifyBrowser measures a browser verify through snagd, from a
// person's POST /verify to the outcome in GET /verify: Chromium's start,
// the page's load and settle, the screenshot and applying the outcome. One
// iteration is one check of a page that passes.
func BenchmarkVerifyBrowser(b *testing.B) {
	chromiumPath(b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Checkout</title><button id="pay">Place order</button>`)
	}))
	defer srv.Close()
	root := b.TempDir()
	tasks := filepath.Join(root, ".snag", "tasks")
	if err := os.MkdirAll(tasks, 0o755); err != nil {
		b.Fatal(err)
	}
	n := b.N
	for i := 1; i <= n; i++ {
		tk := genTask(i, fmt.Sprintf("Checkout %d", i))
		tk.Status, tk.Assignee = queue.StatusClaimed, "VESPER"
		tk.Capture = &queue.Capture{URL: srv.URL + "/checkout", Anchor: "#pay", ConsoleErrors: []string{"TypeError: cart is undefined"}}
		if err := os.WriteFile(filepath.Join(tasks, queue.FileName(tk.Key, tk.Title)), codec.Format(tk), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	timeVerifies(b, startBench(b, root), n, func(v verifyView) bool { return v.Outcome == "pass" })
}

// timeVerifies asks snagd d for a person's verify of SNAG-1 to SNAG-n, one
// after another, waits for each outcome, fails the benchmark on one that
// is not what ok wants, and reports the p50 and the slowest, from the
// request to the outcome.
func timeVerifies(b *testing.B, d *benchDaemon, n int, ok func(verifyView) bool) {
	var lat []time.Duration
	b.ResetTimer()
	for i := 1; i <= n; i++ {
		ref := fmt.Sprintf("SNAG-%d", i)
		start := time.Now()
		if code, body, err := d.call(d.client, "POST", "/verify/"+ref, 0, map[string]any{"by": "bench"}); err != nil || code != http.StatusAccepted {
			b.Fatalf("verify %s: %d %s %v", ref, code, body, err)
		}
		for {
			_, body, err := d.call(d.client, "GET", "/verify/"+ref, 0, nil)
			if err != nil {
				b.Fatal(err)
			}
			var v verifyView
			json.Unmarshal(body, &v)
			if !v.Running && v.Outcome != "" {
				if !ok(v) {
					b.Fatalf("%s: %+v", ref, v)
				}
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(percentile(lat, 0.50), "p50-ms")
	b.ReportMetric(percentile(lat, 1), "max-ms")
}

// BenchmarkVerifyVisual measures a visual verify through snagd, as
// BenchmarkVerifyBrowser does a plain browser one: the task's capture has
// the element's crop (taken once, before the timer, by browser.Capture as
// snag capture takes it), so each check also takes the crop again at the
// captured viewport, compares the two and writes the diff. The page is
// unchanged, so each outcome is fail: the element looks as captured.
func BenchmarkVerifyVisual(b *testing.B) {
	chromiumPath(b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Checkout</title><body style="margin:0"><div style="height:300px"></div>
<button id="pay" style="width:160px;height:44px;font:bold 20px sans-serif">Place order</button>`)
	}))
	defer srv.Close()
	vp := verifier.Viewport{Width: 1280, Height: 800, Scale: 1}
	got, err := verifier.Capture(context.Background(), verifier.CaptureRequest{URL: srv.URL + "/checkout",
		AllowedHosts: []string{"127.0.0.1"}, AnchorSelector: "#pay", Viewport: vp})
	if err != nil {
		b.Fatal(err)
	}
	root := b.TempDir()
	tasks, shots := filepath.Join(root, ".snag", "tasks"), filepath.Join(root, ".snag", "shots")
	for _, dir := range []string{tasks, shots} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(shots, "pay.png"), got.Crop, 0o644); err != nil {
		b.Fatal(err)
	}
	n := b.N
	for i := 1; i <= n; i++ {
		tk := genTask(i, fmt.Sprintf("Checkout %d", i))
		tk.Status, tk.Assignee, tk.Kind = queue.StatusClaimed, "VESPER", queue.KindLayout
		tk.Capture = &queue.Capture{URL: srv.URL + "/checkout", Anchor: "#pay", Viewport: &queue.Viewport{Width: 1280, Height: 800, Scale: 1},
			Crop: "shots/pay.png"}
		if err := os.WriteFile(filepath.Join(tasks, queue.FileName(tk.Key, tk.Title)), codec.Format(tk), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	timeVerifies(b, startBench(b, root), n, func(v verifyView) bool {
		return v.Outcome == "fail" && v.Visual != nil && v.Visual.Identical
	})
}
