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

	"github.com/snagdev/snag/internal/atomicfile"
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

	// Viewport is the viewport the page is shown at, as [Capture] sets
	// it. The zero value leaves the browser's window as it is (1280 by 800
	// at scale 1), unless Crop is set: then it means what it means for
	// Capture, and the default viewport is set the same way.
	Viewport Viewport
	// AnchorText is the captured anchor's text. When Anchor is empty or
	// matches nothing, the anchor is looked for by this text, by the rule
	// [Capture] uses.
	AnchorText string
	// WaitFor is the CSS selector the capture waited for, if any. It
	// counts only with Crop, which waits for the page to settle as
	// [Capture] does.
	WaitFor string
	// Crop is the path the PNG crop of the anchor is written to; empty
	// takes none. When it is set, Run waits for the page to settle as
	// Capture does (with Settle as the quiet period), and if the anchor
	// resolves it takes the crop exactly as Capture takes it: same
	// viewport, scale, scrolling and clip. Its folder is created if
	// needed.
	Crop string
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
	// AnchorByText reports that the anchor was found by Check.AnchorText
	// because Check.Anchor was empty or matched nothing.
	AnchorByText bool
	// Box is where the anchor was, in CSS pixels of the page, when it was
	// found by the rules of [Capture]: with Check.AnchorText or Check.Crop
	// set. It is the zero Box otherwise.
	Box Box
	// Cropped reports that the crop of the anchor was written to
	// Check.Crop.
	Cropped bool
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
	// The viewport is set when one is given, or when the crop must be
	// taken as Capture takes it.
	var vp Viewport
	if c.Viewport != (Viewport{}) || c.Crop != "" {
		if vp, err = c.Viewport.resolve(); err != nil {
			return Result{}, fmt.Errorf("browser: check %s: %w", c.URL, err)
		}
	}
	var r Result
	err = launch(ctx, c.Chromium, c.URL, c.AllowedHosts, func(exe, dir, tmp string) error {
		var err error
		r, err = c.run(ctx, exe, dir, tmp, vp)
		r.Took = time.Since(start)
		trace("stopped")
		return err
	})
	return r, err
}

// run starts the browser with its profile in dir and its TMPDIR in tmp,
// checks the page at viewport vp (none when it is zero) and stops the
// browser.
func (c Check) run(parent context.Context, exe, dir, tmp string, vp Viewport) (Result, error) {
	deadline := time.Now().Add(c.Timeout)
	ctx, cancel := context.WithDeadline(parent, deadline)
	defer cancel()

	rec := newRecorder(c.CapturedErrors)
	net := newNetlog()
	t, err := open(parent, ctx, checkJob, exe, dir, tmp, c.URL, c.Timeout, c.AllowedHosts, rec, net.event)
	if err != nil {
		return Result{}, err
	}
	defer t.stop()
	tab := t.ctx
	if vp != (Viewport{}) {
		if err := t.emulate(vp); err != nil {
			if parent.Err() != nil {
				return Result{}, fmt.Errorf("browser: check %s: %w", c.URL, parent.Err())
			}
			return Result{}, fmt.Errorf("browser: check %s: %w: %w", c.URL, err, ErrUnavailable)
		}
	}

	var unsettled string
	lctx, cancelLoad := context.WithDeadline(tab, deadline.Add(-reserve(c.Timeout)))
	resp, navErr := chromedp.Run(lctx, chromedp.NavigateResponse(c.URL))
	if navErr == nil {
		trace("loaded")
		if c.Crop != "" {
			// As Capture waits; a page that does not settle still gets
			// its crop, and the reason says so.
			unsettled = settle(lctx, net, rec, c.Settle, c.WaitFor)
		} else {
			sleep(lctx, c.Settle) // cut short by the load deadline, which is fine
		}
		trace("settled")
	}
	cancelLoad()

	var j judgement
	var box Box
	j.settle, j.timeout, j.url = c.Settle, c.Timeout, c.URL
	switch {
	case navErr == nil:
		if resp != nil && resp.Status >= 400 {
			j.status = resp.Status
		}
		j.anchor, j.anchorText = c.Anchor, c.AnchorText
		switch {
		case c.AnchorText == "" && c.Crop == "" && c.Anchor != "":
			j.anchorFound, j.anchorErr = findAnchor(tab, c.Anchor)
		case c.Anchor != "" || c.AnchorText != "":
			var a found
			a, j.anchorErr = t.resolve(c.Anchor, c.AnchorText)
			j.anchorFound, j.anchorByText = a.Found, a.By == "text"
			if a.Found {
				box = a.box()
			}
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
	cropped := false
	if c.Crop != "" && j.anchorFound && rec.refused() == "" {
		j.unsettled = unsettled
		png, err := t.crop(box, vp.Scale)
		if err == nil {
			err = writeFile(c.Crop, png)
		}
		if err != nil {
			j.cropErr = err
		} else {
			cropped = true
		}
		trace("cropped")
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
		Outcome:      outcome,
		Reason:       clip(reason, maxReason),
		Errors:       errs,
		AnchorFound:  j.anchorFound,
		AnchorByText: j.anchorByText,
		Box:          box,
		Shot:         shot,
		Cropped:      cropped,
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
	anchorText      string
	anchorFound     bool
	anchorByText    bool // found by anchorText, as anchor matched nothing
	anchorErr       error
	shotErr         error
	unsettled       string // what the page was still doing when the crop was taken
	cropErr         error
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
	case j.anchor == "" && j.anchorText == "":
	case j.anchorErr != nil && j.anchor != "":
		sentence("The captured anchor %q could not be looked up (%s).", clip(j.anchor, 100), clip(j.anchorErr.Error(), 100))
	case j.anchorErr != nil:
		sentence("The captured anchor's text %q could not be looked up (%s).", clip(j.anchorText, 100), clip(j.anchorErr.Error(), 100))
	case j.anchorByText && j.anchor != "":
		sentence("The captured anchor %q matched nothing; the element was found by its text %q.", clip(j.anchor, 100), clip(j.anchorText, 100))
	case j.anchorFound:
	case j.anchor == "":
		sentence("No element shows the captured anchor's text %q any more.", clip(j.anchorText, 100))
	case j.anchorText != "":
		sentence("The captured anchor %q is gone from the page, and no element shows its text %q.", clip(j.anchor, 100), clip(j.anchorText, 100))
	default:
		sentence("The captured anchor %q is gone from the page.", clip(j.anchor, 100))
	}
	if j.shotErr != nil {
		sentence("No screenshot was written (%s).", clip(j.shotErr.Error(), 100))
	}
	if j.unsettled != "" {
		sentence("The page had not settled when the crop was taken (%s).", clip(j.unsettled, 150))
	}
	if j.cropErr != nil {
		sentence("No crop was written (%s).", clip(j.cropErr.Error(), 100))
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
