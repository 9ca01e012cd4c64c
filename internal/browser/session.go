package browser

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// launch is how Run and Capture start: it refuses raw unless [CheckURL]
// allows it, finds the browser, makes a fresh profile folder and calls f
// with the browser's path, that folder and the folder for the browser's
// TMPDIR. When f returns, every process whose command line names the
// profile is killed and both folders are removed, even when ctx was
// canceled; an error removing them is returned if f returned none.
func launch(ctx context.Context, chromium, raw string, allowed []string, f func(exe, dir, tmp string) error) (err error) {
	if err := CheckURL(raw, allowed); err != nil {
		return err
	}
	exe, err := Find(chromium)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "snag-chromium-")
	if err != nil {
		return fmt.Errorf("browser: make a temporary profile: %w (check that TMPDIR is writable)", err)
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
	return f(exe, dir, tmp)
}

// job says what a tab is opened for, in the words of its errors.
type job struct {
	op    string // "check" or "capture"
	retry string // what to do when the browser was too slow to start
}

var (
	checkJob   = job{op: "check", retry: "verify again, or give the check more time"}
	captureJob = job{op: "capture", retry: "capture again, or pass a longer --timeout"}
)

// tab is a headless Chromium with one page, whose main-frame navigations
// are guarded. Close stops the guard; the browser itself stops when the
// context open was given ends.
type tab struct {
	ctx  context.Context // the page's chromedp context
	main cdp.FrameID     // the page's main frame
	stop func()          // stops the guard and the browser, and waits for both
}

// open starts the browser at exe, with its profile in dir and its TMPDIR in
// tmp, for as long as ctx lasts, and opens a page in it. Each of listeners
// gets every event of the page from before its first navigation; rec also
// records the navigations the guard refuses, which are those of the main
// frame to a URL that CheckURL refuses with allowed. parent is the
// caller's context, for telling its end from ctx's timeout; raw and timeout
// are for the errors. Call stop when done.
func open(parent, ctx context.Context, j job, exe, dir, tmp, raw string, timeout time.Duration, allowed []string, rec *recorder, listeners ...func(ev any)) (*tab, error) {
	var out capped
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, allocatorOptions(exe, dir, tmp, &out)...)
	tctx, cancelTab := chromedp.NewContext(actx)
	// cancelTab stops the browser and waits for it.
	stopBrowser := func() { cancelTab(); cancelAlloc() }
	if err := chromedp.Do(tctx); err != nil {
		stopBrowser()
		if parent.Err() != nil {
			return nil, fmt.Errorf("browser: %s %s: %w", j.op, raw, parent.Err())
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("browser: start %s: it did not answer within the %s timeout (a busy machine? %s): %w", exe, timeout, j.retry, ErrUnavailable)
		}
		msg := err.Error()
		if o := out.String(); o != "" && !strings.Contains(msg, o) {
			msg += "; chromium said: " + o
		}
		msg = strings.Join(strings.Fields(msg), " ")
		return nil, fmt.Errorf("browser: start %s: %s: %w", exe, clip(msg, 1000), ErrUnavailable)
	}
	trace("started")

	for _, l := range append([]func(any){rec.event}, listeners...) {
		if err := chromedp.Listen(tctx, l); err != nil {
			stopBrowser()
			return nil, fmt.Errorf("browser: listen to the page: %w", err)
		}
	}
	// The main frame of a page target has the target's id.
	main := cdp.FrameID(chromedp.FromContext(tctx).Target.TargetID)
	gctx, stopGuard := context.WithCancel(tctx)
	paused := chromedp.Events(gctx, fetch.RequestPaused)
	guarded := make(chan struct{})
	go func() {
		defer close(guarded)
		guard(gctx, paused, main, allowed, rec)
	}()
	t := &tab{ctx: tctx, main: main, stop: func() { stopGuard(); <-guarded; stopBrowser() }}
	docs := []*fetch.RequestPattern{{ResourceType: network.ResourceTypeDocument}}
	if _, err := chromedp.Call(tctx, fetch.Enable, fetch.EnableParams{Patterns: docs}); err != nil {
		t.stop()
		if parent.Err() != nil {
			return nil, fmt.Errorf("browser: %s %s: %w", j.op, raw, parent.Err())
		}
		return nil, fmt.Errorf("browser: intercept navigations: %v: %w", err, ErrUnavailable)
	}
	return t, nil
}

// emulate sets the page's viewport to v, a resolved [Viewport].
func (t *tab) emulate(v Viewport) error {
	_, err := chromedp.Call(t.ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
		Width:             int64(v.Width),
		Height:            int64(v.Height),
		DeviceScaleFactor: v.Scale,
	})
	if err != nil {
		return fmt.Errorf("set the viewport to %s: %w", v, err)
	}
	return nil
}
