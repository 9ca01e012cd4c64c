package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// setConfig writes the project's .snag/config.json before snagd starts.
func (e *env) setConfig(t *testing.T, json string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.root, ".snag", "config.json"), []byte(json), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sessionsView is GET /sessions as these tests read it.
type sessionsView struct {
	Sessions []struct {
		ID        int64
		Name      string
		Transport string
		Activity  struct {
			Idle   bool
			Stream string
			EndsAt time.Time `json:"ends_at"`
			Note   string
		}
	}
	Leases []struct {
		TaskID    string `json:"task_id"`
		SessionID int64  `json:"session_id"`
		Holder    string
		Detached  bool
	}
}

// sessions reads snagd's live sessions and leases with the token.
func (e *env) sessions(t *testing.T) sessionsView {
	t.Helper()
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/sessions", e.port), nil)
	req.Header.Set("Authorization", "Bearer "+hToken(t, e))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v sessionsView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// claimKey claims a task (the next ready one when id is "") and returns
// its key and the assignee the claim wrote: the session's name.
func claimKey(t *testing.T, cs *sdk.ClientSession, id string) (key, assignee string) {
	t.Helper()
	args := map[string]any{}
	if id != "" {
		args["id"] = id
	}
	res, txt, sc := call(t, cs, "snag_claim", args)
	mustOK(t, "claim "+id, res, txt)
	task, _ := sc["task"].(map[string]any)
	if task == nil {
		t.Fatalf("claim %s: nothing claimed: %s", id, txt)
	}
	key, _ = task["key"].(string)
	assignee, _ = task["assignee"].(string)
	return key, assignee
}

// TestClaimOneTaskAtATime: by default a session holds one task: a second
// claim, by id or the next ready one, over stdio or /mcp, is refused with
// the task held and the calls that free it; after a release the claim goes
// through.
func TestClaimOneTaskAtATime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon(t)
	stdio, _ := e.bridge(t)
	for _, tc := range []struct {
		name string
		cs   *sdk.ClientSession
	}{{"stdio", stdio}, {"http", hMustConnect(t, e)}} {
		t.Run(tc.name, func(t *testing.T) {
			first := "SNAG-4"
			if tc.name == "http" {
				first = "SNAG-8"
			}
			claimKey(t, tc.cs, first)
			for _, args := range []map[string]any{{"id": "SNAG-11"}, {}} {
				res, txt, _ := call(t, tc.cs, "snag_claim", args)
				mustErr(t, "second claim", res, txt, "you already hold "+first)
				for _, w := range []string{`snag_resolve {"id": "` + first + `"}`, `snag_release {"id": "` + first + `"`, "one task at a time"} {
					if !strings.Contains(txt, w) {
						t.Errorf("refusal %q does not say %q", txt, w)
					}
				}
				if tc.name == "stdio" && len(args) == 0 {
					golden(t, "claim_holding.txt", []byte(txt+"\n"))
				}
			}
			if _, _, sc := call(t, tc.cs, "snag_get", map[string]any{"id": "SNAG-11"}); sc["task"].(map[string]any)["status"] != "open" {
				t.Errorf("SNAG-11 after a refused claim: %v", sc["task"])
			}
			res, txt, _ := call(t, tc.cs, "snag_release", map[string]any{"id": first, "reason": "taking another"})
			mustOK(t, "release", res, txt)
			if tc.name == "stdio" {
				claimKey(t, tc.cs, "SNAG-11")
				res, txt, _ := call(t, tc.cs, "snag_release", map[string]any{"id": "SNAG-11", "reason": "done looking"})
				mustOK(t, "release", res, txt)
			} else {
				claimKey(t, tc.cs, "SNAG-12")
			}
		})
	}
}

// TestSeveralLeasesReleaseAndResolveInAnyOrder: with claim.max_per_session
// 3, a session holds three tasks and releases or resolves each, in any
// order (the bridge once forgot every lease sharing an epoch with the
// released one); a fourth claim is refused, naming the three.
func TestSeveralLeasesReleaseAndResolveInAnyOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setConfig(t, `{"version": 1, "plan": {"verify_on_resolve": false}, "claim": {"max_per_session": 3}}`)
	e.daemon(t)
	cs, _ := e.bridge(t)
	for _, k := range []string{"SNAG-4", "SNAG-5", "SNAG-8"} {
		claimKey(t, cs, k)
	}
	res, txt, _ := call(t, cs, "snag_claim", map[string]any{"id": "SNAG-11"})
	mustErr(t, "fourth claim", res, txt, "you already hold 3 tasks (SNAG-4, SNAG-5, SNAG-8)")
	res, txt, _ = call(t, cs, "snag_release", map[string]any{"id": "SNAG-5", "reason": "blocked on a decision"})
	mustOK(t, "release SNAG-5", res, txt)
	res, txt, _ = call(t, cs, "snag_release", map[string]any{"id": "SNAG-8", "reason": "out of scope"})
	mustOK(t, "release SNAG-8", res, txt)
	res, txt, _ = call(t, cs, "snag_resolve", map[string]any{"id": "SNAG-4", "note": "fixed"})
	mustOK(t, "resolve SNAG-4", res, txt)
	want := map[string]string{"SNAG-4": "resolved", "SNAG-5": "open", "SNAG-8": "open"}
	for k, st := range want {
		if _, _, sc := call(t, cs, "snag_get", map[string]any{"id": k}); sc["task"].(map[string]any)["status"] != st {
			t.Errorf("%s: %v, want %s", k, sc["task"].(map[string]any)["status"], st)
		}
	}
	for _, l := range e.sessions(t).Leases {
		if !l.Detached { // the sample's own claimed tasks keep theirs
			t.Errorf("lease left after every task was released or resolved: %+v", l)
		}
	}
}

// TestNewSessionDoesNotInheritDetachedLease: the sample's SNAG-1 is
// claimed by VESPER, who has no session: a client that asks no name (snag
// mcp over stdio, or the official clients over /mcp) is not VESPER and
// holds nothing, and when it exits SNAG-1 is still VESPER's; a session that
// asks for VESPER adopts the lease.
func TestNewSessionDoesNotInheritDetachedLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon(t)
	held := func() map[string]string { // task id -> holder, detached or not
		out := map[string]string{}
		for _, l := range e.sessions(t).Leases {
			out[l.Holder] = l.TaskID
		}
		return out
	}
	before := held()
	if before["VESPER"] == "" || before["ORCA"] == "" {
		t.Fatalf("the sample's claimed tasks have no detached leases: %v", before)
	}
	stdio, cmd := e.bridge(t)
	web := hMustConnect(t, e)
	for _, cs := range []*sdk.ClientSession{stdio, web} {
		res, txt, _ := call(t, cs, "snag_list", nil)
		mustOK(t, "list", res, txt)
	}
	waitFor(t, 15*time.Second, func() bool { return len(e.sessions(t).Sessions) == 2 },
		func() string { return fmt.Sprintf("sessions: %+v", e.sessions(t).Sessions) })
	v := e.sessions(t)
	for _, s := range v.Sessions {
		if s.Name == "VESPER" || s.Name == "ORCA" || s.Name == "DANA" {
			t.Errorf("a %s session that asked no name is %s, the assignee of a task in the files", s.Transport, s.Name)
		}
	}
	for _, l := range v.Leases {
		if !l.Detached || l.SessionID != 0 {
			t.Errorf("a newcomer adopted %s's lease on %s: %+v", l.Holder, l.TaskID, l)
		}
	}
	for name, cs := range map[string]*sdk.ClientSession{"stdio": stdio, "http": web} {
		key, _ := claimKey(t, cs, "")
		res, txt, _ := call(t, cs, "snag_release", map[string]any{"id": key, "reason": "only looking"})
		mustOK(t, name+" release", res, txt)
	}
	stdio.Close()
	cmd.Wait()
	web.Close()
	waitFor(t, 15*time.Second, func() bool { return len(e.sessions(t).Sessions) == 0 },
		func() string { return fmt.Sprintf("sessions still live: %+v", e.sessions(t).Sessions) })
	if after := held(); after["VESPER"] != before["VESPER"] || after["ORCA"] != before["ORCA"] {
		t.Errorf("detached leases after the newcomers left: %v, want %v", after, before)
	}
	reader := hMustConnect(t, e)
	_, _, sc := call(t, reader, "snag_get", map[string]any{"id": "SNAG-1"})
	if task := sc["task"].(map[string]any); task["status"] != "claimed" || task["assignee"] != "VESPER" {
		t.Errorf("SNAG-1 after the newcomers left: %v %v, want claimed by VESPER", task["status"], task["assignee"])
	}

	vesper, _ := e.bridgeWith(t, "SNAG_AGENT=VESPER")
	// Registering asks for VESPER and adopts the lease; a claim of its own
	// task gives the bridge the lease's epoch.
	key, who := claimKey(t, vesper, "SNAG-1")
	if key != "SNAG-1" || who != "VESPER" {
		t.Fatalf("VESPER's claim of its own task: %s by %s", key, who)
	}
	var vid int64
	for _, s := range e.sessions(t).Sessions {
		if s.Name == "VESPER" {
			vid = s.ID
		}
	}
	for _, l := range e.sessions(t).Leases {
		if l.Holder == "VESPER" && (l.Detached || l.SessionID != vid || vid == 0) {
			t.Errorf("VESPER's lease after VESPER came back: %+v (session %d)", l, vid)
		}
	}
	res, txt, _ := call(t, vesper, "snag_release", map[string]any{"id": "SNAG-1", "reason": "back after a rebuild; giving it up"})
	mustOK(t, "VESPER releases its adopted task", res, txt)
}

// bridgeWith is bridge with more environment (NAME=value).
func (e *env) bridgeWith(t *testing.T, env ...string) (*sdk.ClientSession, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(snagBin, "mcp")
	cmd.Dir = e.root
	cmd.Env = append(e.environ(), env...)
	cmd.Stderr = os.Stderr
	c := sdk.NewClient(&sdk.Implementation{Name: "go-test", Version: "1.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cmd
}

// assignee is the name of the session that holds key, as the files say.
func assignee(t *testing.T, cs *sdk.ClientSession, key string) string {
	t.Helper()
	_, _, sc := call(t, cs, "snag_get", map[string]any{"id": key})
	task := sc["task"].(map[string]any)
	if task["status"] != "claimed" {
		return ""
	}
	name, _ := task["assignee"].(string)
	return name
}

// TestHTTPGhostSessionsEnd: MCP clients over HTTP that go away without
// DELETE (the official TypeScript SDK's close(), or a process that exits)
// are shown as idle once their GET stream has closed, with the time snagd
// ends them; a person ends one with snag agents end, which releases its
// task and is audited; the other ends by itself after --mcp-stream-grace.
// A client that holds its stream keeps its task throughout.
func TestHTTPGhostSessionsEnd(t *testing.T) {
	t.Parallel()
	node := needTSClient(t)
	e := newEnv(t)
	e.startDaemon(t, "--mcp-stream-grace", "15s")
	tok := hToken(t, e)
	alive := hMustConnect(t, e)
	claimKey(t, alive, "SNAG-11")
	aliveName := assignee(t, alive, "SNAG-11")

	session := func(name string) (found bool, idle bool, stream, note string, ends time.Time) {
		for _, s := range e.sessions(t).Sessions {
			if s.Name == name {
				return true, s.Activity.Idle, s.Activity.Stream, s.Activity.Note, s.Activity.EndsAt
			}
		}
		return false, false, "", "", time.Time{}
	}
	// ghost runs the TypeScript client: it claims task and, once its GET
	// stream is open, goes away as how says. It returns the session's name.
	ghost := func(task, how string) string {
		t.Helper()
		cmd := exec.Command(node, filepath.Join("tsclient", "ghost.mjs"), e.hURL(), tok, task, how)
		cmd.Stderr = os.Stderr
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var waitErr error
		done := make(chan struct{})
		go func() { waitErr = cmd.Wait(); close(done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		line := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(out)
			sc.Scan()
			line <- sc.Text()
		}()
		select {
		case l := <-line:
			if !strings.Contains(l, task) {
				t.Fatalf("ghost %s: %q", how, l)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("ghost %s did not claim %s", how, task)
		}
		name := assignee(t, alive, task)
		waitFor(t, 30*time.Second, func() bool { _, _, st, _, _ := session(name); return st == "open" },
			func() string {
				return fmt.Sprintf("the %s client's GET stream never opened: %+v", how, e.sessions(t).Sessions)
			})
		in.Close() // go away now
		select {
		case <-done:
			if waitErr != nil {
				t.Fatalf("ghost %s: %v", how, waitErr)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("ghost %s did not exit", how)
		}
		return name
	}

	closed := ghost("SNAG-4", "close")
	waitFor(t, 10*time.Second, func() bool {
		_, idle, st, note, ends := session(closed)
		return idle && st == "closed" && !ends.IsZero() && strings.Contains(note, "ends in")
	}, func() string {
		return fmt.Sprintf("the closed client's session is not shown idle: %+v", e.sessions(t).Sessions)
	})
	snag := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(snagBin, args...)
		cmd.Dir, cmd.Env = e.root, e.environ()
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("snag %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	list := snag("agents")
	for _, w := range []string{closed + " ", "IDLE", "GET stream closed", "holds SNAG-4", aliveName + " "} {
		if !strings.Contains(list, w) {
			t.Errorf("snag agents does not say %q:\n%s", w, list)
		}
	}
	if got := snag("agents", "end", closed, "--reason", "its client exited without DELETE"); !strings.Contains(got, "1 task(s) back in the queue") {
		t.Errorf("snag agents end: %s", got)
	}
	if found, _, _, _, _ := session(closed); found {
		t.Errorf("%s is still live after snag agents end", closed)
	}
	if who := assignee(t, alive, "SNAG-4"); who != "" {
		t.Errorf("SNAG-4 still claimed by %s after its session was ended", who)
	}
	if log := snag("log", "--json", "--limit", "100"); !strings.Contains(log, `"session_end"`) || !strings.Contains(log, "its client exited without DELETE") {
		t.Errorf("the audit log does not record the ended session:\n%s", log)
	}

	exited := ghost("SNAG-8", "exit")
	waitFor(t, 90*time.Second, func() bool { found, _, _, _, _ := session(exited); return !found && assignee(t, alive, "SNAG-8") == "" },
		func() string {
			return fmt.Sprintf("the exited client's session still holds SNAG-8: %+v", e.sessions(t).Sessions)
		})

	if who := assignee(t, alive, "SNAG-11"); who != aliveName {
		t.Errorf("SNAG-11 of the client that holds its stream: claimed by %q, want %s", who, aliveName)
	}
	if _, idle, st, _, _ := session(aliveName); idle || st != "open" {
		t.Errorf("the client that holds its stream: idle %v, stream %q", idle, st)
	}
}

// TestAGivenBackTaskIsNotHandedBack: an agent that releases the task it
// claimed and claims the next one gets another task, three times in a
// row: it does not loop on the task it gave up.
func TestAGivenBackTaskIsNotHandedBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon(t)
	a := e.teamBridge(t, "ADA")
	seen := map[string]bool{}
	for i := range 3 {
		key, _ := claimKey(t, a, "")
		if seen[key] {
			t.Fatalf("claim %d handed back %s, which the agent released before", i+1, key)
		}
		seen[key] = true
		res, txt, _ := call(t, a, "snag_release", map[string]any{"id": key, "reason": "blocked on a decision"})
		mustOK(t, "release "+key, res, txt)
	}
}

// TestGetOfABrokenTaskDoesNotSuggestAClaim: snag_get of a task whose file
// does not parse says so, and that a person fixes it, instead of
// suggesting a claim that is refused.
func TestGetOfABrokenTaskDoesNotSuggestAClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon(t)
	a := e.teamBridge(t, "ADA")
	broken := "---\nid: tsk_01M9BROKEN000000000000021\nkey: SNAG-21\ntitle: [unclosed\nstatus: open\n---\nBody.\n"
	if err := os.WriteFile(filepath.Join(e.root, ".snag", "tasks", "SNAG-21 - Broken.md"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	var txt string
	waitFor(t, 10*time.Second, func() bool {
		_, txt, _ = call(t, a, "snag_get", map[string]any{"id": "SNAG-21"})
		return strings.Contains(txt, "does not read")
	}, func() string { return "snag_get of the broken task:\n" + txt })
	if strings.Contains(txt, "snag_claim") {
		t.Errorf("snag_get of a task whose file does not parse suggests a claim:\n%s", txt)
	}
}

// TestAnAgentWhoseSnagdIsGoneIsTold: an agent holds a task when snagd
// goes away; its snag_get, answered from the files, says that its lease
// lasts only if snagd is back within its grace, rather than only that it
// holds the task.
func TestAnAgentWhoseSnagdIsGoneIsTold(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stop := e.daemonStoppable(t)
	a, _ := e.bridge(t)
	key, _ := claimKey(t, a, "")
	stop()
	_, txt, sc := call(t, a, "snag_get", map[string]any{"id": key})
	if sc["source"] != "files" || !strings.Contains(txt, "snagd is not answering: your lease of "+key+" lasts only if snagd is back within its grace") {
		t.Errorf("snag_get of the held %s with snagd gone (source %v):\n%s", key, sc["source"], txt)
	}
}
