package browser

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/snagdev/snag/atomicfile"
)

// The outcomes of a check.
const (
	// Pass: the page loaded and none of the captured console errors came
	// back.
	Pass = "pass"
	// Fail: a captured console error came back, or the page could not be
	// checked (it did not load, answered an HTTP error, or left the allowed
	// hosts).
	Fail = "fail"
	// Inconclusive: the capture had no console error to compare; a person
	// looks at the screenshot.
	Inconclusive = "inconclusive"
)

// Defaults for the durations a [Check] leaves at zero.
const (
	DefaultSettle  = 500 * time.Millisecond
	DefaultTimeout = 30 * time.Second
)

// Bounds on what a [Result] carries.
const (
	maxReason   = 500 // bytes of Result.Reason
	maxErrors   = 20  // entries of Result.Errors
	maxErrorLen = 300 // bytes of each entry
)

// Check is one browser verification: the captured page and what to compare.
type Check struct {
	// Chromium is the browser to run; empty finds one on PATH (see [Find]).
	Chromium string
	// URL is the captured page. It must pass [CheckURL] with AllowedHosts.
	URL string
	// Anchor is the CSS selector of the element the person pointed at;
	// empty skips the lookup.
	Anchor string
	// CapturedErrors are the console errors seen when the task was
	// captured.
	CapturedErrors []string
	// AllowedHosts are the hosts the browser may open (config.json's
	// browser.allowed_hosts).
	AllowedHosts []string
	// Shot is the path the PNG screenshot is written to; empty takes none.
	// Its folder is created if needed.
	Shot string
	// Settle is how long the page may keep running after its load event
	// before its console errors are counted; zero means DefaultSettle.
	Settle time.Duration
	// Timeout bounds the whole check, from starting the browser to the
	// screenshot; zero means DefaultTimeout. The page must have loaded a
	// little before it (a fifth of it, at most 3s, is kept for the
	// screenshot). Stopping the browser and removing its profile come
	// after.
	Timeout time.Duration
}

// Result is what a check found. Reason and Errors are written for a model
// and a person to read, and are bounded in size.
type Result struct {
	// Outcome is Pass, Fail or Inconclusive.
	Outcome string
	// Reason says why, in one to three sentences, at most 500 bytes.
	Reason string
	// Errors are the distinct console errors seen this time, in order: at
	// most 20, each at most 300 bytes.
	Errors []string
	// AnchorFound reports whether Check.Anchor matched an element of the
	// loaded page; false when there was no anchor or no loaded page.
	AnchorFound bool
	// Shot is the path of the screenshot written, "" if none was.
	Shot string
	// Took is how long the check took, stopping the browser included.
	Took time.Duration
}

// Run opens c.URL in a fresh headless Chromium and compares the console
// errors it sees with c.CapturedErrors, as the package comment describes.
//
// Run returns an error only when it could not check at all: the URL is
// refused (the error wraps [ErrRefused]), there is no browser or it will
// not start (it wraps [ErrUnavailable]), the temporary profile cannot be
// made, or ctx ended (it wraps ctx.Err()). A page that does not load within
// c.Timeout is a Result with Outcome Fail, not an error. Every process Run
// started has ended when it returns.
func Run(ctx context.Context, c Check) (_ Result, err error) {
	start := time.Now()
	if c.Settle <= 0 {
		c.Settle = DefaultSettle
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if err := CheckURL(c.URL, c.AllowedHosts); err != nil {
		return Result{}, err
	}
	exe, err := Find(c.Chromium)
	if err != nil {
		return Result{}, err
	}
	dir, err := os.MkdirTemp("", "snag-chromium-")
	if err != nil {
		return Result{}, fmt.Errorf("browser: make a temporary profile: %w (check that TMPDIR is writable)", err)
	}
	tmp := scratch(dir)
	defer func() {
		// The browser has exited; its helpers may not have. This runs even
		// when ctx is canceled, so nothing is left behind.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		reap(cctx, dir)
		for _, d := range []string{dir, tmp} {
			if rerr := removeAll(cctx, d); rerr != nil && err == nil {
				err = rerr
			}
		}
	}()
	r, err := c.run(ctx, exe, dir, tmp)
	r.Took = time.Since(start)
	trace("stopped")
	return r, err
}

// run starts the browser with its profile in dir and its TMPDIR in tmp,
// checks the page and stops the browser.
func (c Check) run(parent context.Context, exe, dir, tmp string) (Result, error) {
	deadline := time.Now().Add(c.Timeout)
	ctx, cancel := context.WithDeadline(parent, deadline)
	defer cancel()

	// The browser lives as long as ctx; cancelTab stops it and waits for it.
	var out capped
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, allocatorOptions(exe, dir, tmp, &out)...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()
	if err := chromedp.Do(tab); err != nil {
		if parent.Err() != nil {
			return Result{}, fmt.Errorf("browser: check %s: %w", c.URL, parent.Err())
		}
		if ctx.Err() != nil {
			return Result{}, fmt.Errorf("browser: start %s: it did not answer within the %s timeout (a busy machine? verify again, or give the check more time): %w", exe, c.Timeout, ErrUnavailable)
		}
		msg := err.Error()
		if o := out.String(); o != "" && !strings.Contains(msg, o) {
			msg += "; chromium said: " + o
		}
		msg = strings.Join(strings.Fields(msg), " ")
		return Result{}, fmt.Errorf("browser: start %s: %s: %w", exe, clip(msg, 1000), ErrUnavailable)
	}
	trace("started")

	rec := newRecorder(c.CapturedErrors)
	if err := chromedp.Listen(tab, rec.event); err != nil {
		return Result{}, fmt.Errorf("browser: listen to the console: %w", err)
	}
	// The main frame of a page target has the target's id.
	main := cdp.FrameID(chromedp.FromContext(tab).Target.TargetID)
	gctx, stopGuard := context.WithCancel(tab)
	paused := chromedp.Events(gctx, fetch.RequestPaused)
	guarded := make(chan struct{})
	go func() {
		defer close(guarded)
		guard(gctx, paused, main, c.AllowedHosts, rec)
	}()
	defer func() { stopGuard(); <-guarded }()
	docs := []*fetch.RequestPattern{{ResourceType: network.ResourceTypeDocument}}
	if _, err := chromedp.Call(tab, fetch.Enable, fetch.EnableParams{Patterns: docs}); err != nil {
		if parent.Err() != nil {
			return Result{}, fmt.Errorf("browser: check %s: %w", c.URL, parent.Err())
		}
		return Result{}, fmt.Errorf("browser: intercept navigations: %v: %w", err, ErrUnavailable)
	}

	lctx, cancelLoad := context.WithDeadline(tab, deadline.Add(-reserve(c.Timeout)))
	resp, navErr := chromedp.Run(lctx, chromedp.NavigateResponse(c.URL))
	if navErr == nil {
		trace("loaded")
		sleep(lctx, c.Settle) // cut short by the load deadline, which is fine
		trace("settled")
	}
	cancelLoad()

	var j judgement
	j.settle, j.timeout, j.url = c.Settle, c.Timeout, c.URL
	switch {
	case navErr == nil:
		if resp != nil && resp.Status >= 400 {
			j.status = resp.Status
		}
		if c.Anchor != "" {
			j.anchor = c.Anchor
			j.anchorFound, j.anchorErr = findAnchor(tab, c.Anchor)
		}
	case parent.Err() != nil:
		return Result{}, fmt.Errorf("browser: check %s: %w", c.URL, parent.Err())
	case errors.Is(navErr, context.DeadlineExceeded):
		j.timedOut = true
	default:
		j.loadErr = navErr
	}

	var shot string
	if c.Shot != "" && j.loadErr == nil && rec.refused() == "" {
		// A page that loaded or timed out shows something; the error page
		// of a refused or failed load does not.
		png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
		if err == nil {
			err = writeFile(c.Shot, png)
		}
		if err != nil {
			j.shotErr = err
		} else {
			shot = c.Shot
		}
		trace("shot")
	}
	if parent.Err() != nil {
		return Result{}, fmt.Errorf("browser: check %s: %w", c.URL, parent.Err())
	}

	j.seen, j.matched, j.blocked = rec.results()
	j.compare = !rec.m.empty()
	outcome, reason := j.judge()
	errs := make([]string, 0, min(len(j.seen), maxErrors))
	for _, e := range j.seen[:min(len(j.seen), maxErrors)] {
		errs = append(errs, clip(e, maxErrorLen))
	}
	return Result{
		Outcome:     outcome,
		Reason:      clip(reason, maxReason),
		Errors:      errs,
		AnchorFound: j.anchorFound,
		Shot:        shot,
	}, nil
}

// reserve is how much of the timeout is kept for the screenshot once the
// page has had its time to load.
func reserve(timeout time.Duration) time.Duration {
	return min(max(timeout/5, 250*time.Millisecond), 3*time.Second)
}

// guard answers every paused document request: one of the main frame to a
// URL that CheckURL refuses is failed and recorded, the rest go on. It
// returns when ctx ends. A request it cannot answer stays paused, and the
// check ends in a timeout.
func guard(ctx context.Context, paused iter.Seq2[fetch.EventRequestPaused, error], main cdp.FrameID, allowed []string, rec *recorder) {
	for ev, err := range paused {
		if err != nil {
			return
		}
		if ev.FrameID == main && ev.Request != nil && CheckURL(ev.Request.URL, allowed) != nil {
			rec.block(ev.Request.URL)
			chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
			continue
		}
		chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
	}
}

// findAnchor reports whether the CSS selector sel matches an element of the
// page's document. It asks the DOM domain, so the page's scripts cannot
// change the answer.
func findAnchor(ctx context.Context, sel string) (bool, error) {
	doc, err := chromedp.Call(ctx, dom.GetDocument, dom.GetDocumentParams{})
	if err != nil {
		return false, err
	}
	res, err := chromedp.Call(ctx, dom.QuerySelector, dom.QuerySelectorParams{NodeID: doc.Root.NodeID, Selector: sel})
	if err != nil {
		return false, err
	}
	return res.NodeID != 0, nil
}

// recorder collects what the page did, from the browser's event loop. It is
// safe for concurrent use.
type recorder struct {
	m matcher

	mu      sync.Mutex
	seen    []string            // distinct console errors, in order, at most maxErrors
	dup     map[string]struct{} // of seen
	matched []string            // captured errors seen again, in order, distinct
	blocked string              // the first navigation refused
}

// newRecorder returns a recorder comparing with the captured errors.
func newRecorder(captured []string) *recorder {
	return &recorder{m: newMatcher(captured), dup: make(map[string]struct{})}
}

// event records a console error or an uncaught exception. It runs in the
// tab's event loop, so it only does a little string work.
func (r *recorder) event(ev any) {
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError {
			r.add(consoleText(ev.Args))
		}
	case *runtime.EventExceptionThrown:
		r.add(exceptionText(ev.ExceptionDetails))
	}
}

// add records one console error.
func (r *recorder) add(msg string) {
	c, hit := r.m.match(msg)
	r.mu.Lock()
	defer r.mu.Unlock()
	if hit && !slices.Contains(r.matched, c) {
		r.matched = append(r.matched, c)
	}
	if _, ok := r.dup[msg]; !ok && len(r.seen) < maxErrors {
		r.dup[msg] = struct{}{}
		r.seen = append(r.seen, msg)
	}
}

// block records a refused navigation.
func (r *recorder) block(u string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.blocked == "" {
		r.blocked = u
	}
}

// refused returns the first navigation refused, "" if none was.
func (r *recorder) refused() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blocked
}

// results returns copies of what was recorded.
func (r *recorder) results() (seen, matched []string, blocked string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...), append([]string(nil), r.matched...), r.blocked
}

// judgement is what a check found, before it is put in words.
type judgement struct {
	url             string
	settle, timeout time.Duration
	compare         bool // the capture had console errors to compare
	seen, matched   []string
	blocked         string // a navigation off the allowed hosts
	timedOut        bool
	loadErr         error
	status          int64 // an HTTP error status of the page, or 0
	anchor          string
	anchorFound     bool
	anchorErr       error
	shotErr         error
}

// judge returns the outcome and the reason for it.
func (j judgement) judge() (outcome, reason string) {
	var b strings.Builder
	sentence := func(format string, args ...any) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, format, args...)
	}
	outcome = Fail
	switch {
	case j.blocked != "":
		sentence("The page went to %s, whose host is not allowed, and the verifier did not follow it; if that host is yours, add it to browser.allowed_hosts in .snag/config.json.", clip(j.blocked, 150))
	case j.timedOut:
		sentence("The page did not finish loading within the %s timeout; check that the server at %s answers, then verify again.", j.timeout, hostOf(j.url))
	case j.loadErr != nil:
		sentence("The page could not be loaded (%s); start the server at %s, then verify again.", clip(loadText(j.loadErr), 120), hostOf(j.url))
	case j.status != 0:
		sentence("The page answered HTTP %d, so it cannot show the fix; fix the server error, then verify again.", j.status)
	case len(j.matched) > 0:
	case !j.compare:
		outcome = Inconclusive
		sentence("The capture had no console error to compare, so a person should look at the screenshot.")
	default:
		outcome = Pass
		sentence("None of the captured console errors appeared within %s of the page's load.", j.settle)
	}
	if len(j.matched) > 0 {
		sentence("The captured console error %q appeared again", clip(j.matched[0], 150))
		if n := len(j.matched) - 1; n > 0 {
			fmt.Fprintf(&b, ", and %d more of the captured errors did", n)
		}
		b.WriteByte('.')
	}
	if outcome == Inconclusive && len(j.seen) > 0 {
		sentence("%d console error(s) appeared this time.", len(j.seen))
	}
	switch {
	case j.anchor == "":
	case j.anchorErr != nil:
		sentence("The captured anchor %q could not be looked up (%s).", clip(j.anchor, 100), clip(j.anchorErr.Error(), 100))
	case !j.anchorFound:
		sentence("The captured anchor %q is gone from the page.", clip(j.anchor, 100))
	}
	if j.shotErr != nil {
		sentence("No screenshot was written (%s).", clip(j.shotErr.Error(), 100))
	}
	return outcome, b.String()
}

// loadText is the browser's words for a failed load.
func loadText(err error) string {
	if le, ok := errors.AsType[*chromedp.LoadError](err); ok {
		return le.ErrorText
	}
	return err.Error()
}

// hostOf returns the host and port of a URL, for a reason.
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return raw
}

// writeFile writes data to path through a temporary file, so a reader never
// sees half a PNG, creating path's folder if needed. The file is private to
// its owner, as screenshots may show anything on the page.
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, 0o600)
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// clip cuts s to at most n bytes, on a rune boundary, ending in "…" when it
// cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ell = "…"
	cut := n - len(ell)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ell
}

// trace, when set (by the benchmark), is told as each phase of a check
// ends: started, loaded, settled, shot, stopped.
var trace = func(string) {}
