package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/snagdev/snag/internal/pixdiff"
)

// shop is a page with elements to point at: by id, by a generated id, by
// data-testid, name and aria-label, by duplicate ids, nested in a list,
// and far below the fold. changed is the same page after small changes: a
// banner above everything and another in #main, and another list item at
// the end.
func shop(changed bool) string {
	banner, extra, top := "", "", ""
	if changed {
		banner = `<p class="banner">Sale ends today</p>`
		extra = `<li>Four</li>`
		top = `<div class="banner">Free shipping</div>`
	}
	return `<!doctype html><title>shop</title>
<style>body{margin:0;font:16px/1.4 sans-serif} .card{margin:8px;padding:8px;width:300px;border:1px solid #999}</style>
` + top + `<div id="main">` + banner + `
 <ul><li>One</li><li>Two <b>two</b></li><li>Three</li>` + extra + `</ul>
 <button id="pay">Pay now</button>
 <button id="ember123">Generated</button>
 <div class="card" data-testid="total-card">Total: 42 €</div>
 <label>Email <input name="email"></label>
 <div id="dup">A</div><div id="dup">Duplicate id</div>
 <a aria-label="Close dialog" href="#x">×</a>
 <span style="display:none">Pay now</span><span style="visibility:hidden">Secret offer</span>
</div>
<div style="height:2000px"></div>
<p>Far below</p>`
}

// widget is a page with one element to crop; css is its extra style.
// renamed gives the element another id, as a refactor might.
func widget(css string, renamed bool) string {
	id := "w"
	if renamed {
		id = "checkout-widget"
	}
	return `<!doctype html><title>widget</title>
<style>body{margin:0;font:16px/1.4 sans-serif} .widget{margin:40px 30px;padding:12px;width:240px;border:2px solid #246;border-radius:6px} ` + css + `</style>
<p>Your order</p><div id="` + id + `" class="widget">Checkout total <b>42 €</b></div><p>Thank you</p>`
}

// captureSite serves the pages of the capture tests on 127.0.0.1. state
// picks what /shop and /widget show: 0 the first version, 1 the changed
// one, 2 the widget with another id.
func captureSite(t *testing.T, state *atomic.Int32) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	mux := http.NewServeMux()
	page := func(path string, body func() string) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, body())
		})
	}
	page("/shop", func() string { return shop(state.Load() == 1) })
	page("/widget", func() string {
		switch state.Load() {
		case 1:
			return widget(".widget{background:#f6c38e}", false)
		case 2:
			return widget("", true)
		}
		return widget("", false)
	})
	// requests fetches a missing path, a failing one and a port nothing
	// listens on, after its load event.
	closed := httptest.NewServer(http.NotFoundHandler())
	refused := closed.URL + "/api/cart"
	closed.Close()
	page("/requests", func() string {
		return `<!doctype html><title>requests</title><script>
addEventListener("load", () => {
  for (const u of ["/api/missing", "/api/boom", ` + "`" + refused + "`" + `]) fetch(u).catch(() => {});
});</script>`
	})
	mux.HandleFunc("/api/missing", http.NotFound)
	mux.HandleFunc("/api/boom", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	// pending keeps a request in flight for ever after its load event;
	// #ready is there from the start.
	page("/pending", func() string {
		return `<!doctype html><title>pending</title><p id="ready">ready</p>
<script>addEventListener("load", () => fetch("/api/poll").catch(() => {}))</script>`
	})
	mux.HandleFunc("/api/poll", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	// late shows #late 300ms after its load event, with no request.
	page("/late", func() string {
		return `<!doctype html><title>late</title><p>loading…</p>
<script>addEventListener("load", () => setTimeout(() => document.body.insertAdjacentHTML("beforeend", '<p id="late">Loaded late</p>'), 300))</script>`
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv
}

// capture runs Capture in an isolated TMPDIR and checks that it left
// nothing behind.
func capture(t *testing.T, r CaptureRequest) (Captured, error) {
	t.Helper()
	tmp := isolate(t)
	if r.AllowedHosts == nil {
		r.AllowedHosts = local
	}
	c, err := Capture(t.Context(), r)
	leftBehind(t, tmp)
	return c, err
}

// decode decodes a PNG with pixdiff, as the verifier will.
func decode(t *testing.T, name string, png []byte) image.Image {
	t.Helper()
	img, err := pixdiff.DecodePNG(bytes.NewReader(png), 0)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return img
}

// checkCropSize checks that crop is the box's size times scale, give or
// take a pixel.
func checkCropSize(t *testing.T, crop []byte, b Box, scale float64) {
	t.Helper()
	size := decode(t, "crop", crop).Bounds().Size()
	wantW, wantH := b.Width*scale, b.Height*scale
	if math.Abs(float64(size.X)-wantW) > 1 || math.Abs(float64(size.Y)-wantH) > 1 {
		t.Errorf("crop is %dx%d, want the box %gx%g times %g = %gx%g (±1)", size.X, size.Y, b.Width, b.Height, scale, wantW, wantH)
	}
}

func TestCaptureConsoleErrors(t *testing.T) {
	needChromium(t)
	srv := site(t)
	c, err := capture(t, CaptureRequest{URL: srv.URL + "/broken"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"cart: load failed",
		"Uncaught TypeError: Cannot read properties of undefined (reading 'total')",
	}
	if diff := cmp.Diff(want, c.Errors); diff != "" {
		t.Errorf("Errors (-want +got):\n%s", diff)
	}
	if c.URL != srv.URL+"/broken" || c.Title != "checkout" {
		t.Errorf("URL, Title = %q, %q; want %q, %q", c.URL, c.Title, srv.URL+"/broken", "checkout")
	}
	if !strings.Contains(c.UserAgent, "Chrome/") {
		t.Errorf("UserAgent = %q, want Chromium's", c.UserAgent)
	}
	if c.Viewport != (Viewport{1280, 800, 1}) {
		t.Errorf("Viewport = %v, want the default 1280x800@1", c.Viewport)
	}
	if size := decode(t, "screenshot", c.Screenshot).Bounds().Size(); size != image.Pt(1280, 800) {
		t.Errorf("screenshot is %v, want 1280x800", size)
	}
	if c.Anchor != nil || c.Crop != nil {
		t.Errorf("Anchor, Crop = %+v, %d bytes; want none without an anchor", c.Anchor, len(c.Crop))
	}
	if len(c.FailedRequests) != 0 {
		t.Errorf("FailedRequests = %+v, want none", c.FailedRequests)
	}
}

func TestCaptureFailedRequests(t *testing.T) {
	needChromium(t)
	var state atomic.Int32
	srv := captureSite(t, &state)
	c, err := capture(t, CaptureRequest{URL: srv.URL + "/requests"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []FailedRequest{
		{Method: "GET", URL: srv.URL + "/api/missing", Status: 404},
		{Method: "GET", URL: srv.URL + "/api/boom", Status: 500},
	} {
		if !containsFailed(c.FailedRequests, want) {
			t.Errorf("FailedRequests %+v lack %+v", c.FailedRequests, want)
		}
	}
	var refused *FailedRequest
	for i, f := range c.FailedRequests {
		if strings.HasSuffix(f.URL, "/api/cart") {
			refused = &c.FailedRequests[i]
		}
	}
	if refused == nil || refused.Status != 0 || refused.Error != "net::ERR_CONNECTION_REFUSED" || refused.Method != "GET" {
		t.Errorf("the request to a closed port: %+v, want GET with no status and net::ERR_CONNECTION_REFUSED (all: %+v)", refused, c.FailedRequests)
	}
	if len(c.FailedRequests) != 3 {
		t.Errorf("FailedRequests = %+v, want the three", c.FailedRequests)
	}
}

// containsFailed reports whether fs has f.
func containsFailed(fs []FailedRequest, f FailedRequest) bool {
	for _, g := range fs {
		if g == f {
			return true
		}
	}
	return false
}

func TestCaptureServerError(t *testing.T) {
	needChromium(t)
	srv := site(t)
	c, err := capture(t, CaptureRequest{URL: srv.URL + "/error"})
	if err != nil {
		t.Fatalf("a page that answers 500 is captured: %v", err)
	}
	want := []FailedRequest{{Method: "GET", URL: srv.URL + "/error", Status: 500}}
	if diff := cmp.Diff(want, c.FailedRequests); diff != "" {
		t.Errorf("FailedRequests (-want +got):\n%s", diff)
	}
}

func TestCaptureAnchor(t *testing.T) {
	needChromium(t)
	var state atomic.Int32
	srv := captureSite(t, &state)
	vp := Viewport{Width: 800, Height: 600}
	var found []*Anchor // of the cases found by text, to find again
	for _, tc := range []struct {
		name     string
		selector string
		text     string
		want     string // the selector returned
		wantText string
		scrolled bool // the anchor is below the fold
	}{
		{name: "selector", selector: "#pay", want: "#pay", wantText: "Pay now"},
		{name: "selector kept as given", selector: "#main > ul li:nth-child(3)", want: "#main > ul li:nth-child(3)", wantText: "Three"},
		{name: "selector first, text second", selector: "#pay", text: "Three", want: "#pay", wantText: "Pay now"},
		{name: "text: unique id", text: "Pay now", want: "#pay", wantText: "Pay now"},
		{name: "text: a selector that matches nothing falls back", selector: "#gone", text: "Pay now", want: "#pay", wantText: "Pay now"},
		{name: "text: generated id", text: "Generated", want: "#main > button:nth-of-type(2)", wantText: "Generated"},
		{name: "text: data-testid", text: "Total: 42 €", want: `[data-testid="total-card"]`, wantText: "Total: 42 €"},
		{name: "text: contained", text: "42", want: `[data-testid="total-card"]`, wantText: "Total: 42 €"},
		{name: "text: aria-label", text: "×", want: `[aria-label="Close dialog"]`, wantText: "×"},
		{name: "text: nested, white space collapsed", text: "  Two\n two ", want: "#main > ul > li:nth-of-type(2)", wantText: "Two two"},
		{name: "text: duplicate ids", text: "Duplicate id", want: "#main > div:nth-of-type(3)", wantText: "Duplicate id"},
		{name: "text: below the fold", text: "Far below", want: "body > p", wantText: "Far below", scrolled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := capture(t, CaptureRequest{URL: srv.URL + "/shop", AnchorSelector: tc.selector, AnchorText: tc.text, Viewport: vp})
			if err != nil {
				t.Fatal(err)
			}
			a := c.Anchor
			if a == nil {
				t.Fatal("no anchor")
			}
			if a.Selector != tc.want || a.Text != tc.wantText {
				t.Errorf("anchor %q, %q; want %q, %q", a.Selector, a.Text, tc.want, tc.wantText)
			}
			if a.Box.Width <= 0 || a.Box.Height <= 0 {
				t.Errorf("box %+v is empty", a.Box)
			}
			if tc.scrolled != (c.ScrollY > 0) {
				t.Errorf("ScrollY = %g, want it above 0: %v", c.ScrollY, tc.scrolled)
			}
			// The anchor is in the viewport the screenshot shows.
			if top := a.Box.Y - c.ScrollY; top < 0 || top+a.Box.Height > 600 {
				t.Errorf("the anchor is at %g in the viewport, outside 0..600", top)
			}
			checkCropSize(t, c.Crop, a.Box, 1)
			if size := decode(t, "screenshot", c.Screenshot).Bounds().Size(); size != image.Pt(800, 600) {
				t.Errorf("screenshot is %v, want 800x600", size)
			}
			if strings.HasPrefix(tc.name, "text") {
				found = append(found, a)
			}
		})
	}

	// Each selector built for an element found by its text finds the same
	// element with the page's own document.querySelector: on the same
	// page, in the same place with the same text; on the page after small
	// changes, with the same text.
	var sels []string
	for _, a := range found {
		sels = append(sels, a.Selector)
	}
	for _, changed := range []bool{false, true} {
		t.Run(fmt.Sprintf("found again, page changed: %v", changed), func(t *testing.T) {
			state.Store(0)
			if changed {
				state.Store(1)
			}
			again := querySelectors(t, srv.URL+"/shop", vp, sels)
			for i, a := range found {
				switch {
				case again[i] == nil:
					t.Errorf("%q finds nothing", a.Selector)
				case changed && again[i].Text != a.Text:
					t.Errorf("%q finds %q on the changed page, want %q", a.Selector, again[i].Text, a.Text)
				case !changed:
					if diff := cmp.Diff(a, again[i]); diff != "" {
						t.Errorf("%q finds another element (-captured +found):\n%s", a.Selector, diff)
					}
				}
			}
		})
	}
}

// querySelectors opens url in a fresh browser at viewport vp, as Capture
// does, and returns for each selector the element the page's own
// document.querySelector finds with it: its text, white space collapsed,
// and its box in page coordinates; nil when it finds none.
func querySelectors(t *testing.T, url string, vp Viewport, sels []string) []*Anchor {
	t.Helper()
	tmp := isolate(t)
	var out []*Anchor
	err := launch(t.Context(), "", url, local, func(exe, dir, tmp string) error {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		tb, err := open(t.Context(), ctx, captureJob, exe, dir, tmp, url, 30*time.Second, local, newRecorder(nil))
		if err != nil {
			return err
		}
		defer tb.stop()
		if err := tb.emulate(vp); err != nil {
			return err
		}
		if _, err := chromedp.Run(tb.ctx, chromedp.NavigateResponse(url)); err != nil {
			return err
		}
		for _, sel := range sels {
			expr, err := call(`function (s) {
				const e = document.querySelector(s);
				if (!e) return null;
				const r = e.getBoundingClientRect();
				return {selector: s, text: e.innerText.replace(/\s+/g, " ").trim(),
					box: {x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height}};
			}`, sel)
			if err != nil {
				return err
			}
			a, err := chromedp.Run(tb.ctx, chromedp.Evaluate[*Anchor](expr))
			if err != nil {
				return fmt.Errorf("%q: %w", sel, err)
			}
			out = append(out, a)
		}
		return nil
	})
	leftBehind(t, tmp)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCaptureNoAnchor(t *testing.T) {
	needChromium(t)
	var state atomic.Int32
	srv := captureSite(t, &state)
	for _, tc := range []struct {
		name     string
		selector string
		text     string
		sentinel error
		says     []string
	}{
		{name: "selector", selector: "#checkout-total", sentinel: ErrNoAnchor, says: []string{`"#checkout-total"`, "--anchor-text"}},
		{name: "text", text: "Pay later", sentinel: ErrNoAnchor, says: []string{`"Pay later"`}},
		{name: "hidden text", text: "Secret offer", sentinel: ErrNoAnchor, says: []string{`"Secret offer"`}},
		{name: "not a selector", selector: "#[", says: []string{`--anchor "#["`, "not a CSS selector", "document.querySelector"}},
		{name: "wait-for not a selector", text: "Pay now", says: []string{`--wait-for "a["`, "not a CSS selector"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := CaptureRequest{URL: srv.URL + "/shop", AnchorSelector: tc.selector, AnchorText: tc.text}
			if strings.HasPrefix(tc.name, "wait-for") {
				r.WaitFor = "a["
			}
			_, err := capture(t, r)
			if err == nil {
				t.Fatal("Capture succeeded")
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("Capture = %v, want an error wrapping %v", err, tc.sentinel)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

func TestCaptureNotSettled(t *testing.T) {
	needChromium(t)
	var state atomic.Int32
	srv := captureSite(t, &state)
	old := site(t)
	for _, tc := range []struct {
		name string
		url  string
		says []string
	}{
		{name: "a request in flight for ever", url: srv.URL + "/pending", says: []string{"1 request was still in flight: GET " + srv.URL + "/api/poll"}},
		{name: "an image that never completes", url: old.URL + "/hang", says: []string{"its load event never fired", "/never.png"}},
		{name: "a document that never answers", url: old.URL + "/stuck", says: []string{"its load event never fired"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The timeout covers Chromium's start too, which on a loaded
			// machine takes seconds: long enough that the page itself
			// loads, short enough for a test.
			_, err := capture(t, CaptureRequest{URL: tc.url, Timeout: 12 * time.Second})
			if !errors.Is(err, ErrNotSettled) {
				t.Fatalf("Capture = %v, want an error wrapping ErrNotSettled", err)
			}
			for _, s := range append(tc.says, "within the 12s timeout", "--wait-for SELECTOR", "longer --timeout") {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
	t.Run("a selector to wait for", func(t *testing.T) {
		_, err := capture(t, CaptureRequest{URL: srv.URL + "/pending", WaitFor: "#nothing", Timeout: 12 * time.Second})
		if !errors.Is(err, ErrNotSettled) || !strings.Contains(err.Error(), `no element matched "#nothing"`) {
			t.Errorf("Capture = %v, want ErrNotSettled saying nothing matched", err)
		}
	})
	t.Run("--wait-for settles a page that keeps a request open", func(t *testing.T) {
		c, err := capture(t, CaptureRequest{URL: srv.URL + "/pending", WaitFor: "#ready", AnchorSelector: "#ready", Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if c.Anchor == nil || c.Anchor.Text != "ready" {
			t.Errorf("anchor %+v, want #ready", c.Anchor)
		}
	})
}

func TestCaptureWaitFor(t *testing.T) {
	needChromium(t)
	var state atomic.Int32
	srv := captureSite(t, &state)
	// The page has no request after its load, so with a quiet period of
	// 100ms it settles before #late shows, unless it waits for it.
	r := CaptureRequest{URL: srv.URL + "/late", AnchorSelector: "#late", Settle: 100 * time.Millisecond}
	if _, err := capture(t, r); !errors.Is(err, ErrNoAnchor) {
		t.Fatalf("without --wait-for: Capture = %v, want ErrNoAnchor (#late is not there yet)", err)
	}
	r.WaitFor = "#late"
	c, err := capture(t, r)
	if err != nil {
		t.Fatal(err)
	}
	if c.Anchor == nil || c.Anchor.Text != "Loaded late" {
		t.Errorf("anchor %+v, want #late", c.Anchor)
	}
}

func TestCaptureRefusesHost(t *testing.T) {
	away, hits := counter(t)
	elsewhere := strings.Replace(away.URL, "127.0.0.1", "localhost", 1) + "/checkout"

	// A fake browser leaves a mark if it is started.
	dir := t.TempDir()
	mark := filepath.Join(dir, "started")
	fake := filepath.Join(dir, "chromium")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\ntouch "+mark+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{elsewhere, "file:///etc/passwd", "javascript:alert(1)"} {
		t.Run(raw, func(t *testing.T) {
			_, err := Capture(t.Context(), CaptureRequest{Chromium: fake, URL: raw, AllowedHosts: local})
			if !errors.Is(err, ErrRefused) {
				t.Errorf("Capture = %v, want an error wrapping ErrRefused", err)
			}
			if _, err := os.Stat(mark); err == nil {
				t.Fatal("the browser was started for a refused URL")
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the host that is not allowed got %d requests", n)
	}
	// With the real browser too, nothing reaches the host.
	needChromium(t)
	_, err := capture(t, CaptureRequest{URL: elsewhere})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `"localhost"`) {
		t.Errorf("Capture = %v, want ErrRefused naming localhost", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the host that is not allowed got %d requests", n)
	}
}

func TestCaptureRefusesRedirectOffHost(t *testing.T) {
	needChromium(t)
	away, hits := counter(t)
	elsewhere := strings.Replace(away.URL, "127.0.0.1", "localhost", 1) + "/landing"
	mux := http.NewServeMux()
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere, http.StatusFound)
	})
	mux.HandleFunc("/script", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><script>addEventListener("load", () => setTimeout(() => { location.href = %q }, 50))</script>`, elsewhere)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, path := range []string{"/redirect", "/script"} {
		t.Run(path, func(t *testing.T) {
			_, err := capture(t, CaptureRequest{URL: srv.URL + path})
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("Capture = %v, want an error wrapping ErrRefused", err)
			}
			for _, s := range []string{elsewhere, `host "localhost" is not allowed`, "browser.allowed_hosts in .snag/config.json"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if n := hits.Load(); n != 0 {
				t.Errorf("the host that is not allowed got %d requests", n)
			}
		})
	}
}

func TestCaptureCanceled(t *testing.T) {
	needChromium(t)
	srv, asked := siteStuck(t)
	tmp := isolate(t)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		// Cancel once the browser is up and waiting for the page.
		select {
		case <-asked:
		case <-ctx.Done():
		}
		cancel()
	}()
	_, err := Capture(ctx, CaptureRequest{URL: srv.URL + "/stuck", AllowedHosts: local, Timeout: time.Minute})
	select {
	case <-asked:
	default:
		t.Error("the browser never asked for /stuck: the cancel did not come while it waited for the page")
	}
	leftBehind(t, tmp)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Capture = %v, want an error wrapping context.Canceled", err)
	}
}

func TestCaptureViewportBounds(t *testing.T) {
	for _, vp := range []Viewport{{Width: -1}, {Scale: 5}, {Scale: -1}, {Width: 5000, Scale: 2}} {
		_, err := Capture(t.Context(), CaptureRequest{Chromium: "/nonexistent/chromium", URL: "http://127.0.0.1/", AllowedHosts: local, Viewport: vp})
		if err == nil || !strings.Contains(err.Error(), "viewport") || errors.Is(err, ErrUnavailable) {
			t.Errorf("Viewport %+v: Capture = %v, want a viewport error before looking for the browser", vp, err)
		}
	}
}

// TestCropAgain checks the pixel verify's two halves: the crop Capture
// takes and the one Run takes again at the same viewport compare
// identical, at scale 1 and 2, until the element's CSS changes.
func TestCropAgain(t *testing.T) {
	needChromium(t)
	var state atomic.Int32
	srv := captureSite(t, &state)
	for _, scale := range []float64{1, 2} {
		t.Run(fmt.Sprintf("scale %g", scale), func(t *testing.T) {
			state.Store(0)
			vp := Viewport{Width: 640, Height: 480, Scale: scale}
			c, err := capture(t, CaptureRequest{URL: srv.URL + "/widget", AnchorSelector: "#w", Viewport: vp})
			if err != nil {
				t.Fatal(err)
			}
			checkCropSize(t, c.Crop, c.Anchor.Box, scale)
			if size := decode(t, "screenshot", c.Screenshot).Bounds().Size(); size != image.Pt(int(640*scale), int(480*scale)) {
				t.Errorf("screenshot is %v, want 640x480 times %g", size, scale)
			}
			before := decode(t, "capture's crop", c.Crop)

			check := Check{URL: srv.URL + "/widget", Anchor: c.Anchor.Selector, AnchorText: c.Anchor.Text, AllowedHosts: local, Viewport: vp}
			again := func(t *testing.T, want string) (Result, image.Image) {
				t.Helper()
				tmp := isolate(t)
				check.Crop = filepath.Join(t.TempDir(), "after.png")
				r, err := Run(t.Context(), check)
				leftBehind(t, tmp)
				if err != nil {
					t.Fatal(err)
				}
				if !r.Cropped || !r.AnchorFound {
					t.Fatalf("Cropped, AnchorFound = %v, %v; want both (reason: %s)", r.Cropped, r.AnchorFound, r.Reason)
				}
				if !strings.Contains(r.Reason, want) {
					t.Errorf("reason %q does not say %q", r.Reason, want)
				}
				png, err := os.ReadFile(check.Crop)
				if err != nil {
					t.Fatal(err)
				}
				return r, decode(t, "run's crop", png)
			}

			r, after := again(t, "")
			if r.Box != c.Anchor.Box {
				t.Errorf("Run's box %+v, Capture's %+v", r.Box, c.Anchor.Box)
			}
			if res := compare(t, before, after); !res.Identical() {
				t.Errorf("the crop taken again differs: %d pixels changed (%.4f%%)", res.Changed, 100*res.ChangedFraction)
			}

			// Another id: the selector matches nothing, the text finds it.
			state.Store(2)
			r, after = again(t, `The captured anchor "#w" matched nothing; the element was found by its text "Checkout total 42 €".`)
			if !r.AnchorByText {
				t.Errorf("AnchorByText = false for an element found by its text")
			}
			if res := compare(t, before, after); !res.Identical() {
				t.Errorf("the crop of the element found by its text differs: %d pixels changed", res.Changed)
			}

			// The CSS changes: the crop does too.
			state.Store(1)
			_, after = again(t, "")
			if res := compare(t, before, after); res.Identical() {
				t.Errorf("the crop after a CSS change compares identical")
			}
		})
	}
}

// compare compares two crops with pixdiff's defaults.
func compare(t *testing.T, before, after image.Image) pixdiff.Result {
	t.Helper()
	res, err := pixdiff.Compare(before, after, pixdiff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRunCropAnchorGone(t *testing.T) {
	needChromium(t)
	var state atomic.Int32
	srv := captureSite(t, &state)
	tmp := isolate(t)
	crop := filepath.Join(t.TempDir(), "after.png")
	r, err := Run(t.Context(), Check{URL: srv.URL + "/widget", Anchor: "#gone", AnchorText: "Pay later", AllowedHosts: local, CapturedErrors: []string{capturedLog}, Crop: crop})
	leftBehind(t, tmp)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != Pass || r.AnchorFound || r.Cropped {
		t.Errorf("Outcome, AnchorFound, Cropped = %s, %v, %v; want pass, no anchor, no crop", r.Outcome, r.AnchorFound, r.Cropped)
	}
	if want := `The captured anchor "#gone" is gone from the page, and no element shows its text "Pay later".`; !strings.Contains(r.Reason, want) {
		t.Errorf("reason %q does not say %q", r.Reason, want)
	}
	if _, err := os.Stat(crop); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a crop was written for an anchor that is gone: %v", err)
	}
}

// BenchmarkCapture measures one capture of a local page with an anchor
// found by its text, from Capture's call to its return, and reports when
// each phase ended, in milliseconds from the start (started: the browser
// answers; loaded: the load event; settled: the quiet period over; shot:
// the screenshot; cropped: the crop).
func BenchmarkCapture(b *testing.B) {
	if _, err := Find(""); err != nil {
		if os.Getenv("CI") != "" {
			b.Fatalf("CI needs chromium for the browser verifier (.ci/run installs it): %v", err)
		}
		b.Skipf("no chromium: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, widget("", false))
	}))
	defer srv.Close()

	phases := []string{"started", "loaded", "settled", "shot", "cropped"}
	sums := make(map[string]time.Duration)
	var start time.Time
	trace = func(p string) { sums[p] += time.Since(start) }
	defer func() { trace = func(string) {} }()

	for b.Loop() {
		start = time.Now()
		c, err := Capture(b.Context(), CaptureRequest{URL: srv.URL, AnchorText: "Checkout total", AllowedHosts: local})
		if err != nil || c.Anchor == nil {
			b.Fatalf("Capture = %+v, %v", c.Anchor, err)
		}
	}
	for _, p := range phases {
		b.ReportMetric(float64(sums[p].Milliseconds())/float64(b.N), p+"-ms/op")
	}
}
