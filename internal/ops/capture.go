package ops

import (
	"github.com/snagdev/snag/internal/queue"
)

// CaptureRequest is the body of POST /captures: a page as a person saw it,
// from snag capture or the browser extension. It becomes an inbox task,
// unvetted, with source: capture. The body may be up to 24 MiB, so that
// two screenshots of 8 MiB fit in base64.
type CaptureRequest struct {
	// URL is the page's address, http or https, on browser.allowed_hosts.
	URL string `json:"url"`
	// Title is the page's title.
	Title string `json:"title,omitempty"`
	// Viewport is the window's size in CSS pixels and its device pixel
	// ratio.
	Viewport *queue.Viewport `json:"viewport,omitempty"`
	// UserAgent is the browser's.
	UserAgent string `json:"user_agent,omitempty"`
	// Anchor is the element the person pointed at.
	Anchor *CaptureAnchor `json:"anchor,omitempty"`
	// Scroll is where the page was scrolled to when the screenshot was
	// taken, in CSS pixels: with no crop, the anchor is cut out of the
	// screenshot at its box less the scroll.
	Scroll *Point `json:"scroll,omitempty"`
	// ConsoleErrors are the console errors and uncaught exceptions seen;
	// the first 20 are kept, each cut at 500 bytes.
	ConsoleErrors []string `json:"console_errors,omitempty"`
	// NetworkErrors are the requests that failed; the first 20 are kept.
	NetworkErrors []NetworkError `json:"network_errors,omitempty"`
	// Screenshot is the page as seen: a PNG of at most 8 MiB, in base64,
	// or a data:image/png;base64 URL. Required.
	Screenshot string `json:"screenshot"`
	// Crop is the anchor's pixels, a PNG as Screenshot; without it snagd
	// cuts the anchor's box out of the screenshot.
	Crop string `json:"crop,omitempty"`
	// Note is what the person says; its first line is the task's title
	// unless Summary is given.
	Note string `json:"note,omitempty"`
	// Summary is the task's title.
	Summary string `json:"summary,omitempty"`
	// Kind is the task's kind (bug, ux, a11y, layout ...); bug when empty.
	Kind string `json:"kind,omitempty"`
	// Severity is critical, high, medium or low; medium when empty.
	Severity string `json:"severity,omitempty"`
	// Files are suspect files, as path or path:line-line.
	Files []string `json:"files,omitempty"`
	// AllowHost takes the page's host for this capture even when it is not
	// on browser.allowed_hosts: the person widened the list (snag capture
	// --allow-host). The browser extension cannot set it.
	AllowHost bool `json:"allow_host,omitempty"`
	// By is the person, for the audit log.
	By string `json:"by,omitempty"`
}

// CaptureAnchor is the element a person pointed at: a CSS selector that
// finds it again, its text, and its box in CSS pixels of the page.
type CaptureAnchor struct {
	// Selector finds the element again; at most 1 KiB.
	Selector string `json:"selector,omitempty"`
	// Text is the element's text, cut at 200 bytes; the verifier looks
	// the element up by it when the selector finds nothing.
	Text string `json:"text,omitempty"`
	// Box is where it was, in CSS pixels of the page.
	Box *queue.Box `json:"box,omitempty"`
}

// Point is a position in CSS pixels.
type Point struct {
	// X is from the left.
	X float64 `json:"x"`
	// Y is from the top.
	Y float64 `json:"y"`
}

// NetworkError is a request that failed: an HTTP status of 400 or more,
// or no answer at all (Error says why, as the browser put it).
type NetworkError struct {
	// Method is the request's; GET when empty.
	Method string `json:"method,omitempty"`
	// URL is what was asked for.
	URL string `json:"url"`
	// Status is the answer's HTTP status, 0 when none came.
	Status int `json:"status,omitempty"`
	// Error is why no answer came (net::ERR_CONNECTION_REFUSED).
	Error string `json:"error,omitempty"`
}

// Captured is the answer of POST /captures (201): the inbox task made of
// the capture, and its pictures, relative to .snag/.
type Captured struct {
	Added
	// Source is always capture.
	Source string `json:"source"`
	// Screenshot is the page's picture, shots/<id>-page.png.
	Screenshot string `json:"screenshot"`
	// Crop is the anchor's, shots/<id>-anchor.png, when there was one.
	Crop string `json:"crop,omitempty"`
}
