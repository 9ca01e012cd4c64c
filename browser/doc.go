// Package browser is snag's browser verifier: it re-opens the page a task
// was captured from in headless Chromium, over the DevTools protocol, and
// says whether the console errors the person saw are still there.
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
// [Check.Shot] whenever the page got far enough to take one.
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
// # Where the browser may go
//
// Only http and https URLs whose host is one of the allowed hosts are opened
// ([CheckURL]); anything else is refused with [ErrRefused] before Chromium
// starts. While the page runs, every navigation of its main frame (a
// redirect, or a script setting location) is intercepted with the Fetch
// domain and checked the same way: a navigation off the allowed hosts is
// failed in the browser, never followed, and the outcome is [Fail] with a
// reason naming the host. Subresources (scripts, images, iframes) are not
// restricted. Pop-ups need a user gesture in Chromium's default settings and
// the verifier makes none, so a page cannot open one.
//
// # The browser process
//
// Chromium is found by [Find]: the configured path, else chromium,
// chromium-browser or google-chrome on PATH; with none, [Run] and [Find]
// return an error that wraps [ErrUnavailable]. Each Run starts its own
// Chromium with a fresh temporary profile (also its HOME and TMPDIR) and
// none of the caller's environment but PATH, and removes the profile when
// it returns. Every process started for the check, the browser and its
// helpers, is gone when Run returns, whether the check ended, timed out or
// its context was canceled.
//
// browser is a leaf: it imports no other package of snag's but atomicfile.
// The daemon imports it and turns its results into verify outcomes.
package browser
