package browser

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/chromedp/cdproto/network"
)

// Bounds on the failed requests a capture carries.
const (
	maxFailed    = 20  // entries of Captured.FailedRequests
	maxFailedURL = 500 // bytes of each entry's URL
)

// netlog follows the page's network requests, from the tab's event loop:
// which are in flight, since when none has been, and which failed. It is
// safe for concurrent use.
type netlog struct {
	mu       sync.Mutex
	inflight map[network.RequestID]*request
	order    []network.RequestID // of inflight, oldest first
	idle     time.Time           // when the last request in flight ended
	failed   []FailedRequest     // distinct, in order, at most maxFailed
}

// request is a request in flight.
type request struct {
	method, url string
	status      int64 // of its response, once one came
}

// newNetlog returns a log with nothing in flight since now.
func newNetlog() *netlog {
	return &netlog{inflight: make(map[network.RequestID]*request), idle: time.Now()}
}

// event records a network event. It runs in the tab's event loop, so it
// only does a little bookkeeping.
func (n *netlog) event(ev any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		// The browser's own requests, such as for the page's icon, are
		// not the page's. A redirect is sent again under the same id.
		if ev.Request == nil || browserOwn(ev) {
			return
		}
		if _, ok := n.inflight[ev.RequestID]; !ok {
			n.order = append(n.order, ev.RequestID)
		}
		n.inflight[ev.RequestID] = &request{method: ev.Request.Method, url: ev.Request.URL}
	case *network.EventResponseReceived:
		r, ok := n.inflight[ev.RequestID]
		if !ok || ev.Response == nil {
			return
		}
		r.status = ev.Response.Status
		if r.status >= 400 {
			n.fail(FailedRequest{Method: r.method, URL: ev.Response.URL, Status: int(r.status)})
		}
	case *network.EventLoadingFinished:
		n.end(ev.RequestID)
	case *network.EventLoadingFailed:
		r, ok := n.inflight[ev.RequestID]
		if ok && !ev.Canceled && r.status < 400 {
			n.fail(FailedRequest{Method: r.method, URL: r.url, Status: int(r.status), Error: ev.ErrorText})
		}
		n.end(ev.RequestID)
	}
}

// browserOwn reports whether a request is the browser's own, not one the
// page's HTML or scripts asked for: a request of no particular type that
// nothing in the page started, such as the one for /favicon.ico.
func browserOwn(ev *network.EventRequestWillBeSent) bool {
	return ev.Type == network.ResourceTypeOther && ev.Initiator != nil && ev.Initiator.Type == network.InitiatorTypeOther
}

// end records that request id ended. n.mu is held.
func (n *netlog) end(id network.RequestID) {
	if _, ok := n.inflight[id]; !ok {
		return
	}
	delete(n.inflight, id)
	n.order = slices.DeleteFunc(n.order, func(o network.RequestID) bool { return o == id })
	if len(n.inflight) == 0 {
		n.idle = time.Now()
	}
}

// fail records a failed request, unless the same failure is recorded
// already or there are maxFailed. n.mu is held.
func (n *netlog) fail(f FailedRequest) {
	f.URL = clip(f.URL, maxFailedURL)
	f.Error = clip(f.Error, maxErrorLen)
	if len(n.failed) < maxFailed && !slices.Contains(n.failed, f) {
		n.failed = append(n.failed, f)
	}
}

// quiet returns how many requests are in flight, the oldest of them, and
// since when none has been (meaningful when there is none).
func (n *netlog) quiet() (inflight int, oldest string, since time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.order) > 0 {
		r := n.inflight[n.order[0]]
		oldest = r.method + " " + clip(r.url, 200)
	}
	return len(n.inflight), oldest, n.idle
}

// failures returns a copy of the failed requests.
func (n *netlog) failures() []FailedRequest {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.failed)
}

// settle waits, once the page's load event has fired, for the page to
// settle by the rule of the package comment: quiet is the quiet period,
// waitFor the selector to wait for ("" for none). It returns "" when the
// page settled or a navigation was refused (the caller asks rec), and
// otherwise, when ctx ends, what the page was still doing, for an error.
// ctx is the page's chromedp context, with the deadline of the wait.
func settle(ctx context.Context, net *netlog, rec *recorder, quiet time.Duration, waitFor string) string {
	loaded := time.Now()
	var matched time.Time // when waitFor first matched, of late
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if rec.refused() != "" {
			return ""
		}
		now := time.Now()
		n, oldest, since := net.quiet()
		idle := n == 0 && now.Sub(later(since, loaded)) >= quiet
		if waitFor == "" {
			if idle {
				return ""
			}
		} else if ok, _ := findAnchor(ctx, waitFor); ok {
			if matched.IsZero() {
				matched = now
			}
			if idle || now.Sub(matched) >= quiet {
				return ""
			}
		} else {
			matched = time.Time{}
		}
		select {
		case <-ctx.Done():
			switch {
			case waitFor != "" && matched.IsZero():
				return fmt.Sprintf("no element matched %q", clip(waitFor, 100))
			case n > 0:
				return inflight(n, oldest)
			default:
				return fmt.Sprintf("its last request had ended less than %s before", quiet)
			}
		case <-tick.C:
		}
	}
}

// inflight says that n requests, the oldest of them oldest, were still in
// flight, for an error.
func inflight(n int, oldest string) string {
	if n == 1 {
		return "1 request was still in flight: " + oldest
	}
	return fmt.Sprintf("%d requests were still in flight, the oldest %s", n, oldest)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
