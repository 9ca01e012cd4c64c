package mcp_test

import (
	"bufio"
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
	"strings"
	"testing"
	"time"
)

// conformanceEras are the MCP protocol versions /mcp serves. The suite runs
// every scenario on the spec timeline for each (--suite all --spec-version),
// on that version's wire: 2025-11-25 with initialize and a session,
// 2026-07-28 sessionless with MCP-Protocol-Version on every request.
var conformanceEras = []string{"2025-11-25", "2026-07-28"}

// TestM1_ConformanceServerScenarios runs the official MCP conformance suite
// (@modelcontextprotocol/conformance, from internal/mcp/conformance's
// lockfile, on the node 22 the lockfile brings) against a real snagd's
// /mcp, through a reverse proxy on 127.0.0.1 that adds snagd's token, as a
// client configured with the header would, once for each of
// conformanceEras. Every check of every scenario must pass but those
// conformance/expected-failures.txt lists, which need the suite's own
// fixtures; a listed scenario or check that passes, or that the suite no
// longer runs, fails the test too, so the list stays true. The outcome of
// every scenario is logged.
func TestM1_ConformanceServerScenarios(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs("conformance")
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(dir, "node_modules", ".bin", "node")
	suite := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, f := range []string{node, suite} {
		if _, err := os.Stat(f); err != nil {
			msg := fmt.Sprintf("needs the conformance suite (cd internal/mcp/conformance && npm ci): %v", err)
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	expected := conformanceExpected(t, filepath.Join(dir, "expected-failures.txt"))
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

	for _, era := range conformanceEras {
		var table strings.Builder
		for _, r := range conformanceRun(t, node, suite, dir, srv.URL+"/mcp", era) {
			outcome, unexpected, stale := conformanceJudge(r, expected[era])
			fmt.Fprintf(&table, "%-46s %s\n", r.scenario, outcome)
			for _, u := range unexpected {
				t.Errorf("%s %s: %s", era, r.scenario, u)
			}
			if len(unexpected) > 0 && r.raw != nil {
				t.Logf("%s %s, its checks.json:\n%s", era, r.scenario, r.raw)
			}
			for _, s := range stale {
				t.Errorf("%s %s no longer fails: take it out of conformance/expected-failures.txt", era, s)
			}
			for e := range expected[era] {
				if e == r.scenario || strings.HasPrefix(e, r.scenario+":") {
					delete(expected[era], e)
				}
			}
		}
		t.Logf("conformance %s:\n%s", era, table.String())
		for e := range expected[era] {
			t.Errorf("%s %s is in conformance/expected-failures.txt, but the suite did not run it: take it out", era, e)
		}
	}
}

// conformanceScenario is what one scenario of the suite did: its checks,
// as read and as written, or why there are none.
type conformanceScenario struct {
	scenario string
	checks   []conformanceCheck
	raw      []byte // its checks.json
	missing  string // why there are no checks
}

// conformanceCheck is one check of a scenario, from its checks.json.
type conformanceCheck struct {
	ID, Status, ErrorMessage string
}

// conformanceJudge weighs one scenario against the expected failures of
// its era (scenario, or scenario:check-id, to reason). Outcome is its line
// in the table; unexpected are the failures nothing expects; stale are
// the expected entries of the scenario that did not fail.
func conformanceJudge(r conformanceScenario, expected map[string]string) (outcome string, unexpected, stale []string) {
	whole, wholeListed := expected[r.scenario]
	if r.missing != "" {
		if wholeListed {
			return "expected fail: " + whole, nil, nil
		}
		return "FAIL " + r.missing, []string{r.missing}, nil
	}
	failed := map[string]string{} // check id -> its first failure; ids repeat
	var order []string
	for _, c := range r.checks {
		if c.Status != "FAILURE" {
			continue
		}
		if _, seen := failed[c.ID]; !seen {
			failed[c.ID] = c.ErrorMessage
			order = append(order, c.ID)
		}
	}
	var warned []string
	for _, c := range r.checks {
		if c.Status == "WARNING" {
			warned = append(warned, c.ID)
		}
	}
	if wholeListed {
		if len(failed) == 0 {
			return "pass, yet expected to fail", nil, []string{r.scenario}
		}
		return "expected fail: " + whole, nil, nil
	}
	var excused []string
	for _, id := range order {
		if reason, ok := expected[r.scenario+":"+id]; ok {
			excused = append(excused, id+" ("+reason+")")
			continue
		}
		unexpected = append(unexpected, id+": "+failed[id])
	}
	for e := range expected {
		if id, ok := strings.CutPrefix(e, r.scenario+":"); ok {
			if _, f := failed[id]; !f {
				stale = append(stale, e)
			}
		}
	}
	switch {
	case len(unexpected) > 0:
		outcome = "FAIL " + strings.Join(unexpected, "; ")
	case len(excused) > 0:
		outcome = fmt.Sprintf("pass but for %d expected checks: %s", len(excused), strings.Join(excused, "; "))
	default:
		outcome = "pass"
	}
	if len(warned) > 0 {
		outcome += " (warnings: " + strings.Join(warned, ", ") + ")"
	}
	return outcome, unexpected, stale
}

// conformanceRun runs the suite's server scenarios of one era against url
// and returns what each did, in the order the suite ran them.
func conformanceRun(t *testing.T, node, suite, dir, url, era string) []conformanceScenario {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "server", "--url", url, "--suite", "all", "--spec-version", era, "--output-dir", out)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	runErr := cmd.Run() // it exits non-zero when any scenario fails: the fixture ones do
	if ctx.Err() != nil {
		t.Fatalf("%s: the suite did not finish: %v\nstdout:\n%s\nstderr:\n%s", era, ctx.Err(), stdout.String(), stderr.String())
	}
	// The suite names each scenario as it starts it; that list, not the
	// folders it leaves, is what ran.
	var runs []conformanceScenario
	starts := regexp.MustCompile(`^=== Running scenario: (\S+) ===$`)
	sc := bufio.NewScanner(bytes.NewReader(stdout.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if m := starts.FindStringSubmatch(sc.Text()); m != nil {
			runs = append(runs, conformanceScenario{scenario: m[1]})
		}
	}
	if len(runs) == 0 {
		t.Fatalf("%s: the suite ran no scenario (%v)\nstdout:\n%s\nstderr:\n%s", era, runErr, stdout.String(), stderr.String())
	}
	checks := conformanceChecks(t, out)
	for i, r := range runs {
		c, ok := checks[r.scenario]
		switch {
		case !ok:
			runs[i].missing = "no checks.json; the suite's stderr:\n" + stderr.String()
		case len(c.checks) == 0:
			runs[i].missing = "no checks in its checks.json"
		default:
			runs[i].checks, runs[i].raw = c.checks, c.raw
		}
	}
	return runs
}

// conformanceChecks reads the suite's output folder (one
// server-<scenario>-<time>/checks.json per scenario): scenario -> its
// checks, in the scenario's fields checks and raw.
func conformanceChecks(t *testing.T, out string) map[string]conformanceScenario {
	t.Helper()
	dirs, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	at := regexp.MustCompile(`^server-(.+)-\d{4}-\d\d-\d\dT`)
	results := map[string]conformanceScenario{}
	for _, d := range dirs {
		m := at.FindStringSubmatch(d.Name())
		if m == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(out, d.Name(), "checks.json"))
		if err != nil {
			t.Fatalf("scenario %s: %v", m[1], err)
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("scenario %s: checks.json: %v", m[1], err)
		}
		results[m[1]] = conformanceScenario{scenario: m[1], checks: checks, raw: b}
	}
	return results
}

// conformanceExpected reads the expected failures: era -> scenario (or
// scenario:check-id, for one check of it) -> reason, from lines
// "<era> <scenario>[:<check-id>] <reason>", with # comments and blank
// lines.
func conformanceExpected(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	eras := map[string]bool{}
	for _, e := range conformanceEras {
		eras[e] = true
	}
	expected := map[string]map[string]string{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 || !eras[f[0]] {
			t.Fatalf("%s:%d: want \"<era> <scenario>[:<check-id>] <reason>\" with era one of %s, got %q", path, i+1, strings.Join(conformanceEras, ", "), line)
		}
		if expected[f[0]] == nil {
			expected[f[0]] = map[string]string{}
		}
		if _, dup := expected[f[0]][f[1]]; dup {
			t.Fatalf("%s:%d: %s %s is listed twice", path, i+1, f[0], f[1])
		}
		expected[f[0]][f[1]] = strings.Join(f[2:], " ")
	}
	for era, entries := range expected {
		for e := range entries {
			if scenario, _, ok := strings.Cut(e, ":"); ok {
				if _, whole := entries[scenario]; whole {
					t.Fatalf("%s: %s lists %s both whole and as %s: keep one", path, era, scenario, e)
				}
			}
		}
	}
	return expected
}
