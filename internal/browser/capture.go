package browser

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/chromedp/chromedp"
)

// ErrNotSettled is wrapped by the error of [Capture] when the page did not
// settle (see the package comment) within the timeout.
var ErrNotSettled = errors.New("the page did not settle")

// ErrNoAnchor is wrapped by the error of [Capture] when the anchor it was
// asked for matches no element of the settled page.
var ErrNoAnchor = errors.New("no element matches the anchor")

// The viewport a zero [Viewport] stands for.
const (
	DefaultWidth  = 1280
	DefaultHeight = 800
	DefaultScale  = 1.0
)

// Bounds on a [Viewport], so a screenshot stays a few megabytes, and on the
// selectors and text of a [CaptureRequest].
const (
	maxScale       = 4
	maxDeviceSide  = 8192 // device pixels of a viewport's side
	maxSelectorLen = 1000 // bytes of a selector
	maxTextLen     = 1000 // bytes of an anchor text
	maxAnchorText  = 200  // bytes of Anchor.Text
	maxTitle       = 300  // bytes of Captured.Title
)

// Viewport is the size of the page's visible area in CSS pixels, and its
// scale: how many device pixels a CSS pixel takes (2 on a HiDPI screen).
// A screenshot is Width×Scale by Height×Scale pixels. A field left at zero
// takes its default: 1280 by 800 at scale 1.
type Viewport struct {
	Width, Height int
	Scale         float64
}

// String returns the viewport as "1280x800@1".
func (v Viewport) String() string {
	return strconv.Itoa(v.Width) + "x" + strconv.Itoa(v.Height) + "@" + strconv.FormatFloat(v.Scale, 'g', -1, 64)
}

// resolve fills in the defaults and checks the bounds: a positive width
// and height, a scale above 0 and at most 4, and at most 8192 device pixels
// a side.
func (v Viewport) resolve() (Viewport, error) {
	if v.Width == 0 {
		v.Width = DefaultWidth
	}
	if v.Height == 0 {
		v.Height = DefaultHeight
	}
	if v.Scale == 0 {
		v.Scale = DefaultScale
	}
	switch {
	case v.Width < 0 || v.Height < 0:
		return v, fmt.Errorf("viewport %s: a negative size; give a width and height in CSS pixels, such as 1280x800", v)
	case v.Scale < 0 || v.Scale > maxScale || v.Scale != v.Scale:
		return v, fmt.Errorf("viewport %s: scale %g is out of range; give a scale above 0 and at most %d, such as 1 or 2", v, v.Scale, maxScale)
	case float64(v.Width)*v.Scale > maxDeviceSide || float64(v.Height)*v.Scale > maxDeviceSide:
		return v, fmt.Errorf("viewport %s: more than %d device pixels a side; give a smaller size or scale", v, maxDeviceSide)
	}
	return v, nil
}

// Box is a rectangle of the page in CSS pixels, from the top-left corner of
// the document (not of the viewport).
type Box struct {
	X, Y, Width, Height float64
}

// Anchor is the element a capture points at.
type Anchor struct {
	// Selector finds the element again: the one the person gave, or one
	// built for an element found by its text (see the package comment).
	Selector string
	// Text is the element's innerText, its white space collapsed and
	// trimmed, at most 200 bytes (ending in "…" when cut).
	Text string
	// Box is where the element was when the screenshots were taken.
	Box Box
}

// FailedRequest is a network request of the page that failed: it was
// answered with an HTTP status of 400 or more, or not answered at all.
type FailedRequest struct {
	// Method is the HTTP method, such as GET.
	Method string
	// URL is the request's URL, at most 500 bytes.
	URL string
	// Status is the HTTP status of the answer; 0 when none came.
	Status int
	// Error is the browser's words for a request that got no full answer,
	// such as net::ERR_CONNECTION_REFUSED; "" for an HTTP error status.
	Error string
}

// CaptureRequest is what to capture, and how.
type CaptureRequest struct {
	// Chromium is the browser to run; empty finds one on PATH (see [Find]).
	Chromium string
	// URL is the page. It must pass [CheckURL] with AllowedHosts.
	URL string
	// AllowedHosts are the hosts the browser may open (config.json's
	// browser.allowed_hosts).
	AllowedHosts []string
	// AnchorSelector is the CSS selector of the element the person points
	// at (--anchor). When AnchorText is set too, it is tried first.
	AnchorSelector string
	// AnchorText is the text of the element the person points at
	// (--anchor-text), looked for when AnchorSelector is empty or matches
	// nothing.
	AnchorText string
	// WaitFor is a CSS selector the page must match before it counts as
	// settled (--wait-for); see the package comment.
	WaitFor string
	// Viewport is the viewport to show the page at; zero fields take the
	// defaults (1280 by 800 at scale 1).
	Viewport Viewport
	// Settle is the quiet period: how long no request may be in flight,
	// after the load event, for the page to count as settled. Zero means
	// DefaultSettle.
	Settle time.Duration
	// Timeout bounds the whole capture, from starting the browser to the
	// last screenshot; zero means DefaultTimeout. The page must have
	// settled a little before it (a fifth of it, at most 3s, is kept for
	// the screenshots). Stopping the browser and removing its profile come
	// after.
	Timeout time.Duration
}

// Captured is what a capture found. Its strings and lists are bounded in
// size, as a [Result]'s are.
type Captured struct {
	// URL is the page's URL when it had settled, after any redirect.
	URL string
	// Title is the document's title, at most 300 bytes.
	Title string
	// Viewport is the viewport used, its defaults filled in.
	Viewport Viewport
	// UserAgent is the browser's user agent, as the page saw it.
	UserAgent string
	// Errors are the distinct console errors and uncaught exceptions seen
	// from the start to the screenshot, in order, in the words of
	// [Result.Errors]: at most 20, each at most 300 bytes.
	Errors []string
	// FailedRequests are the distinct requests that failed, in order: at
	// most 20.
	FailedRequests []FailedRequest
	// Anchor is the element asked for; nil when none was.
	Anchor *Anchor
	// ScrollX and ScrollY are the page coordinates, in CSS pixels, of the
	// viewport's top-left corner in Screenshot: the anchor is at
	// Anchor.Box less these in it. They are not zero when the anchor had
	// to be scrolled into view.
	ScrollX, ScrollY float64
	// Screenshot is a PNG of the viewport.
	Screenshot []byte
	// Crop is a PNG of Anchor.Box at the viewport's scale; nil when there
	// is no anchor.
	Crop []byte
	// Took is how long the capture took, stopping the browser included.
	Took time.Duration
}

// Capture opens r.URL in a fresh headless Chromium at r.Viewport, waits for
// it to settle, and collects what the package comment's "Capture" section
// lists: the page's URL, title and user agent, its console errors and
// failed requests, the anchor, a screenshot and the anchor's crop.
//
// The URL is refused, with an error wrapping [ErrRefused], before the
// browser starts; so is a main-frame navigation to a host that is not
// allowed, which is never followed. A page that does not settle within
// r.Timeout gives an error wrapping [ErrNotSettled], and an anchor that
// matches nothing one wrapping [ErrNoAnchor]; a missing browser one
// wrapping [ErrUnavailable], and an end of ctx one wrapping ctx.Err(). A
// page that answers an HTTP error status is captured, with its status in
// FailedRequests. Every process Capture started has ended when it
// returns.
func Capture(ctx context.Context, r CaptureRequest) (Captured, error) {
	start := time.Now()
	if r.Settle <= 0 {
		r.Settle = DefaultSettle
	}
	if r.Timeout <= 0 {
		r.Timeout = DefaultTimeout
	}
	vp, err := r.Viewport.resolve()
	if err != nil {
		return Captured{}, fmt.Errorf("browser: capture %s: %w", r.URL, err)
	}
	for _, f := range []struct{ flag, v string }{{"--anchor", r.AnchorSelector}, {"--wait-for", r.WaitFor}} {
		if len(f.v) > maxSelectorLen {
			return Captured{}, fmt.Errorf("browser: capture %s: %s: a selector of %d bytes, more than %d; point at the element with a shorter selector, or with --anchor-text", r.URL, f.flag, len(f.v), maxSelectorLen)
		}
	}
	if len(r.AnchorText) > maxTextLen {
		return Captured{}, fmt.Errorf("browser: capture %s: --anchor-text: %d bytes, more than %d; give a few words the element shows", r.URL, len(r.AnchorText), maxTextLen)
	}
	var c Captured
	err = launch(ctx, r.Chromium, r.URL, r.AllowedHosts, func(exe, dir, tmp string) error {
		var err error
		c, err = r.capture(ctx, exe, dir, tmp, vp)
		return err
	})
	if err != nil {
		return Captured{}, err
	}
	c.Took = time.Since(start)
	return c, nil
}

// capture starts the browser with its profile in dir and its TMPDIR in tmp,
// captures the page at viewport vp and stops the browser.
func (r CaptureRequest) capture(parent context.Context, exe, dir, tmp string, vp Viewport) (Captured, error) {
	deadline := time.Now().Add(r.Timeout)
	ctx, cancel := context.WithDeadline(parent, deadline)
	defer cancel()
	fail := func(format string, args ...any) (Captured, error) {
		if parent.Err() != nil {
			return Captured{}, fmt.Errorf("browser: capture %s: %w", r.URL, parent.Err())
		}
		return Captured{}, fmt.Errorf("browser: capture %s: "+format, append([]any{r.URL}, args...)...)
	}

	rec := newRecorder(nil)
	net := newNetlog()
	t, err := open(parent, ctx, captureJob, exe, dir, tmp, r.URL, r.Timeout, r.AllowedHosts, rec, net.event)
	if err != nil {
		return Captured{}, err
	}
	defer t.stop()
	if err := t.emulate(vp); err != nil {
		return fail("%w: %w", err, ErrUnavailable)
	}
	// A selector that is not one is said before the page loads.
	for _, f := range []struct{ flag, v string }{{"--anchor", r.AnchorSelector}, {"--wait-for", r.WaitFor}} {
		if f.v == "" {
			continue
		}
		if err := t.validSelector(f.v); err != nil {
			return fail("%s %q: not a CSS selector (%v); give one that document.querySelector accepts, such as #pay or button.primary", f.flag, clip(f.v, 100), err)
		}
	}

	lctx, cancelLoad := context.WithDeadline(t.ctx, deadline.Add(-reserve(r.Timeout)))
	defer cancelLoad()
	_, navErr := chromedp.Run(lctx, chromedp.NavigateResponse(r.URL))
	var busy string
	switch {
	case parent.Err() != nil:
		return fail("%w", parent.Err())
	case rec.refused() != "":
	case errors.Is(navErr, context.DeadlineExceeded):
		busy = "its load event never fired"
		if n, oldest, _ := net.quiet(); n > 0 {
			busy += ", and " + inflight(n, oldest)
		}
	case navErr != nil:
		return fail("the page could not be loaded (%s); start the server at %s, then capture again", clip(loadText(navErr), 120), hostOf(r.URL))
	default:
		trace("loaded")
		busy = settle(lctx, net, rec, r.Settle, r.WaitFor)
		trace("settled")
	}
	cancelLoad()
	if u := rec.refused(); u != "" {
		return fail("the page went to %s, and the browser did not follow: %w: host %q is not allowed; if that host is yours, add it to browser.allowed_hosts in .snag/config.json", clip(u, 200), ErrRefused, hostname(u))
	}
	if parent.Err() != nil {
		return fail("%w", parent.Err())
	}
	if busy != "" {
		var waited string
		if r.WaitFor != "" {
			waited = fmt.Sprintf("for %q to match", clip(r.WaitFor, 100))
		} else {
			waited = fmt.Sprintf("for its load event and then %s with no request in flight", r.Settle)
		}
		return fail("%w within the %s timeout: it waited %s, and %s; capture once an element shows with --wait-for SELECTOR, or give it a longer --timeout", ErrNotSettled, r.Timeout, waited, busy)
	}

	c := Captured{Viewport: vp}
	if r.AnchorSelector != "" || r.AnchorText != "" {
		a, err := t.resolve(r.AnchorSelector, r.AnchorText)
		if err != nil {
			return fail("find the anchor: %v", err)
		}
		if !a.Found {
			return fail("%w: %s", ErrNoAnchor, anchorWords(r.AnchorSelector, r.AnchorText))
		}
		c.Anchor = &Anchor{Selector: a.Selector, Text: clip(a.Text, maxAnchorText), Box: a.box()}
	}
	var info struct {
		URL       string  `json:"url"`
		Title     string  `json:"title"`
		UserAgent string  `json:"ua"`
		ScrollX   float64 `json:"x"`
		ScrollY   float64 `json:"y"`
	}
	if err := t.eval(`({url: location.href, title: document.title, ua: navigator.userAgent, x: scrollX, y: scrollY})`, &info); err != nil {
		return fail("read the page: %v", err)
	}
	c.URL, c.Title, c.UserAgent = info.URL, clip(info.Title, maxTitle), info.UserAgent
	c.ScrollX, c.ScrollY = info.ScrollX, info.ScrollY
	if c.Screenshot, err = t.screenshot(); err != nil {
		return fail("%v", err)
	}
	trace("shot")
	if c.Anchor != nil {
		if c.Crop, err = t.crop(c.Anchor.Box, vp.Scale); err != nil {
			return fail("%v", err)
		}
		trace("cropped")
	}
	seen, _, _ := rec.results()
	for _, e := range seen {
		c.Errors = append(c.Errors, clip(e, maxErrorLen))
	}
	c.FailedRequests = net.failures()
	return c, nil
}

// anchorWords says that an anchor matched nothing, and what to do, for an
// error.
func anchorWords(sel, text string) string {
	const later = "; if it shows later, wait for it with --wait-for SELECTOR"
	switch {
	case text == "":
		return fmt.Sprintf("selector %q matches nothing; check it with document.querySelector in the browser's console, or point at the element by what it shows with --anchor-text", clip(sel, 100)) + later
	case sel == "":
		return fmt.Sprintf("no visible element shows the text %q; give words the element shows, as they read on the page, or point at it with --anchor SELECTOR", clip(text, 100)) + later
	}
	return fmt.Sprintf("selector %q matches nothing, and no visible element shows the text %q; check the selector with document.querySelector in the browser's console", clip(sel, 100), clip(text, 100)) + later
}

// hostname returns the host of a URL without its port, for an error.
func hostname(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return raw
}
