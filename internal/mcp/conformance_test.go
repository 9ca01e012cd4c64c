package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// conformancePass are the official MCP conformance suite's server scenarios
// that snagd's /mcp must pass: the ones about the protocol itself, which a
// real server implements. The others exercise the suite's own fixture
// tools, prompts and resources (test_simple_text, test://static-text, ...),
// which snag does not have; docs/decisions.md lists each with its reason.
var conformancePass = []string{
	"server-initialize",
	"logging-set-level",
	"ping",
	"completion-complete",
	"tools-list",
	"server-sse-multiple-streams",
	"resources-list",
	"prompts-list",
	"dns-rebinding-protection",
}

// TestConformanceServerScenarios runs the official MCP conformance suite
// (@modelcontextprotocol/conformance, from mcp/conformance's lockfile, on
// the node 22 the lockfile brings) against a real snagd's /mcp, through a
// reverse proxy on 127.0.0.1 that adds snagd's token, as a client
// configured with the header would. Every scenario of conformancePass must
// pass, so a regression fails; the outcome of every scenario is logged.
func TestConformanceServerScenarios(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs("conformance")
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(dir, "node_modules", ".bin", "node")
	suite := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, f := range []string{node, suite} {
		if _, err := os.Stat(f); err != nil {
			msg := fmt.Sprintf("needs the conformance suite (cd mcp/conformance && npm ci): %v", err)
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	root := tsProject(t)
	home := filepath.Join(t.TempDir(), "home")
	port := tsDaemon(t, snagBin, root, home)
	tok, err := os.ReadFile(filepath.Join(home, "token"))
	if err != nil {
		t.Fatal(err)
	}
	target := &url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", port)}
	proxy := httputil.NewSingleHostReverseProxy(target)
	direct := proxy.Director
	proxy.Director = func(r *http.Request) {
		direct(r)
		// snagd answers only to its own Host; the suite's own Host and
		// Origin probes (dns-rebinding-protection) pass through as sent.
		if h := r.Host; strings.HasPrefix(h, "127.0.0.1:") || strings.HasPrefix(h, "localhost:") {
			r.Host = target.Host
		}
		if o := r.Header.Get("Origin"); strings.HasPrefix(o, "http://127.0.0.1:") || strings.HasPrefix(o, "http://localhost:") {
			r.Header.Set("Origin", "http://"+target.Host)
		}
		r.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	proxy.FlushInterval = -1 // SSE streams pass through at once
	srv := httptest.NewServer(proxy)
	defer srv.Close()

	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "server", "--url", srv.URL+"/mcp", "--output-dir", out)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	runErr := cmd.Run() // it exits non-zero when any scenario fails: the fixture ones do
	t.Logf("conformance server: %v\n%s", runErr, stdout.String())
	if ctx.Err() != nil {
		t.Fatalf("the suite did not finish: %v\nstderr:\n%s", ctx.Err(), stderr.String())
	}
	results := conformanceResults(t, out)
	if len(results) == 0 {
		t.Fatalf("no scenario results in %s\nstdout:\n%s\nstderr:\n%s", out, stdout.String(), stderr.String())
	}
	var names []string
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Logf("%-32s %s", n, results[n])
	}
	for _, n := range conformancePass {
		if got, ok := results[n]; !ok || got != "pass" {
			t.Errorf("scenario %s: %q, want pass", n, got)
		}
	}
}

// conformanceResults reads the suite's output folder (one
// server-<scenario>-<time>/checks.json per scenario): scenario -> "pass"
// when every check succeeded, else the first failure's message.
func conformanceResults(t *testing.T, out string) map[string]string {
	t.Helper()
	dirs, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	at := regexp.MustCompile(`^server-(.+)-\d{4}-\d\d-\d\dT`)
	results := map[string]string{}
	for _, d := range dirs {
		m := at.FindStringSubmatch(d.Name())
		if m == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(out, d.Name(), "checks.json"))
		if err != nil {
			results[m[1]] = "no checks.json: " + err.Error()
			continue
		}
		var checks []struct {
			ID, Status, ErrorMessage string
		}
		if err := json.Unmarshal(b, &checks); err != nil || len(checks) == 0 {
			results[m[1]] = fmt.Sprintf("unreadable checks.json: %v", err)
			continue
		}
		results[m[1]] = "pass"
		for _, c := range checks {
			if c.Status != "SUCCESS" {
				results[m[1]] = c.Status + " " + c.ID + ": " + c.ErrorMessage
				break
			}
		}
	}
	return results
}
