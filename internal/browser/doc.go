// Package browser is snag's browser verifier and capturer: [Capture] opens
// a page in headless Chromium, over the DevTools protocol, and collects what
// a task needs to describe a bug seen there (`snag capture`); [Run]
// re-opens the page a task was captured from and says whether the console
// errors the person saw are still there, and takes the anchor's crop again
// for the pixel verify.
//
// [Run] takes a [Check] (the captured URL, anchor and console errors) and
// returns a [Result] with one of three outcomes:
//
//   - [Fail]: a captured console error was seen again, the page did not
//     finish loading within the timeout, it could not be loaded or answered
//     with an HTTP error, or it went to a host that is not allowed.
//   - [Pass]: the page loaded and, within the settle time after its load
//     event, none of the captured console errors was seen again.
//   - [Inconclusive]: the capture had no console error to compare, so a
//     person looks at the fresh screenshot.
//
// A captured anchor (the CSS selector of the element the person pointed at)
// is looked up once the page has settled; if it is gone the reason says so,
// but that alone does not change the outcome. A PNG screenshot is written to
// [Check.Shot] whenever the page got far enough to take one, and a crop of
// the anchor to [Check.Crop] when it is set (see "The crop, taken again").
//
// # Console errors and how they match
//
// A console error is a console.error call (Runtime.consoleAPICalled of type
// error) or an uncaught exception (Runtime.exceptionThrown). Its text is what
// the DevTools console shows: the arguments of console.error joined by
// spaces (with %s, %d, %i, %f, %o, %O and %c applied), or "Uncaught" and the
// error's description for an exception. Warnings, logs and the browser's own
// log entries (a failed image request, say) are not console errors.
//
// A captured error and a fresh one match when their normal forms are equal.
// The normal form of a message is made in this order:
//
//  1. lines of a stack trace (a line after the first that starts with "at ")
//     are dropped;
//  2. runs of white space become one space, and the ends are trimmed;
//  3. a leading "Uncaught " or "Uncaught (in promise) " is dropped;
//  4. a trailing location is dropped: "(file:line)" or "(file:line:col)" in
//     parentheses, or " at " followed by something ending in ":line" or
//     ":line:col" (and an optional ")");
//  5. the ends are trimmed again.
//
// So the captured "TypeError: cart is undefined (checkout.ts:131)" matches
// the fresh "Uncaught TypeError: cart is undefined" thrown at
// checkout.ts:131:7. The comparison is otherwise exact: case, wording and
// punctuation count. A captured error whose normal form is empty is ignored.
//
// # Capture
//
// [Capture] takes a [CaptureRequest] and returns what a person would attach
// to a bug report, as a [Captured]:
//
//   - the page's final URL (after redirects), its title, the viewport and
//     the browser's user agent;
//   - its console errors and uncaught exceptions, in the words and bounds
//     of [Result.Errors];
//   - its failed requests ([FailedRequest]): those answered with a status
//     of 400 or more, the page itself included, and those that got no
//     answer (a refused connection, a DNS or CORS failure), with the
//     browser's words for it. A request the page canceled is not a failure,
//     and the browser's own requests (for /favicon.ico, say) are not the
//     page's. They are distinct, in order, at most 20, their URLs cut at
//     500 bytes;
//   - the anchor, when one is asked for ([Anchor]), and a PNG crop of it;
//   - a PNG screenshot of the viewport.
//
// The viewport is set with Emulation.setDeviceMetricsOverride before the
// page loads: [Viewport] Width and Height in CSS pixels and Scale device
// pixels per CSS pixel, each 0 taking its default, 1280, 800 and 1. The
// scale is at most 4, and a side at most 8192 device pixels.
//
// The page has settled when its load event has fired and then no request
// has been in flight for the quiet period (CaptureRequest.Settle, 500ms by
// default; the period starts at the load event or at the end of the last
// request, whichever is later). With CaptureRequest.WaitFor (--wait-for), it
// has settled once that selector matches, after the load event, and then
// either no request has been in flight for the quiet period or the quiet
// period has passed since it matched, whichever comes first; so a page that
// keeps a request open for ever (a long poll, an event stream) can be
// captured by waiting for the element it shows. A page that has not settled
// a little before the timeout (30s by default; a fifth of it, at most 3s,
// is kept for the screenshots) is an error wrapping [ErrNotSettled] that
// says what it waited for and what the page was still doing: its load event
// never fired, a request was still in flight (the oldest is named), or the
// selector never matched.
//
// The anchor is looked up on the settled page, in an isolated world, so the
// page's scripts cannot change the answer. CaptureRequest.AnchorSelector is
// given to document.querySelector; when it is empty or matches nothing,
// CaptureRequest.AnchorText is looked for: the smallest visible element
// (by the area of its box) whose innerText equals the text, else the
// smallest whose innerText contains it, both with runs of white space as
// one space and the ends trimmed. A text ending in "…" (cut when it was
// stored) is looked for as a part. An anchor that matches nothing is an
// error wrapping [ErrNoAnchor]; a selector that is not one is an error
// before the page loads. An anchor not wholly in the viewport is scrolled
// to its centre first, so the screenshot shows it; Captured.ScrollX and
// ScrollY say where the viewport then was.
//
// Anchor.Selector must find the element again after small changes to the
// page. A selector the person gave is kept as it is. For an element found
// by its text, one is built, the first of these that matches it alone:
//
//  1. #id, unless the id looks generated: it has a colon or white space, is
//     over 40 bytes, starts with a digit, has three digits in a row, has a
//     part (between -, _ and .) of six or more characters with two digits
//     (a hash), or is a framework's numbered id (ember12, react-aria-3,
//     mui-7, mat-input-0);
//  2. [data-testid="..."], [name="..."] or [aria-label="..."], in that
//     order, alone or after the element's tag;
//  3. a path of tags from the nearest ancestor with an id as in 1 (or from
//     body), one step per element, "#main > ul > li:nth-of-type(2)", each
//     with :nth-of-type only where a sibling has the same tag.
//
// Anchor.Text is the element's innerText, white space collapsed and
// trimmed, cut at 200 bytes; Anchor.Box its border box in CSS pixels of the
// page (from the document's top-left corner, not the viewport's).
//
// The crop is Page.captureScreenshot of the box, with captureBeyondViewport
// so a box larger than the viewport is whole, at the viewport's scale. Each
// edge of the box is moved to the nearest device pixel, so the crop is the
// box's size times the scale, give or take a pixel; a side is cut to 4096
// device pixels. The viewport's screenshot is taken before the crop.
//
// # The crop, taken again
//
// For the pixel verify, [Run] takes the crop again exactly as Capture took
// it, when [Check.Crop] names a file: the viewport is set from
// Check.Viewport as Capture sets it (zero fields take the same defaults),
// the page settles by the rule above (with Check.Settle as the quiet
// period and Check.WaitFor), the anchor is looked up by Check.Anchor and
// else by Check.AnchorText, scrolled into view, and cropped the same way.
// A page that has not settled in time is still cropped, and the reason says
// what it was still doing. [Result.AnchorByText] says the selector matched
// nothing and the text found the element; [Result.Box] is where it was;
// [Result.Cropped] that the crop was written. Run does not compare the
// crops: its caller does, with the pixdiff package. Without Check.Crop,
// Run waits for the settle time after the load event as before, and sets
// the viewport only when Check.Viewport is not zero. The outcome is decided
// by the console errors alone, as above.
//
// # Where the browser may go
//
// Only http and https URLs whose host is one of the allowed hosts are opened
// ([CheckURL]); anything else is refused with [ErrRefused] before Chromium
// starts, so no request is made. While the page runs, every navigation of
// its main frame (a redirect, or a script setting location) is intercepted
// with the Fetch domain and checked the same way: a navigation off the
// allowed hosts is failed in the browser, never followed, and the outcome
// is [Fail] with a reason naming the host; for Capture, it is an error
// wrapping ErrRefused that names the host. Subresources (scripts, images, iframes) are not
// restricted. Pop-ups need a user gesture in Chromium's default settings and
// the verifier makes none, so a page cannot open one.
//
// # The browser process
//
// Chromium is found by [Find]: the configured path, else chromium,
// chromium-browser or google-chrome on PATH; with none, [Run], [Capture]
// and [Find] return an error that wraps [ErrUnavailable]. Each Run and each
// Capture starts its own Chromium with a fresh temporary profile (also its
// HOME and TMPDIR) and none of the caller's environment but PATH, and
// removes the profile when it returns. Every process started for it, the
// browser and its helpers, is gone when Run or Capture returns, whether it
// ended, timed out or its context was canceled.
//
// browser is a leaf: it imports no other package of snag's but atomicfile
// (its tests also use pixdiff). The daemon imports it and turns its results
// into verify outcomes; `snag capture` calls Capture.
package browser
