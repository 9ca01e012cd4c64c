package mcp_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/ops"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/snagdtest"
)

// tsHostedLine is one line hosted.mjs prints: a step's summary.
type tsHostedLine struct {
	Step  string `json:"step"`
	OK    bool   `json:"ok"`
	Error string `json:"error"`
	// Status is the HTTP status of a refusal, as the SDK reports it.
	Status int `json:"status"`
	// Cause is the code of a network error (a TLS one, say).
	Cause string `json:"cause"`

	Server   string   `json:"server"`
	Session  string   `json:"session"`
	Protocol string   `json:"protocol"`
	Tools    []string `json:"tools"`
	Source   string   `json:"source"`
	Tasks    int      `json:"tasks"`
	Key      string   `json:"key"`
	// TaskStatus is the task's status, on snag_claim and snag_get.
	TaskStatus string `json:"task_status"`

	raw string // the line as printed
}

// hostedTSEnv is the environment hosted.mjs runs in: the test's own,
// without anything that would change how node checks certificates or
// where the token comes from, then set.
func hostedTSEnv(set ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "NODE_TLS_REJECT_UNAUTHORIZED", "NODE_EXTRA_CA_CERTS", "NODE_OPTIONS", "SNAG_TOKEN":
			continue
		}
		env = append(env, kv)
	}
	return append(env, set...)
}

// TestHostedMCPWithTheTypeScriptSDK drives snagd's hosted /mcp with the
// official TypeScript SDK client (mcp/tsclient/hosted.mjs) over HTTPS, as
// an agent on another machine does: a real `snag daemon --listen` with a
// self-signed certificate, which node trusts through NODE_EXTRA_CA_CERTS,
// and the hosted token from the client's environment in
// requestInit.headers, as the README says. The client initializes, lists
// the queue toolset's 8 tools and claims a task, which snagd's local API
// then shows as claimed by an http session (in the task file too); ending
// the session gives it back. A short, a wrong or no token gets 401 as the
// SDK sees it, a Host snagd does not answer to 403, and a client that does
// not trust the certificate never gets as far as either.
func TestHostedMCPWithTheTypeScriptSDK(t *testing.T) {
	t.Parallel()
	node := needTSClient(t)
	script, err := filepath.Abs(filepath.Join("tsclient", "hosted.mjs"))
	if err != nil {
		t.Fatal(err)
	}

	// The hosted listener answers to localhost only; the certificate is
	// also good for 127.0.0.1, so that a client dialing that name passes
	// TLS and meets the Host check.
	e := newEnv(t)
	certFile, keyFile, _ := snagdtest.Cert(t, "localhost", "127.0.0.1")
	tok := hostedToken(t)
	tokenFile := filepath.Join(t.TempDir(), "hosted-token")
	if err := os.WriteFile(tokenFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hport := freePort(t)
	p := snagdtest.Start(t, snagdtest.Options{Bin: snagBin, Daemon: true, Root: e.root, Home: e.home, Port: e.port,
		Env: []string{"SNAG_PORT=" + strconv.Itoa(e.port), "SNAG_NO_AUTOSTART="},
		Args: []string{"--listen", "127.0.0.1:" + strconv.Itoa(hport), "--tls-cert", certFile, "--tls-key", keyFile,
			"--allowed-host", "localhost", "--hosted-token-file", tokenFile}})
	p.WaitReady(t, 60*time.Second)
	wrong := hostedToken(t)
	t.Cleanup(func() {
		p.Stop()
		for _, s := range []string{tok, wrong, p.Token} {
			if s != "" && strings.Contains(p.Log.String(), s) {
				t.Errorf("a token appears in snagd's log:\n%s", p.Log.String())
			}
		}
	})
	url := fmt.Sprintf("https://localhost:%d/mcp", hport)
	trusted := "NODE_EXTRA_CA_CERTS=" + certFile

	t.Run("a session", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// ipv4first: the listener is on 127.0.0.1, whatever else localhost
		// names on this machine.
		var stderr snagdtest.Buffer
		cmd, stdin, stdout := startNode(ctx, t, node, hostedTSEnv("SNAG_TOKEN="+tok, trusted), &stderr,
			"--dns-result-order=ipv4first", script, "session", url)
		lines := make(chan tsHostedLine, 16)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var l tsHostedLine
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					l = tsHostedLine{Step: "?", Error: fmt.Sprintf("not a JSON summary line: %v", err)}
				}
				l.raw = sc.Text()
				lines <- l
			}
		}()
		// next is the next step's line, which must be want and ok.
		next := func(want string) tsHostedLine {
			t.Helper()
			select {
			case l, ok := <-lines:
				if !ok {
					cmd.Wait()
					t.Fatalf("hosted.mjs ended before %s; stderr:\n%s", want, stderr.String())
				}
				if !l.OK || l.Step != want {
					t.Fatalf("hosted.mjs: %s; want step %s ok (stderr:\n%s)", l.raw, want, stderr.String())
				}
				t.Log(l.raw)
				return l
			case <-ctx.Done():
				t.Fatalf("hosted.mjs did not reach %s; stderr:\n%s", want, stderr.String())
			}
			panic("unreachable")
		}

		if l := next("connect"); l.Server != "snag" || l.Session == "" || l.Protocol == "" {
			t.Errorf("initialize over the hosted /mcp: server %q, session %q, protocol %q; want snag with a session and a protocol version", l.Server, l.Session, l.Protocol)
		}
		tools := next("tools/list").Tools
		slices.Sort(tools)
		want := []string{"snag_add", "snag_claim", "snag_get", "snag_list", "snag_release", "snag_resolve", "snag_screenshot", "snag_search"}
		if diff := cmp.Diff(want, tools); diff != "" {
			t.Errorf("tools over the hosted /mcp, want the queue toolset's 8 (-want +got):\n%s", diff)
		}
		if l := next("snag_list"); l.Source != "daemon" || l.Tasks == 0 {
			t.Errorf("snag_list over the hosted /mcp: source %q, %d tasks; want the daemon's, some", l.Source, l.Tasks)
		}
		key := next("snag_claim").Key
		if l := next("snag_get"); l.Key != key || l.TaskStatus != string(queue.StatusClaimed) {
			t.Errorf("snag_get after the claim: %s %s; want %s claimed", l.Key, l.TaskStatus, key)
		}

		// While the client holds its session: snagd's local API shows it,
		// over http, holding the task, and the task file says claimed.
		var ss ops.Sessions
		e.getJSON(t, "/sessions", &ss)
		var mine *snag.LiveSession
		for i, s := range ss.Sessions {
			if s.Client == "snag-hosted-ts" {
				mine = &ss.Sessions[i]
			}
		}
		var task snag.TaskDetail
		e.getJSON(t, "/tasks/"+key, &task)
		switch {
		case mine == nil:
			t.Errorf("snagd's local /sessions has no snag-hosted-ts session: %+v", ss.Sessions)
		case mine.Transport != "http":
			t.Errorf("the TypeScript client's session is over %q; want http", mine.Transport)
		case task.Task == nil || !slices.ContainsFunc(ss.Leases, func(l snag.Lease) bool { return l.SessionID == mine.ID && l.TaskID == task.Task.ID }):
			t.Errorf("snagd's local /sessions has no lease of %s by session %d: %+v", key, mine.ID, ss.Leases)
		case task.Row.Assignee != mine.Name:
			t.Errorf("%s is assigned to %q; want the session's agent %q", key, task.Row.Assignee, mine.Name)
		}
		if task.Row.Status != queue.StatusClaimed {
			t.Errorf("%s after a claim over the hosted /mcp: %s; want claimed", key, task.Row.Status)
		}
		if b, err := os.ReadFile(filepath.Join(e.root, task.TaskFile)); err != nil || !strings.Contains(string(b), "\nstatus: claimed\n") {
			t.Errorf("%s's file %s after a claim over the hosted /mcp (%v):\n%s", key, task.TaskFile, err, b)
		}

		// The client ends its session (DELETE /mcp with the token): it
		// goes, and the task goes back to the queue.
		io.WriteString(stdin, "close\n")
		stdin.Close()
		next("close")
		if err := cmd.Wait(); err != nil {
			t.Fatalf("hosted.mjs: %v; stderr:\n%s", err, stderr.String())
		}
		waitFor(t, 30*time.Second, func() bool {
			e.getJSON(t, "/sessions", &ss)
			e.getJSON(t, "/tasks/"+key, &task)
			return !slices.ContainsFunc(ss.Sessions, func(s snag.LiveSession) bool { return s.Client == "snag-hosted-ts" }) &&
				task.Row.Status == queue.StatusOpen
		}, func() string {
			return fmt.Sprintf("after the TypeScript client ended its session: sessions %+v, %s %s; want it gone and the task open", ss.Sessions, key, task.Row.Status)
		})
	})

	// Refusals, as the SDK reports them to the agent.
	for _, c := range []struct {
		name string
		url  string
		env  []string
		// status is the HTTP status; 0 wants a network error whose code
		// contains cause.
		status int
		want   string
	}{
		{"a short token", url, []string{"SNAG_TOKEN=" + tok[:31], trusted}, 401, "31 bytes"},
		{"a wrong token", url, []string{"SNAG_TOKEN=" + wrong, trusted}, 401, "not this snagd's hosted token"},
		{"no token", url, []string{trusted}, 401, "send Authorization: Bearer"},
		{"a Host it does not answer to", fmt.Sprintf("https://127.0.0.1:%d/mcp", hport), []string{"SNAG_TOKEN=" + tok, trusted}, 403, `"bad_host"`},
		{"an untrusted certificate", url, []string{"SNAG_TOKEN=" + tok}, 0, "CERT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "--dns-result-order=ipv4first", script, "connect", c.url)
			cmd.Env = hostedTSEnv(c.env...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			cmd.WaitDelay = 10 * time.Second
			out, err := cmd.Output()
			t.Logf("%s", out)
			var l tsHostedLine
			if jerr := json.Unmarshal(out, &l); jerr != nil {
				t.Fatalf("hosted.mjs connect: %v: not one JSON line: %q; stderr:\n%s", err, out, stderr.String())
			}
			if err == nil || l.OK || l.Step != "connect" {
				t.Fatalf("hosted.mjs connect with %s: exit %v, step %s ok %v; want a refused connect", c.name, err, l.Step, l.OK)
			}
			if c.status != 0 && (l.Status != c.status || !strings.Contains(l.Error, c.want)) {
				t.Errorf("with %s the SDK reports %d: %s; want %d saying %s", c.name, l.Status, l.Error, c.status, c.want)
			}
			if c.status == 0 && (l.Status != 0 || !strings.Contains(l.Cause, c.want)) {
				t.Errorf("with %s the SDK reports status %d, cause %q: %s; want a TLS error (%s)", c.name, l.Status, l.Cause, l.Error, c.want)
			}
			if strings.Contains(l.Error, tok[:31]) || strings.Contains(l.Error, wrong) {
				t.Errorf("the refusal carries a token: %s", l.Error)
			}
		})
	}
	if c := strings.Count(p.Log.String(), "hosted /mcp serving"); c != 1 {
		t.Errorf("snagd's log says %d times that it serves the hosted /mcp; want once:\n%s", c, p.Log.String())
	}
}

// hostedToken is a fresh hosted token, as openssl rand -hex 32 makes one.
func hostedToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
