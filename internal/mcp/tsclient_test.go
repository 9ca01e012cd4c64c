package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snagdev/snag/internal/snagdtest"
)

// tsProject copies .snag-example into a fresh project folder.
func tsProject(t *testing.T) string {
	t.Helper()
	return snagdtest.Sample(t)
}

// tsDaemon runs `snag daemon` on root with SNAG_HOME home and waits until
// it has written .snag/.port and its /health says ready. It returns the port.
func tsDaemon(t *testing.T, bin, root, home string) int {
	t.Helper()
	p := snagdtest.Start(t, snagdtest.Options{Bin: bin, Daemon: true, Root: root, Home: home, Port: snagdtest.FreePort(t)})
	p.WaitReady(t, 30*time.Second)
	return p.Port
}

// startNode starts node with args in env, bounded by ctx, its stdin and
// stdout piped and its stderr written to stderr; a test fails when it
// cannot start.
func startNode(ctx context.Context, t *testing.T, node string, env []string, stderr io.Writer, args ...string) (*exec.Cmd, io.WriteCloser, io.ReadCloser) {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Env, cmd.Stderr, cmd.WaitDelay = env, stderr, 10*time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdin, stdout
}

// needTSClient returns the path of node once node and the official
// TypeScript SDK (mcp/tsclient, npm ci) are there (needClient).
func needTSClient(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	return needClient(t, node, err, filepath.Join("tsclient", "node_modules", "@modelcontextprotocol", "sdk"),
		"node and the TypeScript SDK (cd mcp/tsclient && npm ci)")
}

// needClient returns node once it was found (err is why not) and the npm
// package in folder pkg is installed. Without them the test skips, or
// fails when CI is set, where .ci/run installs both; what names them.
func needClient(t *testing.T, node string, err error, pkg, what string) string {
	t.Helper()
	if err == nil {
		_, err = os.Stat(node)
	}
	if err == nil {
		_, err = os.Stat(filepath.Join(pkg, "package.json"))
	}
	if err != nil {
		msg := fmt.Sprintf("needs %s: %v", what, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node
}

// TestTypeScriptClient drives `snag mcp` with the official TypeScript SDK
// client (mcp/tsclient/run.mjs) against a real snagd on a copy of
// .snag-example: every tool, every resource, each result validated by the
// SDK against the tool's output schema.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	node := needTSClient(t)
	script, err := filepath.Abs(filepath.Join("tsclient", "run.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	bin := snagBin // built by TestMain in mcp_test.go
	root := tsProject(t)
	home := filepath.Join(t.TempDir(), "home")
	port := tsDaemon(t, bin, root, home)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, bin, root)
	cmd.Env = append(os.Environ(), "SNAG_HOME="+home, "SNAG_PORT="+strconv.Itoa(port))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err = cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("node run.mjs: %v after %v\nstdout:\n%s\nstderr:\n%s", err, elapsed.Round(time.Millisecond), stdout.String(), stderr.String())
	}
	t.Logf("node run.mjs: %v", elapsed.Round(time.Millisecond))

	// Every line is a step's summary; the last is the clean close.
	var last struct {
		Step string `json:"step"`
		OK   bool   `json:"ok"`
	}
	steps := 0
	for line := range strings.Lines(stdout.String()) {
		t.Log(strings.TrimSpace(line))
		if err := json.Unmarshal([]byte(line), &last); err != nil {
			t.Fatalf("not a JSON summary line: %q: %v", line, err)
		}
		if !last.OK {
			t.Fatalf("step %s failed with exit status 0", last.Step)
		}
		steps++
	}
	if last.Step != "close" {
		t.Fatalf("the last step is %q, want close; stderr:\n%s", last.Step, stderr.String())
	}

	// The add went through snagd to a file in the project.
	waitFor(t, 10*time.Second, func() bool {
		files, _ := filepath.Glob(filepath.Join(root, ".snag", "tasks", "*.md"))
		for _, f := range files {
			if b, _ := os.ReadFile(f); bytes.Contains(b, []byte("Interop test note from the TypeScript client")) {
				return true
			}
		}
		return false
	}, func() string { return "snag_add answered but no task file holds the note" })
}

// TestTypeScriptSubscribeAndComplete: resources/subscribe with
// notifications/resources/updated driven by snagd's event stream, and
// completion/complete of snag://task/{id}, with the official TypeScript SDK
// client (mcp/tsclient/subscribe.mjs), over stdio (snag mcp) and over
// snagd's /mcp, against a real snagd.
func TestTypeScriptSubscribeAndComplete(t *testing.T) {
	t.Parallel()
	node := needTSClient(t)
	script, err := filepath.Abs(filepath.Join("tsclient", "subscribe.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			root := tsProject(t)
			home := filepath.Join(t.TempDir(), "home")
			port := tsDaemon(t, snagBin, root, home)
			args := []string{script, "stdio", snagBin, root}
			if transport == "http" {
				tok, err := os.ReadFile(filepath.Join(home, "token"))
				if err != nil {
					t.Fatal(err)
				}
				args = []string{script, "http", fmt.Sprintf("http://127.0.0.1:%d/mcp", port), strings.TrimSpace(string(tok))}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, args...)
			cmd.Env = append(os.Environ(), "SNAG_HOME="+home, "SNAG_PORT="+strconv.Itoa(port))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.WaitDelay = 10 * time.Second
			err = cmd.Run()
			t.Log(stdout.String())
			if err != nil {
				t.Fatalf("node subscribe.mjs %s: %v\nstderr:\n%s", transport, err, stderr.String())
			}
			if !strings.Contains(stdout.String(), `{"step":"close","ok":true}`) {
				t.Fatalf("subscribe.mjs did not reach close:\n%s", stdout.String())
			}
		})
	}
}

// TestTypeScriptTeamTools drives the team toolset with the official
// TypeScript SDK client (mcp/tsclient/team.mjs): two bridges call every
// team tool against a real snagd, and the SDK validates every result
// against its output schema.
func TestTypeScriptTeamTools(t *testing.T) {
	t.Parallel()
	node := needTSClient(t)
	script, err := filepath.Abs(filepath.Join("tsclient", "team.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	root := tsProject(t)
	home := filepath.Join(t.TempDir(), "home")
	port := tsDaemon(t, snagBin, root, home)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, snagBin, root)
	cmd.Env = append(os.Environ(), "SNAG_HOME="+home, "SNAG_PORT="+strconv.Itoa(port))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	t.Log(stdout.String())
	if err != nil {
		t.Fatalf("node team.mjs: %v\nstderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), `{"step":"close","ok":true}`) {
		t.Fatalf("team.mjs did not reach close:\n%s", stdout.String())
	}
}
