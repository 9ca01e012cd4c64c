package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// needChromium returns the browser to test with. Without one the test is
// skipped, unless CI is set: there a missing install is a failure.
func needChromium(t *testing.T) string {
	t.Helper()
	exe, err := Find("")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI needs chromium for the browser verifier tests (.ci/run installs it): %v", err)
		}
		t.Skipf("no chromium: %v", err)
	}
	return exe
}

// isolate points TMPDIR at a fresh folder, so the test can see that Run
// leaves no process and no profile behind in it. The folder has a short
// path, as /tmp has, so Chromium's own temporary files go in the profile.
func isolate(t *testing.T) string {
	t.Helper()
	tmp, err := os.MkdirTemp("/tmp", "sb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	t.Setenv("TMPDIR", tmp)
	return tmp
}

// leftBehind fails the test if a process whose command line names tmp is
// still running, or a profile folder is still in tmp.
func leftBehind(t *testing.T, tmp string) {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(tmp)) {
			continue
		}
		if state, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); bytes.Contains(state, []byte(") Z ")) {
			t.Errorf("process %s is a zombie left by the browser: %q", e.Name(), bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
			continue
		}
		t.Errorf("process %s outlived Run: %q", e.Name(), bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
	}
	profiles, _ := filepath.Glob(filepath.Join(tmp, "snag-chromium-*"))
	if len(profiles) > 0 {
		t.Errorf("profiles left behind: %v", profiles)
	}
}

// site serves the pages of the tests on 127.0.0.1.
func site(t *testing.T) *httptest.Server {
	t.Helper()
	srv, _ := siteStuck(t)
	return srv
}

// siteStuck is site, and a channel closed once a browser has asked for
// /stuck: it is then waiting for a page that never answers.
func siteStuck(t *testing.T) (*httptest.Server, <-chan struct{}) {
	t.Helper()
	release, asked := make(chan struct{}), make(chan struct{})
	var once sync.Once
	mux := http.NewServeMux()
	page := func(path, body string) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, body)
		})
	}
	// broken logs one console error and throws an uncaught TypeError from
	// checkout.js, as the captured checkout page did.
	page("/broken", `<!doctype html><title>checkout</title>
<div id="cart">cart</div><button id="pay">Pay</button>
<script>console.error("cart: %s failed", "load")</script>
<script src="/checkout.js"></script>`)
	mux.HandleFunc("/checkout.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, "const cart = undefined;\nconsole.log('total', cart.total);\n")
	})
	// fixed is the same page after the fix: a warning and a log, no error.
	page("/fixed", `<!doctype html><title>checkout</title>
<div id="cart">cart</div><button id="pay">Pay</button>
<script>console.warn("cart: slow"); console.log("cart: loaded")</script>`)
	// late logs the error after the load event, within the settle time.
	page("/late", `<!doctype html><title>late</title>
<script>addEventListener("load", () => setTimeout(() => console.error("cart: load failed"), 50))</script>`)
	// hang never finishes loading: its image never completes.
	page("/hang", `<!doctype html><title>hang</title><p>waiting</p><img src="/never.png">`)
	mux.HandleFunc("/never.png", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	mux.HandleFunc("/stuck", func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(asked) })
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	mux.HandleFunc("/error", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "internal error", http.StatusInternalServerError)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv, asked
}

// counter is a server on another allowed-looking host (localhost) that
// counts its requests: the verifier must never reach it.
func counter(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "<title>elsewhere</title>")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// local is the allowed list of the tests: 127.0.0.1 only, so localhost is
// another host.
var local = []string{"127.0.0.1"}

const (
	capturedLog   = "cart: load failed (checkout.ts:12)"
	capturedThrow = "TypeError: Cannot read properties of undefined (reading 'total') (checkout.js:2)"
)

func TestRun(t *testing.T) {
	needChromium(t)
	srv := site(t)
	for _, tc := range []struct {
		name     string
		path     string
		captured []string
		anchor   string
		timeout  time.Duration
		outcome  string
		reason   []string // each must be in the reason
		anchorOK bool
		shot     bool // a screenshot must be written
	}{
		{
			name: "console error seen again", path: "/broken", captured: []string{capturedLog},
			outcome: Fail, reason: []string{`"cart: load failed (checkout.ts:12)" appeared again`}, shot: true,
		},
		{
			name: "uncaught exception seen again", path: "/broken", captured: []string{"TypeError: earlier bug", capturedThrow},
			outcome: Fail, reason: []string{`reading 'total'`, "appeared again"}, shot: true,
		},
		{
			name: "error after load within the settle time", path: "/late", captured: []string{capturedLog},
			outcome: Fail, reason: []string{"appeared again"},
		},
		{
			name: "fixed", path: "/fixed", captured: []string{capturedLog, capturedThrow}, anchor: "#pay",
			outcome: Pass, reason: []string{"None of the captured console errors appeared"}, anchorOK: true, shot: true,
		},
		{
			name: "anchor gone", path: "/fixed", captured: []string{capturedLog}, anchor: "#checkout-total",
			outcome: Pass, reason: []string{`The captured anchor "#checkout-total" is gone from the page.`},
		},
		{
			name: "anchor not a selector", path: "/fixed", captured: []string{capturedLog}, anchor: "#[",
			outcome: Pass, reason: []string{`The captured anchor "#[" could not be looked up`},
		},
		{
			name: "nothing to compare", path: "/broken", anchor: "#pay",
			outcome: Inconclusive, reason: []string{"no console error to compare", "2 console error(s) appeared"}, anchorOK: true, shot: true,
		},
		{
			name: "image never completes", path: "/hang", captured: []string{capturedLog}, timeout: 10 * time.Second,
			outcome: Fail, reason: []string{"did not finish loading within the 10s timeout"}, shot: true,
		},
		{
			name: "document never answers", path: "/stuck", captured: []string{capturedLog}, timeout: 10 * time.Second,
			outcome: Fail, reason: []string{"did not finish loading within the 10s timeout", srv.Listener.Addr().String()},
		},
		{
			name: "server error", path: "/error", captured: []string{capturedLog},
			outcome: Fail, reason: []string{"HTTP 500"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := isolate(t)
			shot := filepath.Join(t.TempDir(), "shots", "SNAG-1.png")
			r, err := Run(t.Context(), Check{
				URL:            srv.URL + tc.path,
				Anchor:         tc.anchor,
				CapturedErrors: tc.captured,
				AllowedHosts:   local,
				Shot:           shot,
				Timeout:        tc.timeout,
			})
			leftBehind(t, tmp)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if r.Outcome != tc.outcome {
				t.Errorf("outcome = %q, want %q (reason: %s)", r.Outcome, tc.outcome, r.Reason)
			}
			for _, want := range tc.reason {
				if !strings.Contains(r.Reason, want) {
					t.Errorf("reason %q does not say %q", r.Reason, want)
				}
			}
			if len(r.Reason) > maxReason {
				t.Errorf("reason is %d bytes, more than %d", len(r.Reason), maxReason)
			}
			if r.AnchorFound != tc.anchorOK {
				t.Errorf("AnchorFound = %v, want %v", r.AnchorFound, tc.anchorOK)
			}
			if tc.shot {
				png, err := os.ReadFile(shot)
				if err != nil || r.Shot != shot {
					t.Fatalf("screenshot: Result.Shot = %q, read: %v", r.Shot, err)
				}
				if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 100 {
					t.Errorf("screenshot is not a PNG: %d bytes starting %q", len(png), png[:min(len(png), 8)])
				}
			}
		})
	}
}

// TestRunLongTMPDIR checks a TMPDIR too long for Chromium's socket: its
// temporary files then go to a folder of their own in /tmp, removed after.
func TestRunLongTMPDIR(t *testing.T) {
	needChromium(t)
	srv := site(t)
	tmp := filepath.Join(t.TempDir(), strings.Repeat("d", 60))
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	before, _ := filepath.Glob("/tmp/snag-chromium-*")
	r, err := Run(t.Context(), Check{URL: srv.URL + "/fixed", AllowedHosts: local, CapturedErrors: []string{capturedLog}})
	leftBehind(t, tmp)
	if err != nil || r.Outcome != Pass {
		t.Fatalf("Run = %+v, %v; want a pass", r, err)
	}
	after, _ := filepath.Glob("/tmp/snag-chromium-*")
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("folders in /tmp (-before +after):\n%s", diff)
	}
}

func TestRunErrors(t *testing.T) {
	needChromium(t)
	srv := site(t)
	tmp := isolate(t)
	r, err := Run(t.Context(), Check{URL: srv.URL + "/broken", AllowedHosts: local, CapturedErrors: []string{capturedLog}})
	leftBehind(t, tmp)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"cart: load failed",
		"Uncaught TypeError: Cannot read properties of undefined (reading 'total')",
	}
	if diff := cmp.Diff(want, r.Errors); diff != "" {
		t.Errorf("Errors (-want +got):\n%s", diff)
	}
}

// TestRunRefusesNavigationOffHost checks that a redirect, or a script, that
// takes the page to a host that is not allowed is not followed.
func TestRunRefusesNavigationOffHost(t *testing.T) {
	needChromium(t)
	away, hits := counter(t)
	elsewhere := strings.Replace(away.URL, "127.0.0.1", "localhost", 1) + "/landing"
	mux := http.NewServeMux()
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere, http.StatusFound)
	})
	mux.HandleFunc("/script", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><script>addEventListener("load", () => { location.href = %q })</script>`, elsewhere)
	})
	mux.HandleFunc("/popup", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><script>window.open(%q); addEventListener("load", () => window.open(%q))</script>`, elsewhere, elsewhere)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, path := range []string{"/redirect", "/script", "/popup"} {
		t.Run(path, func(t *testing.T) {
			tmp := isolate(t)
			r, err := Run(t.Context(), Check{URL: srv.URL + path, AllowedHosts: local, CapturedErrors: []string{capturedLog}})
			leftBehind(t, tmp)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			// Chromium blocks a pop-up without a user gesture, so the page
			// stays and passes; the others are refused by the verifier.
			if path != "/popup" && (r.Outcome != Fail || !strings.Contains(r.Reason, elsewhere) || !strings.Contains(r.Reason, "browser.allowed_hosts in .snag/config.json")) {
				t.Errorf("got %s: %s; want fail naming %s and the fix", r.Outcome, r.Reason, elsewhere)
			}
			if n := hits.Load(); n != 0 {
				t.Errorf("the host that is not allowed got %d requests", n)
			}
		})
	}
}

func TestRunLoadFails(t *testing.T) {
	needChromium(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close() // nothing listens there now
	tmp := isolate(t)
	r, err := Run(t.Context(), Check{URL: addr + "/checkout", AllowedHosts: local, CapturedErrors: []string{capturedLog}, Shot: filepath.Join(t.TempDir(), "s.png")})
	leftBehind(t, tmp)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != Fail || !strings.Contains(r.Reason, "ERR_CONNECTION_REFUSED") || !strings.Contains(r.Reason, "start the server") {
		t.Errorf("got %s: %s; want fail saying the connection was refused", r.Outcome, r.Reason)
	}
	if r.Shot != "" {
		t.Errorf("Shot = %q for a page that never loaded", r.Shot)
	}
}

// TestRunCanceled checks that a canceled context ends the check with its
// error and leaves nothing running.
func TestRunCanceled(t *testing.T) {
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
	_, err := Run(ctx, Check{URL: srv.URL + "/stuck", AllowedHosts: local, CapturedErrors: []string{capturedLog}, Timeout: time.Minute})
	select {
	case <-asked:
	default:
		t.Error("the browser never asked for /stuck: the cancel did not come while it waited for the page")
	}
	leftBehind(t, tmp)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want an error wrapping context.Canceled", err)
	}
}

// TestRunRefusesBeforeStarting uses a fake browser that leaves a mark when
// it starts: a refused URL must not start it.
func TestRunRefusesBeforeStarting(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, "started")
	fake := filepath.Join(dir, "chromium")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\ntouch "+mark+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{
		"http://example.com/checkout",
		"http://localhost@example.com/",
		"file:///etc/passwd",
		"data:text/html,<script>console.error(1)</script>",
		"javascript:alert(1)",
		"chrome://version",
	} {
		t.Run(raw, func(t *testing.T) {
			_, err := Run(t.Context(), Check{Chromium: fake, URL: raw, AllowedHosts: []string{"localhost", "127.0.0.1", "::1"}})
			if !errors.Is(err, ErrRefused) {
				t.Errorf("Run = %v, want an error wrapping ErrRefused", err)
			}
			if _, err := os.Stat(mark); err == nil {
				t.Fatal("the browser was started for a refused URL")
			}
		})
	}
	// The fake browser does start for an allowed URL, and fails: that is
	// ErrUnavailable, and it names the fix.
	_, err := Run(t.Context(), Check{Chromium: fake, URL: "http://127.0.0.1:1/", AllowedHosts: local, Timeout: 10 * time.Second})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "browser.chromium in .snag/config.json") {
		t.Errorf("Run with a browser that will not start = %v, want ErrUnavailable naming the fix", err)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("the fake browser did not run for an allowed URL: %v", err)
	}
}

func TestFind(t *testing.T) {
	t.Run("configured path missing", func(t *testing.T) {
		_, err := Find("/nonexistent/chromium")
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), `"/nonexistent/chromium"`) {
			t.Errorf("Find = %v, want ErrUnavailable naming the path", err)
		}
	})
	t.Run("nothing on PATH", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, err := Find("")
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Find = %v, want ErrUnavailable", err)
		}
		for _, want := range []string{"chromium", "install Debian's chromium package or set browser.chromium in .snag/config.json"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Find error %q does not say %q", err, want)
			}
		}
		_, err = Run(t.Context(), Check{URL: "http://127.0.0.1/", AllowedHosts: local})
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("Run = %v, want ErrUnavailable", err)
		}
	})
	t.Run("on PATH", func(t *testing.T) {
		dir := t.TempDir()
		for _, n := range []string{"google-chrome", "chromium-browser"} {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		t.Setenv("PATH", dir)
		got, err := Find("")
		if want := filepath.Join(dir, "chromium-browser"); err != nil || got != want {
			t.Errorf("Find = %q, %v; want %q (chromium-browser before google-chrome)", got, err, want)
		}
	})
}

// BenchmarkRun measures one passing check of a local page per iteration,
// from Run's call to its return, and reports when each phase ended, in
// milliseconds from the start (started: the browser answers; loaded: the
// load event; settled: after Settle; shot: the screenshot written;
// stopped: the browser gone, before the profile is removed).
func BenchmarkRun(b *testing.B) {
	if _, err := Find(""); err != nil {
		if os.Getenv("CI") != "" {
			b.Fatalf("CI needs chromium for the browser verifier (.ci/run installs it): %v", err)
		}
		b.Skipf("no chromium: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>checkout</title><button id="pay">Pay</button><script>console.log("ok")</script>`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	shot := filepath.Join(b.TempDir(), "shot.png")

	phases := []string{"started", "loaded", "settled", "shot", "stopped"}
	sums := make(map[string]time.Duration)
	var start time.Time
	trace = func(p string) { sums[p] += time.Since(start) }
	defer func() { trace = func(string) {} }()

	for b.Loop() {
		start = time.Now()
		r, err := Run(b.Context(), Check{URL: srv.URL, Anchor: "#pay", AllowedHosts: local, CapturedErrors: []string{capturedLog}, Shot: shot})
		if err != nil || r.Outcome != Pass {
			b.Fatalf("Run = %+v, %v", r, err)
		}
	}
	for _, p := range phases {
		b.ReportMetric(float64(sums[p].Milliseconds())/float64(b.N), p+"-ms/op")
	}
}

// TestLeaf keeps browser a leaf: it imports no other package of snag's but
// atomicfile.
func TestLeaf(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const module = "github.com/snagdev/snag/"
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, module) && dep != module+"internal/browser" && dep != module+"internal/atomicfile" {
			t.Errorf("browser depends on %s; it must import no package of snag's but atomicfile", dep)
		}
	}
}
