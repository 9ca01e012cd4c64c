package daemon_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snagdtest"
)

// The browser extension (extension/, issue 18) against a real snagd: its
// pairing and its capture credential over HTTP, and the extension itself
// loaded into real headless Chromium, driven with real mouse and key
// events. The Chromium tests skip without Chromium unless CI is set.

// extensionDir is the extension's folder, absolute.
func extensionDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "extension"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// extensionID is the id Chromium gives the extension, from its manifest's
// key: the first 32 hex digits of the key's SHA-256, written with a to p.
func extensionID(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(extensionDir(t), "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Key string }
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	der, err := base64.StdEncoding.DecodeString(m.Key)
	if err != nil || m.Key == "" {
		t.Fatalf("manifest.json's key: %v", err)
	}
	sum := sha256.Sum256(der)
	id := []byte(hex.EncodeToString(sum[:16]))
	for i, c := range id {
		if c <= '9' {
			id[i] = 'a' + (c - '0')
		} else {
			id[i] = 'a' + 10 + (c - 'a')
		}
	}
	return string(id)
}

// extOrigin is an extension origin of the form Chromium sends: the real
// extension's, or another's for the tests that need a stranger.
func extOrigin(id string) string { return "chrome-extension://" + id }

const strangerID = "abcdefghijklmnopabcdefghijklmnop"

// extRequest sends a request as the extension would: from origin (when not
// ""), with bearer (when not ""), a JSON body when in is not nil.
func (d *daemon) extRequest(method, path, origin, bearer string, in any) (*http.Response, api.Error) {
	d.t.Helper()
	var body *bytes.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	} else {
		body = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, d.url(path), body)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp := d.raw(req)
	defer resp.Body.Close()
	var e api.Error
	json.NewDecoder(resp.Body).Decode(&e)
	return resp, e
}

// pairingCode asks snagd for a code as snag pair does: with the token.
func (d *daemon) pairingCode() api.PairingCode {
	d.t.Helper()
	var pc api.PairingCode
	if code := d.do("POST", "/pairing-codes", api.MoveRequest{By: "dana"}, &pc); code != http.StatusCreated {
		d.t.Fatalf("POST /pairing-codes: %d %+v", code, pc)
	}
	return pc
}

// pairAs exchanges a fresh code for a capture credential from origin, as
// the popup does.
func (d *daemon) pairAs(origin string) string {
	d.t.Helper()
	pc := d.pairingCode()
	b, _ := json.Marshal(api.PairRequest{Code: pc.Code})
	req, _ := http.NewRequest("POST", d.url("/pair"), bytes.NewReader(b))
	req.Header.Set("Origin", origin)
	req.Header.Set("Content-Type", "application/json")
	resp := d.raw(req)
	defer resp.Body.Close()
	var p api.Paired
	json.NewDecoder(resp.Body).Decode(&p)
	if resp.StatusCode != http.StatusCreated || !strings.HasPrefix(p.Credential, api.CaptureCredentialPrefix) || p.Origin != origin {
		d.t.Fatalf("POST /pair: %d %+v", resp.StatusCode, p)
	}
	return p.Credential
}

// smallCapture is a good capture of a page on 127.0.0.1.
func smallCapture(t *testing.T) api.CaptureRequest {
	return api.CaptureRequest{URL: "http://127.0.0.1:8080/", Note: "The total is wrong",
		Screenshot: base64.StdEncoding.EncodeToString(pagePNG(t, 60, 40, image.Rect(0, 0, 10, 10)))}
}

// TestPairingCodes: a code from POST /pairing-codes, as snag pair prints
// it, works once, from an extension's origin only; a wrong or used one is
// told the same sentence, which names snag pair; tries beyond the burst
// wait (429 with Retry-After).
func TestPairingCodes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, sampleProject(t), "")
	origin := extOrigin(extensionID(t))
	pc := d.pairingCode()
	if want := fmt.Sprintf("127.0.0.1:%d %s", d.port, pc.Code); pc.Line != want || len(pc.Code) != 7 || pc.Code[3] != '-' {
		t.Errorf("pairing code %+v: want the line %q, a code like K7M-2QX", pc, want)
	}
	if left := time.Until(pc.Expires); left < 4*time.Minute || left > 5*time.Minute+time.Second {
		t.Errorf("the code expires in %v, want 5 minutes", left)
	}
	pair := func(origin, code string) (*http.Response, api.Error) {
		return d.extRequest("POST", "/pair", origin, "", api.PairRequest{Code: code})
	}
	refusedSame := ""
	for _, tc := range []struct {
		name, origin, code string
		status             int
		errCode            string
	}{
		{"no origin", "", pc.Code, 403, "bad_origin"},
		{"a web page's origin", "http://127.0.0.1:9", pc.Code, 403, "bad_origin"},
		{"a wrong code", origin, "ABC-DEF", 403, "bad_pairing_code"},
	} {
		resp, e := pair(tc.origin, tc.code)
		if resp.StatusCode != tc.status || e.Code != tc.errCode {
			t.Errorf("%s: %d %s %q; want %d %s", tc.name, resp.StatusCode, e.Code, e.Message, tc.status, tc.errCode)
		}
		if tc.errCode == "bad_pairing_code" {
			refusedSame = e.Message
		}
	}
	// Typed in lower case, without the dash: it works, once.
	resp, e := pair(origin, strings.ToLower(strings.ReplaceAll(pc.Code, "-", " ")))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("the right code: %d %+v", resp.StatusCode, e)
	}
	resp, e = pair(origin, pc.Code)
	if resp.StatusCode != http.StatusForbidden || e.Code != "bad_pairing_code" || e.Message != refusedSame || !strings.Contains(e.Message, "snag pair") {
		t.Errorf("a used code: %d %s %q; want 403 bad_pairing_code with the wrong code's own sentence", resp.StatusCode, e.Code, e.Message)
	}
	// Three of the burst's 5 tries are spent (the refused origins never
	// reached the bucket): a few more and the next ones wait, even if the
	// bucket refilled meanwhile on a slow machine.
	var limited *http.Response
	for range 10 {
		if limited, e = pair(origin, "ZZZ-ZZZ"); limited.StatusCode == http.StatusTooManyRequests {
			break
		}
	}
	if limited.StatusCode != http.StatusTooManyRequests || e.Code != "too_many_tries" || limited.Header.Get("Retry-After") == "" {
		t.Errorf("tries past the burst: %d %s %q, Retry-After %q; want 429 too_many_tries with Retry-After",
			limited.StatusCode, e.Code, e.Message, limited.Header.Get("Retry-After"))
	}
}

// TestCaptureCredentialOpensCapturesAlone: the capture credential pairing
// gives creates captures, from the origin that paired, and opens nothing
// else: every other route, the board and /mcp answer capture_only, and
// another origin, or none, is refused. The main token is refused from an
// extension's origin; CORS is answered for the extension's two routes
// alone; allow_host is refused. The credential is kept as a hash, mode
// 0600, and survives snagd's restart; snag pair --revoke ends it.
func TestCaptureCredentialOpensCapturesAlone(t *testing.T) {
	t.Parallel()
	root, home := sampleProject(t), filepath.Join(t.TempDir(), "home")
	d := startDaemon(t, root, home)
	origin := extOrigin(extensionID(t))
	cred := d.pairAs(origin)

	resp, e := d.extRequest("POST", "/captures", origin, cred, smallCapture(t))
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Fatalf("a capture with the credential: %d %+v, Allow-Origin %q", resp.StatusCode, e, resp.Header.Get("Access-Control-Allow-Origin"))
	}

	for _, tc := range []struct{ method, path string }{
		{"GET", "/tasks"}, {"GET", "/events"}, {"POST", "/tasks"}, {"GET", "/tasks/SNAG-1"}, {"POST", "/claim"},
		{"POST", "/mcp"}, {"GET", "/mcp"}, {"GET", "/"}, {"GET", "/inbox"}, {"POST", "/board/bulk"},
		{"POST", "/login-codes"}, {"POST", "/pairing-codes"}, {"GET", "/capture-credentials"},
		{"DELETE", "/capture-credentials"}, {"POST", "/pair"}, {"GET", "/captures"},
	} {
		for _, o := range []string{origin, ""} {
			var in any
			if tc.method == "POST" {
				in = map[string]any{}
			}
			resp, e := d.extRequest(tc.method, tc.path, o, cred, in)
			if resp.StatusCode != http.StatusForbidden || e.Code != "capture_only" || !strings.Contains(e.Message, "only captures") {
				t.Errorf("%s %s (origin %q) with the capture credential: %d %s %q; want 403 capture_only", tc.method, tc.path, o, resp.StatusCode, e.Code, e.Message)
			}
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
				t.Errorf("%s %s: Allow-Origin %q on a route the extension may not call", tc.method, tc.path, got)
			}
		}
	}

	for _, tc := range []struct {
		name, origin, bearer string
		change               func(*api.CaptureRequest)
		status               int
		code, says           string
	}{
		{"another extension", extOrigin(strangerID), cred, nil, 403, "bad_origin", "paired from " + origin},
		{"no origin", "", cred, nil, 403, "bad_origin", "paired from " + origin},
		{"a web page", "http://localhost:3000", cred, nil, 403, "bad_origin", "other origins"},
		{"the main token from the extension", origin, d.token, nil, 401, "not_paired", "never the token"},
		{"no credential from the extension", origin, "", nil, 401, "not_paired", "snag pair"},
		{"a made-up credential", origin, api.CaptureCredentialPrefix + strings.Repeat("x", 43), nil, 401, "not_paired", "snag pair"},
		{"allow_host", origin, cred, func(r *api.CaptureRequest) { r.AllowHost, r.URL = true, "https://example.com/" }, 403, "capture_only", "browser.allowed_hosts"},
	} {
		req := smallCapture(t)
		if tc.change != nil {
			tc.change(&req)
		}
		resp, e := d.extRequest("POST", "/captures", tc.origin, tc.bearer, req)
		if resp.StatusCode != tc.status || e.Code != tc.code || !strings.Contains(e.Message, tc.says) {
			t.Errorf("%s: %d %s %q; want %d %s saying %q", tc.name, resp.StatusCode, e.Code, e.Message, tc.status, tc.code, tc.says)
		}
	}

	// CORS: preflights of the extension's two routes, for its origin.
	for _, tc := range []struct {
		path, origin string
		status       int
	}{
		{"/captures", origin, 204}, {"/pair", origin, 204}, {"/captures", extOrigin(strangerID), 204},
		{"/tasks", origin, 403}, {"/mcp", origin, 403}, {"/captures", "http://localhost:3000", 403}, {"/captures", "chrome-extension://short", 403},
	} {
		req, _ := http.NewRequest("OPTIONS", d.url(tc.path), nil)
		req.Header.Set("Origin", tc.origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization,content-type")
		resp := d.raw(req)
		resp.Body.Close()
		allow := resp.Header.Get("Access-Control-Allow-Origin")
		switch {
		case resp.StatusCode != tc.status:
			t.Errorf("preflight of %s from %s: %d, want %d", tc.path, tc.origin, resp.StatusCode, tc.status)
		case tc.status == 204 && (allow != tc.origin || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") || resp.Header.Get("Access-Control-Allow-Methods") != "POST"):
			t.Errorf("preflight of %s: Allow-Origin %q, headers %q, methods %q", tc.path, allow, resp.Header.Get("Access-Control-Allow-Headers"), resp.Header.Get("Access-Control-Allow-Methods"))
		case tc.status != 204 && allow != "":
			t.Errorf("refused preflight of %s from %s sets Allow-Origin %q", tc.path, tc.origin, allow)
		}
	}

	// The file holds the hash, not the credential, for this origin and
	// project; the token's folder keeps it, mode 0600.
	file := filepath.Join(home, "capture-credentials.json")
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v; want mode 0600", file, err, fi.Mode())
	}
	raw, _ := os.ReadFile(file)
	sum := sha256.Sum256([]byte(cred))
	if bytes.Contains(raw, []byte(cred)) || bytes.Contains(raw, []byte(cred[len(api.CaptureCredentialPrefix):])) ||
		!bytes.Contains(raw, []byte(hex.EncodeToString(sum[:]))) || !bytes.Contains(raw, []byte(origin)) {
		t.Errorf("%s holds the credential, or not its hash and origin:\n%s", file, raw)
	}

	// A restarted snagd takes it still; snag pair --list shows it, --revoke
	// ends it, here and for the next capture.
	d.p.Stop()
	d = startDaemon(t, root, home)
	if resp, e := d.extRequest("POST", "/captures", origin, cred, smallCapture(t)); resp.StatusCode != http.StatusCreated {
		t.Fatalf("a capture after snagd's restart: %d %+v", resp.StatusCode, e)
	}
	if out := d.mustSnag("pair", "--list"); !strings.Contains(out, origin) || !strings.Contains(out, root) {
		t.Errorf("snag pair --list:\n%s\nwant the origin and the project", out)
	}
	if out := d.mustSnag("pair", "--revoke"); !strings.Contains(out, "revoked 1 capture credential") {
		t.Errorf("snag pair --revoke:\n%s", out)
	}
	resp, e = d.extRequest("POST", "/captures", origin, cred, smallCapture(t))
	if resp.StatusCode != http.StatusUnauthorized || e.Code != "not_paired" || !strings.Contains(e.Message, "revoked") {
		t.Errorf("a capture after snag pair --revoke: %d %s %q; want 401 not_paired saying it was revoked", resp.StatusCode, e.Code, e.Message)
	}
	if out := d.mustSnag("pair", "--list"); !strings.Contains(out, "no browser extension is paired") {
		t.Errorf("snag pair --list after --revoke:\n%s", out)
	}
}

// extBrowser is headless Chromium (the new headless mode, which loads
// extensions) with the snag extension loaded unpacked.
type extBrowser struct {
	t   *testing.T
	ctx context.Context // the first tab's: new tabs open beside it
	id  string          // the extension's id
}

func newExtBrowser(t *testing.T) *extBrowser {
	t.Helper()
	exe := chromiumPath(t)
	dir, ext := t.TempDir(), extensionDir(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.WindowSize(1280, 900),
		chromedp.Env("HOME=" + dir),
		chromedp.Flag("headless", "new"),
		chromedp.Flag("load-extension", ext),
		chromedp.Flag("disable-extensions-except", ext),
	}
	for _, f := range []string{"no-sandbox", "disable-gpu", "no-first-run", "no-default-browser-check",
		"disable-background-networking", "disable-component-update", "disable-sync",
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
	b := &extBrowser{t: t, ctx: ctx, id: extensionID(t)}
	// The extension is loaded once its service worker runs.
	deadline := time.Now().Add(20 * time.Second)
	for {
		infos, err := chromedp.Targets(ctx)
		if err == nil && slices.ContainsFunc(infos, func(i *target.Info) bool {
			return i.Type == "service_worker" && strings.HasPrefix(i.URL, extOrigin(b.id)+"/")
		}) {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("the extension's service worker did not start (targets %v, %v)", infos, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tab opens url in a new tab and waits for its load.
func (b *extBrowser) tab(url string) context.Context {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.t.Cleanup(cancel)
	// The first run opens the tab, which lives as long as its context: it
	// has no timeout of its own.
	if err := chromedp.Do(ctx); err != nil {
		b.t.Fatalf("open a tab: %v", err)
	}
	b.run(ctx, chromedp.Navigate(url))
	b.waitFor(ctx, url+" loaded", `document.readyState === "complete"`)
	return ctx
}

func (b *extBrowser) run(ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(c, steps...); err != nil {
		b.t.Fatal(err)
	}
}

// eval evaluates expr in the tab, waiting for a promise it gives.
func eval[T any](b *extBrowser, ctx context.Context, expr string) T {
	b.t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor waits until expr is truthy in the tab.
func (b *extBrowser) waitFor(ctx context.Context, what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		var ok bool
		ok, err = chromedp.Run(c, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + (document.body ? document.body.innerText.slice(0, 2000) : "")`))
	b.t.Fatalf("timed out waiting for %s (%v); the page:\n%s", what, err, body)
}

// point is a place in a tab's window, in CSS pixels.
type point struct{ X, Y float64 }

// center is where the middle of what expr (an element) is, in the window.
func center(b *extBrowser, ctx context.Context, expr string) point {
	b.t.Helper()
	return eval[point](b, ctx, `(() => { const r = (`+expr+`).getBoundingClientRect(); return {X: r.left + r.width / 2, Y: r.top + r.height / 2}; })()`)
}

// checkoutPage is the page the person captures from: it logs a console
// error and throws while it loads, and is scrolled before the capture so
// that the anchor's box (in the page) and the screenshot (the window) are
// told apart.
const checkoutPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Checkout</title>
<script>console.error("cart failed to load: %s", "HTTP 500");</script>
<script>throw new Error("boom at load");</script>
<style>body { margin: 0; font: 16px sans-serif; } .spacer { height: 700px; background: #eef; }
#checkout { padding: 20px; } button { width: 120px; height: 40px; border: 0; margin: 0 10px 0 0; }
.pay { background: rgb(220, 0, 0); color: white; } .cancel { background: #ccc; }</style></head>
<body><div class="spacer">Top of the page</div>
<div id="checkout"><div>Total: 42 EUR</div><div><button class="pay">Pay now</button><button class="cancel">Cancel</button></div></div>
<div class="spacer"></div>
<script>document.querySelector(".pay").addEventListener("click", () => { document.title = "paid" });</script>
</body></html>`

// panelExpr is the in-page panel's element of that id, in its shadow root.
func panelExpr(id string) string {
	return fmt.Sprintf(`document.querySelector("snag-capture")?.shadowRoot?.getElementById(%q)`, id)
}

// capture runs the person's capture in Chromium: the popup's button
// (startPicker, for the page's tab), a hover and a click on the pay button
// with the mouse, the note, kind and severity typed, Send clicked. It
// returns the panel's status once the extension has an answer.
func (b *extBrowser) capture(popup, page context.Context, pageURL, note string) string {
	b.t.Helper()
	eval[bool](b, popup, fmt.Sprintf(`(async () => {
		const tabs = await chrome.tabs.query({});
		const tab = tabs.find(t => t.url === %q);
		await startPicker(tab.id);
		return true;
	})()`, pageURL))
	// The page's tab in front, as it is when a person clicks the toolbar.
	b.run(page, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, target.ActivateTarget, target.ActivateTargetParams{TargetID: t.TargetID})
		return err
	}))
	b.waitFor(page, "the picker's hint", `document.querySelector("snag-capture")?.shadowRoot?.querySelector(".hint")`)
	at := center(b, page, `document.querySelector(".pay")`)
	b.run(page, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, at.X-30, at.Y), chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, at.X, at.Y))
	b.waitFor(page, "the outline on the pay button", `(() => {
		const o = document.querySelector("snag-capture").shadowRoot.querySelector(".outline");
		const r = document.querySelector(".pay").getBoundingClientRect();
		return o.style.display === "block" && Math.abs(parseFloat(o.style.left) - r.left) < 1 && Math.abs(parseFloat(o.style.width) - r.width) < 1;
	})()`)
	b.run(page, chromedp.MouseClickXY(at.X, at.Y))
	b.waitFor(page, "the panel, its note focused", `document.querySelector("snag-capture")?.shadowRoot?.activeElement?.id === "snag-note"`)
	if title := eval[string](b, page, `document.title`); title != "Checkout" {
		b.t.Errorf("the pick clicked the page's button (title %q)", title)
	}
	// Keys, as a person types them: the note, Tab to the kind and "l" for
	// layout, Tab to the severity and "h" for high.
	b.run(page, chromedp.KeyEvent(note), chromedp.KeyEvent("\t"), chromedp.KeyEvent("l"), chromedp.KeyEvent("\t"), chromedp.KeyEvent("h"))
	send := center(b, page, panelExpr("snag-send"))
	b.run(page, chromedp.MouseClickXY(send.X, send.Y))
	b.waitFor(page, "the extension's answer", panelExpr("snag-status")+`?.textContent.startsWith("Sent") || `+panelExpr("snag-status")+`?.classList.contains("error")`)
	return eval[string](b, page, panelExpr("snag-status")+`.textContent`)
}

// TestExtensionCapture (issue 18): the extension loaded unpacked into
// real Chromium, paired through its popup with the line a real snag pair
// printed, captures an element picked with the mouse on a page served on
// 127.0.0.1. The inbox file has the URL, an anchor whose selector finds
// the element again, its text and page box, and the two errors the page
// made while it loaded; .snag/shots has the screenshot and the crop, cut
// at the button. Unpaired, the popup asks for the line and snagd refuses
// the extension; after snag pair --revoke the extension's capture is
// refused with a sentence saying so, and the popup asks to pair again.
func TestExtensionCapture(t *testing.T) {
	t.Parallel()
	b := newExtBrowser(t)
	root := filepath.Join(t.TempDir(), "shop") // as the popup names it
	snagdtest.CopySample(t, root)
	d := startDaemon(t, root, "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, checkoutPage)
	}))
	t.Cleanup(srv.Close)
	pageURL := srv.URL + "/checkout"

	popup := b.tab(extOrigin(b.id) + "/popup.html")
	b.waitFor(popup, "the pairing form", `!document.getElementById("unpaired").hidden && document.getElementById("paired").hidden`)
	// Unpaired, the extension's own request is refused.
	refused := eval[string](b, popup, fmt.Sprintf(`fetch(%q, {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"})
		.then(async r => r.status + " " + (await r.json()).error)`, d.url("/captures")))
	if refused != "401 not_paired" {
		t.Errorf("an unpaired extension's capture: %s, want 401 not_paired", refused)
	}

	out := d.mustSnag("pair")
	line, _, _ := strings.Cut(out, "\n")
	if !strings.HasPrefix(line, fmt.Sprintf("127.0.0.1:%d ", d.port)) {
		t.Fatalf("snag pair printed:\n%s", out)
	}
	b.run(popup, chromedp.SendKeys(chromedp.CSS("#line"), line))
	unpaired := b.shot(popup, "body")
	b.run(popup, chromedp.Click(chromedp.CSS("#pair")))
	b.waitFor(popup, "the paired popup", `!document.getElementById("paired").hidden`)
	b.writePopupShot(unpaired, b.shot(popup, "body"))
	stored := eval[string](b, popup, `chrome.storage.local.get(null).then(s => JSON.stringify(s))`)
	if !strings.Contains(stored, api.CaptureCredentialPrefix) || strings.Contains(stored, d.token) {
		t.Errorf("the extension keeps %s; want a capture credential and never the token", stored)
	}

	page := b.tab(pageURL)
	b.run(page, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 300)`))
	want := eval[queue.Box](b, page, `(() => { const r = document.querySelector(".pay").getBoundingClientRect();
		return {x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height}; })()`)

	status := b.capture(popup, page, pageURL, "The pay button is red, it should be green")
	key, ok := strings.CutPrefix(status, "Sent: ")
	if !ok {
		t.Fatalf("the panel says %q", status)
	}
	key, _, _ = strings.Cut(key, " ")
	tk := readTask(t, root, key)
	c := tk.Capture
	switch {
	case tk.Status != queue.StatusInbox || tk.Source != queue.SourceCapture || tk.Title != "The pay button is red, it should be green":
		t.Errorf("task %s %q source %q", tk.Status, tk.Title, tk.Source)
	case tk.Kind != queue.KindLayout || tk.Severity != queue.SeverityHigh:
		t.Errorf("kind %s, severity %s; want layout, high (typed)", tk.Kind, tk.Severity)
	case c == nil:
		t.Fatalf("no capture block in %s", key)
	case c.URL != pageURL || c.Title != "Checkout" || !strings.Contains(c.UserAgent, "Chrome"):
		t.Errorf("capture of %q %q by %q", c.URL, c.Title, c.UserAgent)
	case c.Viewport == nil || c.Viewport.Width != 1280 || c.Viewport.Scale != 1:
		t.Errorf("viewport %+v, want 1280 wide at scale 1", c.Viewport)
	case c.Anchor != "#checkout > div:nth-of-type(2) > button:nth-of-type(1)" || c.AnchorText != "Pay now":
		t.Errorf("anchor %q %q", c.Anchor, c.AnchorText)
	case c.AnchorBox == nil || math.Abs(c.AnchorBox.X-want.X) > 0.5 || math.Abs(c.AnchorBox.Y-want.Y) > 0.5 || c.AnchorBox.Width != 120 || c.AnchorBox.Height != 40:
		t.Errorf("anchor box %+v, want %+v", c.AnchorBox, want)
	case !slices.Equal(c.ConsoleErrors, []string{"cart failed to load: HTTP 500", "Uncaught Error: boom at load"}):
		t.Errorf("console errors %q", c.ConsoleErrors)
	}
	if c != nil && c.Anchor != "" {
		if same := eval[bool](b, page, fmt.Sprintf(`document.querySelector(%q) === document.querySelector(".pay")`, c.Anchor)); !same {
			t.Errorf("the selector %q does not find the pay button again", c.Anchor)
		}
	}
	if c != nil && len(c.Screenshots) == 1 && c.Crop != "" {
		page := decodePNG(t, filepath.Join(root, ".snag", c.Screenshots[0]))
		if bnd := page.Bounds(); bnd.Dx() != 1280 {
			t.Errorf("screenshot %v, want the 1280-wide window", bnd)
		}
		crop := decodePNG(t, filepath.Join(root, ".snag", c.Crop))
		if bnd := crop.Bounds(); bnd.Dx() != 120 || bnd.Dy() != 40 {
			t.Errorf("crop %v, want the 120x40 button", bnd)
		}
		// The button's red, text aside: its corners. No outline or panel
		// was in the screenshot.
		for _, p := range [][2]int{{2, 2}, {117, 37}, {2, 37}} {
			if r, g, bl, _ := crop.At(p[0], p[1]).RGBA(); r>>8 < 200 || g>>8 > 30 || bl>>8 > 30 {
				t.Errorf("crop at %v is %v, want the button's red", p, crop.At(p[0], p[1]))
			}
		}
	} else {
		t.Errorf("pictures %q %q, want a screenshot and a crop", c.Screenshots, c.Crop)
	}

	// Revoked: the next capture is refused, and the popup asks to pair.
	d.mustSnag("pair", "--revoke")
	b.run(page, chromedp.Evaluate[chromedp.Void](`document.querySelector("snag-capture")?.remove()`))
	status = b.capture(popup, page, pageURL, "Once more")
	if !strings.Contains(status, "revoked") || !strings.Contains(status, "snag pair") {
		t.Errorf("after snag pair --revoke the panel says %q; want that the credential was revoked and snag pair", status)
	}
	b.run(popup, chromedp.Reload())
	b.waitFor(popup, "the pairing form again", `!document.getElementById("unpaired").hidden`)
}

// extensionShot, given, makes TestExtensionCapture write the README's
// picture of the popup, docs/extension-popup.png:
//
//	go test ./daemon -run TestExtensionCapture -args -extension-shot
var extensionShot = flag.Bool("extension-shot", false, "write docs/extension-popup.png")

// shot takes a PNG of the element sel selects, as the window shows it
// (1280 wide, device scale 1).
func (b *extBrowser) shot(ctx context.Context, sel string) image.Image {
	b.t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	raw, err := chromedp.Run(c, chromedp.Screenshot(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("screenshot of %s: %v", sel, err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		b.t.Fatalf("screenshot of %s: %v", sel, err)
	}
	return img
}

// writePopupShot puts the popup unpaired (the line typed) and paired side
// by side, and writes them to docs/extension-popup.png when asked to.
func (b *extBrowser) writePopupShot(unpaired, paired image.Image) {
	b.t.Helper()
	for _, img := range []image.Image{unpaired, paired} {
		if w := img.Bounds().Dx(); w != 320 {
			b.t.Errorf("the popup is %d pixels wide, want 320", w)
		}
	}
	if !*extensionShot {
		return
	}
	const gap = 24
	w := gap + unpaired.Bounds().Dx() + gap + paired.Bounds().Dx() + gap
	h := gap + max(unpaired.Bounds().Dy(), paired.Bounds().Dy()) + gap
	out := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(out, out.Bounds(), image.NewUniform(color.RGBA{0xde, 0xe1, 0xe6, 0xff}), image.Point{}, draw.Src)
	at := image.Pt(gap, gap)
	for _, img := range []image.Image{unpaired, paired} {
		draw.Draw(out, img.Bounds().Sub(img.Bounds().Min).Add(at), img, img.Bounds().Min, draw.Src)
		at.X += img.Bounds().Dx() + gap
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, out); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "..", "docs", "extension-popup.png"), buf.Bytes(), 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// readTask reads the task file of the alias key.
func readTask(t *testing.T, root, key string) *queue.Task {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(root, ".snag", "tasks", key+" - *.md"))
	if len(m) != 1 {
		t.Fatalf("the task file of %s: found %q", key, m)
	}
	raw, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	tk, err := codec.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", m[0], err)
	}
	return tk
}

// decodePNG reads the PNG file at path.
func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}
