package board_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	verifier "github.com/snagdev/snag/internal/browser"
)

// These tests run a real snagd (as a process, see snagd_test.go) and drive
// the board it serves in real headless Chromium, or read its pages over
// HTTP. They skip when no Chromium is installed, unless CI is set: there
// they fail.

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

// browser is one headless Chromium tab with a fresh profile.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := chromiumPath(t)
	dir := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.WindowSize(1280, 900),
		chromedp.Env("HOME=" + dir),
	}
	for _, f := range []string{"headless", "no-sandbox", "disable-gpu", "no-first-run", "no-default-browser-check",
		"disable-background-networking", "disable-component-update", "disable-sync", "disable-extensions",
		"disable-dev-shm-usage", "hide-scrollbars", "mute-audio"} {
		opts = append(opts, chromedp.Flag(f, true))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return &browser{t: t, ctx: ctx}
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) open(u string) { b.t.Helper(); b.do(chromedp.Navigate(u)) }

// replaced says a step failed because the node it had found is gone: a
// live page (the agents page, on an agent's event) replaced it.
func replaced(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Could not find node with given id")
}

// typeInto types text into the field sel selects, as a person does. A
// live page may re-render the field under the keys (keeping what was
// typed): the field is then found again, emptied, and typed into again.
func (b *browser) typeInto(sel, text string) {
	b.t.Helper()
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(sel), text))
		cancel()
		if !replaced(err) || try == 4 {
			if err != nil {
				b.t.Fatal(err)
			}
			return
		}
		evalIn[bool](b, fmt.Sprintf(`(document.querySelector(%q).value = "") === ""`, sel))
	}
}

// click clicks the element sel selects, finding it again when a live
// page replaced it before the click.
func (b *browser) click(sel string) {
	b.t.Helper()
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)))
		cancel()
		if !replaced(err) || try == 4 {
			if err != nil {
				b.t.Fatal(err)
			}
			return
		}
	}
}

func evalIn[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor waits until a JavaScript expression is truthy on the page. It
// asks again through navigations.
func (b *browser) waitFor(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		var ok bool
		ok, err = chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	body, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.href + "\n" + (document.body ? document.body.innerText.slice(0, 2000) : "")`))
	b.t.Fatalf("timed out waiting for %s (%v); the page:\n%s", what, err, body)
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return evalIn[string](b, fmt.Sprintf(`(document.querySelector(%q) || {innerText: ""}).innerText`, sel))
}

// loginLink asks snagd for a one-time login link, as snag open does.
func (d *daemon) loginLink() string {
	d.t.Helper()
	var out struct {
		URL string `json:"url"`
	}
	if code := d.do(http.MethodPost, "/login-codes", map[string]any{"by": "dana"}, &out); code != http.StatusCreated {
		d.t.Fatalf("POST /login-codes: %d", code)
	}
	return out.URL
}

// login logs the browser in to the board and waits for the board.
func (b *browser) login(d *daemon) {
	b.t.Helper()
	b.open(d.loginLink())
	b.waitFor("the board", `document.querySelector("#columns") !== null`)
}

// taskFile finds a task file of the project by its alias.
func taskFile(t *testing.T, root, key string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(root, ".snag", "tasks", key+" - *.md"))
	if len(m) != 1 {
		t.Fatalf("task file of %s: found %v", key, m)
	}
	return m[0]
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var loginLine = regexp.MustCompile(`url="?(http://127\.0\.0\.1:[0-9]+/login\?code=[A-Za-z0-9_-]+)`)

func TestBoardLogin(t *testing.T) {
	d := startDaemon(t, sampleProject(t))
	b := newBrowser(t)

	// No cookie: a page that says how to get in.
	resp, err := http.Get(d.url("/"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(body), "snag open") {
		t.Fatalf("GET / without a cookie: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	b.open(d.url("/inbox"))
	if got := b.text("main"); !strings.Contains(got, "snag open") {
		t.Fatalf("the browser without a cookie sees %q, want the login page naming snag open", got)
	}

	// The link snagd printed at start logs in once.
	m := loginLine.FindStringSubmatch(d.log.String())
	if m == nil {
		t.Fatalf("snagd printed no login link at start:\n%s", d.log.String())
	}
	link := m[1]
	b.open(link)
	b.waitFor("the board", `document.querySelector("#columns") !== null`)
	if loc := evalIn[string](b, `location.pathname + location.search`); loc != "/" {
		t.Errorf("after login the browser is at %s, want / (the code must leave the address bar)", loc)
	}
	if c := evalIn[string](b, `document.cookie`); c != "" {
		t.Errorf("the page's script can read the cookie %q: it must be HttpOnly", c)
	}
	b.waitFor("the live stream", `document.querySelector("#live").textContent === "live"`)

	// The session opens the board and /events, not the JSON API or minting codes.
	for _, tc := range []struct {
		expr string
		want int
	}{
		{`fetch("/tasks").then(r => r.status)`, 401},
		{`fetch("/sessions").then(r => r.status)`, 401},
		{`fetch("/audit").then(r => r.status)`, 401},
		{`fetch("/login-codes", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"}).then(r => r.status)`, 401},
		{`fetch("/activity").then(r => r.status)`, 200},
	} {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[int](tc.expr, chromedp.EvalAwaitPromise))
		cancel()
		if err != nil || got != tc.want {
			t.Errorf("%s with the board's cookie: %d %v, want %d", tc.expr, got, err, tc.want)
		}
	}

	// A second use of the same link is refused, in a browser as anywhere.
	b2 := newBrowser(t)
	b2.open(link)
	if got := b2.text("main"); !strings.Contains(got, "does not work") || !strings.Contains(got, "snag open") {
		t.Fatalf("a used login link shows %q, want a refusal naming snag open", got)
	}
	resp, err = http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a used login link: %d, want 401", resp.StatusCode)
	}
	if got := evalIn[string](b2, `location.pathname`); got != "/login" {
		t.Errorf("a refused link went on to %s", got)
	}

	// Logging out ends the session.
	b.do(chromedp.Click(chromedp.CSS(`form.logout button`)))
	b.waitFor("the login page", `document.body.innerText.includes("snag open")`)
}

func TestBoardPromote(t *testing.T) {
	root := sampleProject(t)
	d := startDaemon(t, root)
	b := newBrowser(t)
	b.login(d)
	evalIn[chromedp.Void](b, `window.__kept = "same page"`)

	// From the board: the card's Promote button moves the card to Open.
	if got := evalIn[string](b, `document.querySelector("#card-SNAG-16").closest("section").id || document.querySelector("#card-SNAG-16").closest("section").className`); !strings.Contains(got, "inbox") {
		t.Fatalf("SNAG-16 starts in %q, want the inbox column", got)
	}
	b.do(chromedp.Click(chromedp.CSS(`#card-SNAG-16 form[action$="/promote"] button`)))
	b.waitFor("SNAG-16 in the open column", `document.querySelector("section.col-open #card-SNAG-16") !== null`)
	if got := evalIn[string](b, `window.__kept || ""`); got != "same page" {
		t.Errorf("the page reloaded to show the move")
	}
	file := readFile(t, taskFile(t, root, "SNAG-16"))
	for _, want := range []string{"\nstatus: open\n", "\ntrust: vetted\n"} {
		if !strings.Contains(file, want) {
			t.Errorf("SNAG-16's file after promote lacks %q:\n%s", strings.TrimSpace(want), file)
		}
	}

	// From the inbox review, with a severity and a wave.
	b.open(d.url("/inbox"))
	b.waitFor("the inbox", `document.querySelector("#item-SNAG-17") !== null`)
	evalIn[chromedp.Void](b, `window.__kept = "same page"`)
	b.do(
		chromedp.SetValue(chromedp.CSS(`#sev-SNAG-17`), "critical"),
		chromedp.SetValue(chromedp.CSS(`#wave-SNAG-17`), "3"),
		chromedp.Click(chromedp.CSS(`#item-SNAG-17 form.promote button`)),
	)
	b.waitFor("SNAG-17 to leave the inbox", `document.querySelector("#item-SNAG-17") === null`)
	file = readFile(t, taskFile(t, root, "SNAG-17"))
	for _, want := range []string{"\nstatus: open\n", "\ntrust: vetted\n", "\nseverity: critical\n", "\nwave: 3\n"} {
		if !strings.Contains(file, want) {
			t.Errorf("SNAG-17's file after promote lacks %q:\n%s", strings.TrimSpace(want), file)
		}
	}

	// Bulk: tick two, reject them.
	b.do(
		chromedp.Click(chromedp.CSS(`#sel-SNAG-18`)),
		chromedp.Click(chromedp.CSS(`#sel-SNAG-19`)),
		chromedp.Click(chromedp.CSS(`#bulk button[value="reject"]`)),
	)
	b.waitFor("SNAG-18 and 19 to leave the inbox", `!document.querySelector("#item-SNAG-18") && !document.querySelector("#item-SNAG-19") && document.querySelector("#inbox-items")`)
	if got := evalIn[string](b, `window.__kept || ""`); got != "same page" {
		t.Errorf("the page reloaded to show the bulk move")
	}
	if f := readFile(t, taskFile(t, root, "SNAG-19")); !strings.Contains(f, "\nstatus: cancelled\n") {
		t.Errorf("SNAG-19 after a bulk reject:\n%s", f)
	}

	// A person resolves what verify could not decide, from the task's page.
	b.open(d.url("/task/SNAG-10"))
	b.waitFor("SNAG-10's page", `document.querySelector('form[action$="/accept"] button') !== null`)
	b.do(chromedp.Click(chromedp.CSS(`form[action$="/accept"] button`)))
	b.waitFor("SNAG-10 resolved", `document.querySelector(".status").textContent === "resolved"`)
	if f := readFile(t, taskFile(t, root, "SNAG-10")); !strings.Contains(f, "\nstatus: resolved\n") {
		t.Errorf("SNAG-10 after Resolve on its page:\n%s", f)
	}

	// The audit log has each, by the person the link was made for.
	var audit struct {
		Entries []struct {
			Actor, Agent, Action, Outcome, Detail string
			TaskID                                string `json:"task_id"`
		} `json:"entries"`
	}
	d.get("/audit?limit=1000", &audit)
	var task struct {
		Row struct{ ID string } `json:"row"`
	}
	d.get("/tasks/SNAG-16", &task)
	found := map[string]bool{}
	for _, e := range audit.Entries {
		if e.Actor == "person" && e.Agent == "dana" && e.Outcome == "ok" {
			found[e.Action+" "+e.TaskID] = true
		}
	}
	if !found["promote "+task.Row.ID] {
		t.Errorf("the audit log has no promote of SNAG-16 (%s) by dana: %+v", task.Row.ID, audit.Entries)
	}
	var edits int
	for _, e := range audit.Entries {
		if e.Action == "edit" && strings.Contains(e.Detail, "-> critical, wave") && e.Agent == "dana" {
			edits++
		}
	}
	if edits == 0 {
		t.Errorf("the audit log does not record the severity chosen on promotion: %+v", audit.Entries)
	}
}

func TestBoardFollowsFileEdits(t *testing.T) {
	root := sampleProject(t)
	d := startDaemon(t, root)
	b := newBrowser(t)
	b.login(d)
	b.waitFor("the live stream", `document.querySelector("#live").textContent === "live"`)
	evalIn[chromedp.Void](b, `window.__kept = "same page"`)

	path := taskFile(t, root, "SNAG-3")
	old := readFile(t, path)
	edited := regexp.MustCompile(`(?m)^title: .*$`).ReplaceAllString(old, "title: Cart total edited on disk")
	edited = regexp.MustCompile(`(?m)^severity: .*$`).ReplaceAllString(edited, "severity: critical")
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the card to change", `(document.querySelector("#card-SNAG-3 .title") || {}).textContent === "Cart total edited on disk"`)
	if got := evalIn[string](b, `document.querySelector("#card-SNAG-3 .sev").textContent`); got != "critical" {
		t.Errorf("SNAG-3's card shows severity %q after the edit, want critical", got)
	}
	if got := evalIn[string](b, `window.__kept || ""`); got != "same page" {
		t.Errorf("the page reloaded to show the edit")
	}

	// An agent's claim shows too.
	d.claim(d.register(map[string]any{"name": "VESPER", "client": "test"}), "SNAG-1")
	b.waitFor("SNAG-1 in the claimed column", `document.querySelector("section.col-claimed #card-SNAG-1") !== null`)
}

func TestBoardRendersTaskTextInert(t *testing.T) {
	root := sampleProject(t)
	hostile := `---
id: tsk_01M90000000000000000000000
key: SNAG-40
title: "<script>window.__pwned = 'title'</script> Hostile body"
status: open
trust: vetted
severity: low
kind: bug
wave: 1
created: 2026-11-23T10:42:17Z
updated: 2026-11-23T10:42:17Z
---
# Steps

<script>window.__pwned = "script"</script>

<img src=x onerror="window.__pwned = 'img'">

[click me](javascript:window.__pwned='link') and [also](JaVaScRiPt:alert(1)) and [data](data:text/html,<script>alert(1)</script>)

A [real link](https://example.com/docs) stays a link.
`
	if err := os.WriteFile(filepath.Join(root, ".snag", "tasks", "SNAG-40 - Hostile body.md"), []byte(hostile), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, root)
	b := newBrowser(t)
	b.login(d)
	b.open(d.url("/task/SNAG-40"))
	b.waitFor("the task page", `document.querySelector(".markdown") !== null`)
	b.do(chromedp.Click(chromedp.CSS(`.markdown .inert-link`)))
	if got := evalIn[string](b, `String(window.__pwned)`); got != "undefined" {
		t.Fatalf("task text ran script: window.__pwned = %s", got)
	}
	if n := evalIn[int](b, `document.querySelectorAll("main script, main img[src=x], main [onerror]").length`); n != 0 {
		t.Errorf("task text made %d script or image elements", n)
	}
	if n := evalIn[int](b, `[...document.querySelectorAll("a")].filter(a => !/^https?:$/.test(new URL(a.href, location.href).protocol)).length`); n != 0 {
		t.Errorf("%d links on the page are not http(s)", n)
	}
	if got := b.text(".markdown"); !strings.Contains(got, `<script>window.__pwned = "script"</script>`) {
		t.Errorf("the body's markup is not shown as text: %q", got)
	}
	if got := evalIn[string](b, `(document.querySelector('.markdown a[href="https://example.com/docs"]') || {}).textContent || ""`); got != "real link" {
		t.Errorf("the https link is not a link: %q", got)
	}
	if got := b.text("h1"); !strings.Contains(got, "<script>") {
		t.Errorf("the title's markup is not shown as text: %q", got)
	}
	// On the board, the inbox and the activity page too.
	for _, p := range []string{"/", "/inbox", "/activity"} {
		b.open(d.url(p))
		b.waitFor(p, `document.querySelector("main") !== null`)
		if got := evalIn[string](b, `String(window.__pwned)`); got != "undefined" {
			t.Fatalf("%s ran task text: window.__pwned = %s", p, got)
		}
	}
}

func TestBoardRefusesCrossSiteForms(t *testing.T) {
	root := sampleProject(t)
	d := startDaemon(t, root)
	b := newBrowser(t)
	b.login(d)
	before := readFile(t, taskFile(t, root, "SNAG-18"))

	// A page elsewhere (same site: 127.0.0.1 on another port, so the
	// browser sends the cookie) posts a form at the board.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form id=f method=post action="%s"><input name=back value=/></form>
<script>document.getElementById("f").submit()</script>`, d.url("/board/tasks/SNAG-18/reject"))
	}))
	defer evil.Close()
	b.open(evil.URL)
	b.waitFor("the form's answer", `location.port === "`+fmt.Sprint(d.port)+`" && document.body && document.body.innerText.length > 0`)
	if got := evalIn[string](b, `document.body.innerText`); !strings.Contains(got, "refused") && !strings.Contains(got, "Refused") {
		t.Errorf("the cross-site post was answered %q, want a refusal", got)
	}
	if after := readFile(t, taskFile(t, root, "SNAG-18")); after != before {
		t.Fatalf("a cross-site form changed SNAG-18:\n%s", after)
	}

	// The same, sent by a client that holds the cookie, one rule at a time.
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(d.loginLink())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csrf := regexp.MustCompile(`name="snag-csrf" content="([^"]+)"`).FindSubmatch(page)
	if csrf == nil {
		t.Fatalf("the board page carries no CSRF token:\n%s", page)
	}
	self := fmt.Sprintf("http://127.0.0.1:%d", d.port)
	for _, tc := range []struct {
		name, origin, ctype, body string
		want                      int
	}{
		{"no token", self, "application/x-www-form-urlencoded", "back=/", 403},
		{"wrong token", self, "application/x-www-form-urlencoded", "csrf=" + strings.Repeat("A", 43), 403},
		{"other origin", "http://evil.example", "application/x-www-form-urlencoded", "csrf=" + string(csrf[1]), 403},
		{"no origin", "", "application/x-www-form-urlencoded", "csrf=" + string(csrf[1]), 403},
		{"text/plain", self, "text/plain", "csrf=" + string(csrf[1]), 415},
	} {
		req, _ := http.NewRequest(http.MethodPost, d.url("/board/tasks/SNAG-18/reject"), strings.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.ctype)
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
	if after := readFile(t, taskFile(t, root, "SNAG-18")); after != before {
		t.Fatalf("a refused post changed SNAG-18:\n%s", after)
	}
	// With everything right, the move is made.
	form := url.Values{"csrf": {string(csrf[1])}}
	req, _ := http.NewRequest(http.MethodPost, d.url("/board/tasks/SNAG-18/reject"), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", self)
	req.Header.Set("Accept", "application/json")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(readFile(t, taskFile(t, root, "SNAG-18")), "\nstatus: cancelled\n") {
		t.Fatalf("a good post: %d, file:\n%s", resp.StatusCode, readFile(t, taskFile(t, root, "SNAG-18")))
	}
}

// axeFile is axe-core's browser script, installed from the committed
// lockfile in board/testdata/axe (npm ci --prefix board/testdata/axe).
var axeFile = filepath.Join("testdata", "axe", "node_modules", "axe-core", "axe.min.js")

// axeSource reads axe-core's script, or says why it cannot: the caller
// skips (fails in CI, where .ci/run installs it).
func axeSource() (string, error) {
	b, err := os.ReadFile(axeFile)
	if err != nil {
		return "", fmt.Errorf("axe-core is not installed (run npm ci --prefix board/testdata/axe): %w", err)
	}
	return string(b), nil
}

// axeTags are the rule sets the board is held to: WCAG 2.0 and 2.1, A and AA.
const axeTags = `["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]`

// axeFinding is one rule a page breaks, with the elements that break it.
type axeFinding struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

func (f axeFinding) String() string {
	return fmt.Sprintf("%s (%s): %s, on %d element(s):\n\t%s", f.ID, f.Impact, f.Help, len(f.Nodes), strings.Join(f.Nodes, "\n\t"))
}

// axe runs axe-core's WCAG 2.1 A and AA rules over the page the browser
// shows and returns what they find. The script goes in through DevTools,
// as a test harness does, so the board's CSP need not allow it.
func (b *browser) axe(src string) []axeFinding {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](src+";undefined")); err != nil {
		b.t.Fatalf("load axe-core: %v", err)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {runOnly: {type: "tag", values: `+axeTags+`}, resultTypes: ["violations"],
    rules: {"landmark-one-main": {enabled: true}, "page-has-heading-one": {enabled: true}, "region": {enabled: true}}})
  .then(r => JSON.stringify(r.violations.map(v => ({id: v.id, impact: v.impact || "", help: v.help,
    nodes: v.nodes.map(n => n.target.join(" ") + ": " + (n.failureSummary || "").replace(/\s+/g, " "))}))))`, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("run axe-core: %v", err)
	}
	var found []axeFinding
	if err := json.Unmarshal([]byte(out), &found); err != nil {
		b.t.Fatalf("axe-core's answer %q: %v", out, err)
	}
	return found
}

// scheme makes the browser's window w by h pixels and its system color
// scheme light or dark.
func (b *browser) scheme(w, h int64, scheme string) {
	b.t.Helper()
	b.do(chromedp.EmulateViewport(w, h), chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	}))
}

// TestBoardAccessibility opens every page of the board (the queue, the
// inbox, tasks, the activity log, the agents, the problems, the plans, the
// notes, the decision graph and a note's links, the login page, a used
// login link and the 404 pages) in light and dark at 1280 and 390 px,
// and on each: runs axe-core's WCAG 2.1 A and AA rules and fails on any
// finding of serious or critical impact (lesser ones go to the log), fails
// if the page is wider than the window, and takes a screenshot for a person
// to look at, under the test's temp dir or $SNAG_BOARD_SHOTS when set.
// Without axe-core the rules are skipped (they fail in CI) and the rest
// runs.
func TestBoardAccessibility(t *testing.T) {
	src, axeErr := axeSource()
	if axeErr != nil && os.Getenv("CI") != "" {
		t.Fatalf("CI is set: the board's accessibility rules must run (.ci/run installs axe-core): %v", axeErr)
	}
	root := sampleProject(t)
	// The sample's decision graph, with a note from another worktree.
	spike := addWorktreeNote(t, root)
	// A problem to list: a dependency on a task that does not exist.
	dangling := strings.Replace(readFile(t, taskFile(t, root, "SNAG-5")), "depends_on: [SNAG-2]", "depends_on: [SNAG-404]", 1)
	if err := os.WriteFile(taskFile(t, root, "SNAG-5"), []byte(dangling), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, root)
	// Some activity to show, and an agent holding a task.
	d.do(http.MethodPost, "/tasks/SNAG-20/promote", map[string]any{"by": "dana"}, nil)
	d.do(http.MethodPost, "/tasks/SNAG-19/reject", map[string]any{"by": "dana", "reason": "duplicate of SNAG-7"}, nil)
	wren := d.register(map[string]any{"name": "WREN", "client": "claude-code", "client_version": "2.1"})
	d.claim(wren, "SNAG-8")
	// The team's side: a file claim, a report, an agent's draft plan and
	// an agent's note.
	d.as(wren, http.MethodPost, "/files/claim", map[string]any{"paths": []string{"web/cart/**", "web/stepper.ts"}}, nil)
	d.as(wren, http.MethodPost, "/reports", map[string]any{"message": "Labelled the stepper buttons; checking with a screen reader"}, nil)
	d.as(wren, http.MethodPost, "/plans", map[string]any{"title": "Accessible checkout", "body": "## Goal\n\nEvery control has a name.\n"}, nil)
	var wrenNote struct{ Key string }
	d.as(wren, http.MethodPost, "/notes", map[string]any{"title": "Steppers get aria-labels, not visible text", "body": "The design has no room.",
		"task": "SNAG-8", "branch": "main"}, &wrenNote)

	b := newBrowser(t)
	b.login(d)
	anon := newBrowser(t) // never logged in
	used := d.loginLink()
	if resp, err := http.Get(used); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close() // the link is used: a second use shows the refusal
	}

	dir := os.Getenv("SNAG_BOARD_SHOTS")
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "shots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const live = ` && document.querySelector("#live").textContent === "live"`
	decision, _, _ := d.graph("").busiest()
	pages := []struct {
		name, path, ready string
		anon              bool
	}{
		{"board", "/", `document.querySelector("#columns")` + live, false},
		{"inbox", "/inbox", `document.querySelector("#inbox-items")` + live, false},
		{"task", "/task/SNAG-1", `document.querySelector("#task")` + live, false},
		{"task-review", "/task/SNAG-10", `document.querySelector("#task .actions")` + live, false},
		{"task-unvetted", "/task/SNAG-16", `document.querySelector("#task .markdown.data")` + live, false},
		{"activity", "/activity", `document.querySelector("#activity")` + live, false},
		{"agents", "/agents", `document.querySelector("#agents .agent")` + live, false},
		{"problems", "/problems", `document.querySelector("#problems .problems")` + live, false},
		{"plans", "/team/plans", `document.querySelector("#plans .plan")` + live, false},
		{"plan", "/team/plans/checkout-revamp", `document.querySelector("#plan .markdown")` + live, false},
		{"plan-draft", "/team/plans/accessible-checkout", `document.querySelector("#plan .markdown.data")` + live, false},
		{"notes", "/team/notes", `document.querySelector("#notes .note-item")` + live, false},
		{"note", "/team/notes/" + wrenNote.Key, `document.querySelector("#note .markdown.data")` + live, false},
		{"graph", "/team/graph", `document.querySelector("#graph svg a")` + live, false},
		{"graph-filtered", "/team/graph?type=option", `document.querySelector("#graph svg a")` + live, false},
		{"graph-node", "/team/notes/" + decision.Key, `document.querySelector("#note .edges")` + live, false},
		{"graph-node-elsewhere", "/team/notes/" + spike.key, `document.querySelector("#note .alert")` + live, false},
		{"no-task", "/task/SNAG-404", `document.querySelector(".message")`, false},
		{"not-found", "/board/nope", `document.querySelector(".message")`, false},
		{"not-found-top", "/nope", `document.querySelector(".message")`, false},
		{"login", "/inbox", `document.querySelector(".message")`, true},
		{"login-used", used, `document.querySelector(".message")`, true},
	}
	serious := 0
	for _, size := range []struct{ w, h int64 }{{1280, 900}, {390, 844}} {
		for _, scheme := range []string{"light", "dark"} {
			b.scheme(size.w, size.h, scheme)
			anon.scheme(size.w, size.h, scheme)
			for _, p := range pages {
				br := b
				if p.anon {
					br = anon
				}
				u := p.path
				if strings.HasPrefix(u, "/") {
					u = d.url(u)
				}
				br.open(u)
				br.waitFor(p.name, p.ready)
				name := fmt.Sprintf("%s-%d", p.name, size.w)
				if scheme == "dark" {
					name += "-dark"
				}
				if got := evalIn[string](br, `[document.documentElement.lang, document.querySelectorAll("main").length, document.querySelectorAll("h1").length, document.title].join(" | ")`); !regexp.MustCompile(`^en \| 1 \| 1 \| \S.* · snag$`).MatchString(got) {
					t.Errorf("%s: lang | main landmarks | h1 | title = %q, want en, one main, one h1 and a title", name, got)
				}
				if w := evalIn[int](br, `document.documentElement.scrollWidth`); w > int(size.w) {
					t.Errorf("%s: %d px wide: it scrolls sideways", name, w)
				}
				ctx, cancel := context.WithTimeout(br.ctx, 30*time.Second)
				png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(dir, name+".png")
				if err := os.WriteFile(path, png, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("screenshot: %s", path)
				if axeErr != nil {
					continue
				}
				for _, f := range br.axe(src) {
					if f.Impact == "serious" || f.Impact == "critical" {
						serious++
						t.Errorf("%s: axe-core: %s", name, f)
					} else {
						t.Logf("%s: axe-core: %s", name, f)
					}
				}
			}
		}
	}
	if axeErr != nil {
		t.Skipf("the pages were drawn, but not checked: %v", axeErr)
	}
	if serious > 0 {
		t.Errorf("%d serious or critical findings of axe-core (rules %s)", serious, axeTags)
	}
}

// TestBoardNotFoundPage: a browser opening an address snagd does not serve
// gets a page saying so (or the login page, without a session); the CLI,
// the MCP bridge and scripts, which ask for JSON, still get JSON.
func TestBoardNotFoundPage(t *testing.T) {
	d := startDaemon(t, sampleProject(t))
	const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	for _, tc := range []struct {
		path, accept string
		token        bool
		status       int
		ctype, has   string
	}{
		{"/nope", browserAccept, true, 404, "text/html", `<html lang="en">`},
		{"/board/nope", browserAccept, true, 404, "text/html", "No such page"},
		{"/nope", browserAccept, false, 401, "text/html", "snag open"},
		{"/nope", "", true, 404, "application/json", `"not_found"`},
		{"/nope", "application/json", false, 401, "application/json", `"unauthorized"`},
		{"/tasks", browserAccept, false, 401, "application/json", `"unauthorized"`},
	} {
		req, _ := http.NewRequest(http.MethodGet, d.url(tc.path), nil)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		if tc.token {
			req.Header.Set("Authorization", "Bearer "+d.token)
		}
		resp := d.raw(req)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) || !strings.Contains(string(body), tc.has) {
			t.Errorf("GET %s (Accept %q, token %v): %d %s, want %d %s with %q\n%s", tc.path, tc.accept, tc.token,
				resp.StatusCode, resp.Header.Get("Content-Type"), tc.status, tc.ctype, tc.has, body)
		}
	}
}

// focusContrast is the contrast ratio between the focused element's
// outline and the first opaque background under it (its parent's, as the
// outline is drawn outside the element).
const focusContrast = `(() => {
  const rgb = s => s.match(/[\d.]+/g).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4 })
    .reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
  const el = document.activeElement;
  let bg = null;
  for (let n = el.parentElement; n && !bg; n = n.parentElement) {
    const c = rgb(getComputedStyle(n).backgroundColor);
    if (c.length < 4 || c[3] > 0) bg = c;
  }
  const a = lum(rgb(getComputedStyle(el).outlineColor)), b = lum(bg || [255, 255, 255]);
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
})()`

// TestBoardKeyboard walks the board with Tab alone: the skip link comes
// first, every card is reachable, and Enter opens it.
func TestBoardKeyboard(t *testing.T) {
	d := startDaemon(t, sampleProject(t))
	b := newBrowser(t)
	b.login(d)
	// In light and in dark: Tab from the top of the board to SNAG-1's card.
	for _, scheme := range []string{"dark", "light"} {
		b.scheme(1280, 900, scheme)
		b.open(d.url("/"))
		b.waitFor("the board", `document.querySelector("#columns") !== null`)
		b.do(chromedp.KeyEvent("\t"))
		if got := evalIn[string](b, `document.activeElement.className`); got != "skip" {
			t.Errorf("in %s, the first Tab lands on %q, want the skip link", scheme, got)
		}
		for i := 0; i < 60; i++ {
			if evalIn[bool](b, `document.activeElement.matches("#card-SNAG-1 a.card-link")`) {
				break
			}
			b.do(chromedp.KeyEvent("\t"))
		}
		if !evalIn[bool](b, `document.activeElement.matches("#card-SNAG-1 a.card-link")`) {
			t.Fatalf("in %s, Tab never reached SNAG-1's card; it stopped on %s", scheme, evalIn[string](b, `document.activeElement.outerHTML.slice(0, 200)`))
		}
		if o := evalIn[string](b, `getComputedStyle(document.activeElement).outlineStyle`); o == "none" {
			t.Errorf("in %s, the focused card shows no outline", scheme)
		}
		// WCAG 2.1 1.4.11: the focus ring stands out 3:1 from what it is drawn on.
		if got := evalIn[float64](b, focusContrast); got < 3 {
			t.Errorf("in %s, the focused card's outline has a contrast of %.2f:1 with the background behind it, want 3:1 or more", scheme, got)
		}
		if dir := os.Getenv("SNAG_BOARD_SHOTS"); dir != "" {
			ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
			png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			cancel()
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, "focus-1280-"+scheme+".png"), png, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	b.do(chromedp.KeyEvent("\r"))
	b.waitFor("SNAG-1's page", `location.pathname === "/task/SNAG-1" && document.querySelector("h1") !== null`)
}

// TestBoardProblemsAndAgents reads the problems and agents pages as the
// server renders them (no script needed).
func TestBoardProblemsAndAgents(t *testing.T) {
	root := sampleProject(t)
	tasks := filepath.Join(root, ".snag", "tasks")
	if err := os.WriteFile(filepath.Join(tasks, "SNAG-50 - Broken.md"), []byte("---\ntitle: [unclosed\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dangling := strings.Replace(readFile(t, taskFile(t, root, "SNAG-5")), "depends_on: [SNAG-2]", "depends_on: [SNAG-404]", 1)
	if err := os.WriteFile(taskFile(t, root, "SNAG-5"), []byte(dangling), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, root)
	page := func(path string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, d.url(path), nil)
		req.Header.Set("Authorization", "Bearer "+d.token)
		resp := d.raw(req)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	got := page("/problems")
	for _, want := range []string{"SNAG-50 - Broken.md", "invalid", "dangling", "depends on SNAG-404"} {
		if !strings.Contains(got, want) {
			t.Errorf("the problems page lacks %q", want)
		}
	}
	if strings.Contains(got, "[{") {
		t.Errorf("the problems page prints a Go value")
	}

	d.claim(d.register(map[string]any{"name": "WREN", "client": "claude-code", "client_version": "2.1"}), "SNAG-8")
	// An agent no connection stands for (MCP 2026-07-28 over /mcp): the
	// page says when it ends unless a call names its handle.
	req, _ := http.NewRequest(http.MethodPost, d.url("/mcp"), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call",`+
		`"params":{"name":"snag_claim","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
		`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"stateless-host","version":"3"}}}}`))
	for k, v := range map[string]string{"Authorization": "Bearer " + d.token, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "snag_claim"} {
		req.Header.Set(k, v)
	}
	resp := d.raw(req)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "lh_") {
		t.Fatalf("a sessionless snag_claim over /mcp: %d\n%s", resp.StatusCode, b)
	}
	got = page("/agents")
	for _, want := range []string{"<h2>WREN</h2>", "claude-code 2.1", `href="/task/SNAG-8"`, "Quantity stepper buttons",
		"stateless-host 3", "known by its handle", "unless a call names its handle"} {
		if !strings.Contains(got, want) {
			t.Errorf("the agents page lacks %q", want)
		}
	}
}

// TestBoardEndsAnAgent: a person ends an agent's session from the agents
// page (an agent gone without disconnecting): its task goes back to the
// queue, the session is gone, and the audit log names the person.
func TestBoardEndsAnAgent(t *testing.T) {
	root := sampleProject(t)
	d := startDaemon(t, root)
	sessID := d.register(map[string]any{"name": "WREN", "client": "inspector", "client_version": "0.17"})
	d.claim(sessID, "SNAG-8")

	b := newBrowser(t)
	b.login(d)
	b.open(d.url("/agents"))
	form := fmt.Sprintf(`form[action="/board/sessions/%d/end"]`, sessID)
	b.waitFor("WREN's end button", `document.querySelector('`+form+` button') !== null`)
	if got := b.text(form + " button"); !strings.Contains(got, "End WREN's session and release 1 task") {
		t.Errorf("the end button says %q", got)
	}
	if got := b.text(".agent .note"); !strings.Contains(got, "holds no stream") {
		t.Errorf("the agent's activity says %q", got)
	}
	b.typeInto(form+` input[name="reason"]`, "the inspector was closed")
	// Another agent connects: the page shows it live and keeps what was typed.
	if code := d.do(http.MethodPost, "/sessions", map[string]any{"name": "IBIS", "client": "test"}, nil); code != http.StatusCreated {
		t.Fatalf("register IBIS: %d", code)
	}
	b.waitFor("IBIS on the agents page", `document.querySelector('#agents').innerText.includes("IBIS")`)
	if got := evalIn[string](b, `document.querySelector('`+form+` input[name="reason"]').value`); got != "the inspector was closed" {
		t.Errorf("the reason typed before the page refreshed is now %q", got)
	}
	// The field kept the focus and the caret: typing on adds to the end.
	if got := evalIn[string](b, `document.activeElement.name`); got != "reason" {
		t.Errorf("after the refresh the focus is on %q; want the reason field", got)
	}
	b.do(chromedp.KeyEvent(" for good"))
	if got := evalIn[string](b, `document.querySelector('`+form+` input[name="reason"]').value`); got != "the inspector was closed for good" {
		t.Errorf("typing on after the refresh made the reason %q", got)
	}
	b.click(form + " button")
	b.waitFor("WREN gone from the agents page", `location.pathname === "/agents" && document.querySelector('`+form+`') === null`)
	if v := d.task("SNAG-8"); v.Status != "open" || v.Assignee != "" {
		t.Errorf("SNAG-8 after its agent's session was ended: %+v", v)
	}
	var live struct{ Sessions []struct{ Name string } }
	d.get("/sessions", &live)
	if len(live.Sessions) != 1 || live.Sessions[0].Name != "IBIS" {
		t.Errorf("sessions after the end: %+v", live.Sessions)
	}
	if !d.auditHas("session_end", "WREN (holding 1): ended by dana: the inspector was closed for good") {
		var log struct {
			Entries []struct{ Action, Agent, Detail string }
		}
		d.get("/audit?limit=1000", &log)
		t.Errorf("the audit log does not say dana ended WREN's session: %+v", log.Entries)
	}
}

// TestBoardRefusedMoves: a move the board cannot make is answered with the
// status that says why and the sentence for the person: no such task 404,
// a move its status does not allow 409, no such move 404, no such session
// 404; a bulk move makes the moves it can and names the ones refused. A
// plain form post gets the same as a page.
func TestBoardRefusedMoves(t *testing.T) {
	root := sampleProject(t)
	d := startDaemon(t, root)
	before := readFile(t, taskFile(t, root, "SNAG-1"))
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(d.loginLink())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csrf := regexp.MustCompile(`name="snag-csrf" content="([^"]+)"`).FindSubmatch(page)
	if csrf == nil {
		t.Fatalf("the board page carries no CSRF token:\n%s", page)
	}
	post := func(path string, form url.Values, accept string) (int, string) {
		t.Helper()
		form.Set("csrf", string(csrf[1]))
		req, _ := http.NewRequest(http.MethodPost, d.url(path), strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", fmt.Sprintf("http://127.0.0.1:%d", d.port))
		req.Header.Set("Accept", accept)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if accept != "application/json" {
			return resp.StatusCode, string(b)
		}
		var v struct {
			OK      bool   `json:"ok"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(b, &v); err != nil || v.OK != (resp.StatusCode == http.StatusOK) {
			t.Fatalf("POST %s: %d %s; want the JSON the board's script reads", path, resp.StatusCode, b)
		}
		return resp.StatusCode, v.Message
	}
	const js = "application/json"
	for _, tc := range []struct {
		path string
		form url.Values
		want int
		says string
	}{
		{"/board/tasks/SNAG-999/cancel", url.Values{}, 404, "SNAG-999"},
		{"/board/tasks/SNAG-1/reject", url.Values{}, 409, "reject"},
		{"/board/tasks/SNAG-1/promote", url.Values{"severity": {"dire"}}, 400, "unknown severity"},
		{"/board/tasks/SNAG-1/fly", url.Values{}, 404, "no such move"},
		{"/board/sessions/999/end", url.Values{}, 404, "snag agents"},
		{"/board/bulk", url.Values{"move": {"promote"}, "ref": {"SNAG-16", "SNAG-1"}}, 409, "promoted SNAG-16; refused: "},
	} {
		if code, msg := post(tc.path, tc.form, js); code != tc.want || !strings.Contains(msg, tc.says) {
			t.Errorf("POST %s %v: %d %q; want %d saying %q", tc.path, tc.form, code, msg, tc.want, tc.says)
		}
	}
	if f := readFile(t, taskFile(t, root, "SNAG-16")); !strings.Contains(f, "\nstatus: open\n") {
		t.Errorf("SNAG-16 after a bulk promote that refused another:\n%s", f)
	}
	if f := readFile(t, taskFile(t, root, "SNAG-1")); f != before {
		t.Errorf("SNAG-1 after refused moves:\n%s", f)
	}
	if code, body := post("/board/tasks/SNAG-1/reject", url.Values{}, "text/html"); code != 409 || !strings.Contains(body, "<h1>Refused</h1>") || !strings.Contains(body, "reject") {
		t.Errorf("a plain form post of a refused move: %d\n%s", code, body)
	}
}

// The team on the board as a person meets it: the agents page shows an
// agent's file claims and last report, live; a person activates an
// agent's draft plan with its button (vetting it in the file); the notes
// page lists an agent's note and a person's.
func TestBoardTeam(t *testing.T) {
	root := sampleProject(t)
	d := startDaemon(t, root)
	b := newBrowser(t)
	b.login(d)
	lynx := d.register(map[string]any{"name": "LYNX", "client": "codex"})
	b.open(d.url("/agents"))
	b.waitFor("agents", `document.querySelector("#agents .agent") && document.querySelector("#live").textContent === "live"`)
	d.as(lynx, http.MethodPost, "/files/claim", map[string]any{"paths": []string{"internal/cart/**"}}, nil)
	d.as(lynx, http.MethodPost, "/reports", map[string]any{"message": "Rounding fixed; writing tests"}, nil)
	b.waitFor("the claim and the report, live", `document.querySelector("#agents").textContent.includes("internal/cart/**") && document.querySelector("#agents").textContent.includes("Rounding fixed")`)
	if evalIn[bool](b, `!!document.querySelector("#h-team, .team-agent, .team-held")`) {
		t.Error("snagd alone shows a section of other clones on the agents page")
	}

	d.as(lynx, http.MethodPost, "/plans", map[string]any{"title": "Cart rewrite", "body": "Goals.\n"}, nil)
	b.open(d.url("/team/plans/cart-rewrite"))
	b.waitFor("the draft", `document.querySelector("#plan .markdown.data")`)
	b.click(`form[action="/board/plans/cart-rewrite/activate"] button`)
	b.waitFor("the activation", `document.querySelector("#plan .pl-active") && !document.querySelector("#plan .markdown.data")`)
	plan := readFile(t, filepath.Join(root, ".snag", "plans", "cart-rewrite.md"))
	if !strings.Contains(plan, "status: active") || !strings.Contains(plan, "trust: vetted") {
		t.Errorf("the plan file after the board activated it:\n%s", plan)
	}
	var log struct {
		Entries []struct{ Action, Agent, Detail string }
	}
	d.get("/audit?limit=1000", &log)
	found := false
	for _, e := range log.Entries {
		found = found || (e.Action == "plan_update" && strings.Contains(e.Detail, "draft -> active"))
	}
	if !found {
		t.Error("the audit log does not record the board's activation")
	}

	d.as(lynx, http.MethodPost, "/notes", map[string]any{"title": "Cents everywhere, again", "kind": "observation", "branch": "main"}, nil)
	b.open(d.url("/team/notes"))
	b.waitFor("the notes", `document.querySelector("#notes").textContent.includes("Cents everywhere, again") && document.querySelector("#notes").textContent.includes("Money is integer cents")`)
	b.click(`#notes a[href="/team/notes/N-3"]`)
	b.waitFor("the note's page", `document.querySelector("#note h1") && document.querySelector("#note h1").textContent.includes("N-3")`)
}
