package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/layout"
	"github.com/snagdev/snag/internal/queue"
)

func init() {
	register(&command{
		name: "capture", daemon: true, raw: true,
		args: "URL [--anchor SELECTOR | --anchor-text TEXT] [--note TEXT] [--kind K] [--severity S] [--wait-for SELECTOR] " +
			"[--viewport WxH[@SCALE]] [--file PATH[:A-B]]... [--allow-host] [--timeout 30s] [--json]",
		summary: "Capture a page into the inbox: its errors, a screenshot and the element you name. Prints the new alias.\n\n" +
			"Headless Chromium opens URL, waits for it to settle, and takes its console errors, failed requests, a\n" +
			"screenshot and the element you name (its selector, text, box and pixels). The task is unvetted until a\n" +
			"person promotes it; verify compares the element's pixels again.",
		run: runCapture,
	})
}

// captureFlags are snag capture's flags.
type captureFlags struct {
	anchor, anchorText, note, kind, severity, waitFor, viewport string
	files                                                       multi
	allowHost, json                                             bool
	timeout                                                     time.Duration
}

func (f *captureFlags) register(fs *flag.FlagSet, c *call) {
	fs.StringVar(&f.anchor, "anchor", "", "the element's CSS selector")
	fs.StringVar(&f.anchorText, "anchor-text", "", "the element's text, when it has no selector worth keeping")
	fs.StringVar(&f.note, "note", "", "what is wrong, in your words: its first line is the task's title")
	fs.StringVar(&f.kind, "kind", "", "kind: "+joinEnum(queue.Kinds)+" (default bug)")
	fs.StringVar(&f.severity, "severity", "", "severity: "+joinEnum(queue.Severities)+" (default medium)")
	fs.StringVar(&f.waitFor, "wait-for", "", "a CSS selector the page must show before it counts as settled")
	fs.StringVar(&f.viewport, "viewport", "1280x800", "the window: WIDTHxHEIGHT, optionally @SCALE (390x844@3)")
	fs.Var(&f.files, "file", "a suspect file, path or path:A-B (repeatable)")
	fs.BoolVar(&f.allowHost, "allow-host", false, "open URL's host though it is not on browser.allowed_hosts (for this capture only)")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "give up when the page has not settled by then")
	fs.BoolVar(&f.json, "json", false, "print the new task as JSON")
	fs.BoolVar(&c.opt.noAutostart, "no-autostart", false, "fail rather than start snagd when none answers")
}

func runCapture(ctx context.Context, c *call) error {
	var f captureFlags
	fs := flag.NewFlagSet("capture", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs, c)
	// Flags may come before or after the URL.
	var pos []string
	for args := c.rawArgs; ; {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				fs.SetOutput(c.Stdout)
				fmt.Fprintf(c.Stdout, "usage: snag capture %s\n\n%s\n\n", c.cmd.args, c.cmd.summary)
				fs.PrintDefaults()
				return nil
			}
			return usagef("capture: %v", err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	if len(pos) != 1 {
		return usagef("capture takes one URL: snag capture http://localhost:3000/checkout --anchor '#pay' --note 'Pay does nothing'")
	}
	job := CaptureJob{URL: pos[0], AnchorSelector: f.anchor, AnchorText: f.anchorText, WaitFor: f.waitFor,
		AllowHost: f.allowHost, Timeout: f.timeout}
	if u, err := url.Parse(job.URL); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return usagef("capture: %q is not an http or https address", job.URL)
	}
	if f.anchor != "" && f.anchorText != "" {
		return usagef("capture: give --anchor or --anchor-text, not both")
	}
	if f.timeout <= 0 {
		return usagef("capture: --timeout must be above zero")
	}
	vp, err := parseViewport(f.viewport)
	if err != nil {
		return usagef("capture: --viewport: %v", err)
	}
	job.Viewport = vp
	req := api.CaptureRequest{Note: f.note, Files: f.files, By: who()}
	if f.kind != "" {
		k, err := parseEnum("kind", f.kind, queue.Kinds)
		if err != nil {
			return err
		}
		req.Kind = string(k)
	}
	if f.severity != "" {
		sev, err := parseEnum("severity", f.severity, queue.Severities)
		if err != nil {
			return err
		}
		req.Severity = string(sev)
	}
	for _, p := range f.files {
		if _, err := queue.ParseFileRef(p); err != nil {
			return usagef("capture: --file: %v", err)
		}
	}
	root, err := layout.Find(c.Dir)
	if err != nil {
		return err
	}
	job.Root = root
	full, err := c.full()
	if err != nil {
		return err
	}
	if isTerminal(c.Stderr) && !f.json {
		// A capture takes seconds, a page that never settles its whole
		// timeout: say what runs, before the wait.
		fmt.Fprintf(c.Stderr, "snag capture: headless Chromium opens %s and waits for it to settle (at most %s)\n", safe(job.URL), job.Timeout)
	}
	start := time.Now()
	page, err := full.Capture(ctx, job)
	if err != nil {
		return fmt.Errorf("capture %s: %w", job.URL, err)
	}
	took := time.Since(start)
	page.Note, page.Kind, page.Severity, page.Files, page.By = req.Note, req.Kind, req.Severity, req.Files, req.By
	r, err := connect(ctx, c, true)
	if err != nil {
		return err
	}
	got, err := r.cl.Capture(ctx, page)
	if err != nil {
		return said(err)
	}
	if f.json {
		return writeJSON(c.Stdout, struct {
			ID         string `json:"id"`
			Key        string `json:"key"`
			Path       string `json:"path"`
			Screenshot string `json:"screenshot"`
			Crop       string `json:"crop,omitempty"`
		}{got.ID, got.Key, got.Path, ".snag/" + got.Screenshot, dotSnag(got.Crop)})
	}
	fmt.Fprintln(c.Stdout, got.Key)
	fmt.Fprintf(c.Stderr, "captured %s in %s: %s, %s%s; %s is in the inbox, unvetted\n", page.URL, took.Round(10*time.Millisecond),
		count(len(page.ConsoleErrors), "console error", "console errors"), count(len(page.NetworkErrors), "failed request", "failed requests"), anchorSaid(page.Anchor), got.Key)
	return nil
}

// parseViewport reads WIDTHxHEIGHT with an optional @SCALE.
func parseViewport(s string) (queue.Viewport, error) {
	size, scale, hasScale := strings.Cut(s, "@")
	w, h, ok := strings.Cut(size, "x")
	v := queue.Viewport{Scale: 1}
	var err1, err2, err3 error
	v.Width, err1 = strconv.Atoi(w)
	v.Height, err2 = strconv.Atoi(h)
	if hasScale {
		v.Scale, err3 = strconv.ParseFloat(scale, 64)
	}
	if !ok || err1 != nil || err2 != nil || err3 != nil || v.Width < 1 || v.Height < 1 || v.Width > 10000 || v.Height > 10000 || !(v.Scale > 0 && v.Scale <= 4) {
		return v, fmt.Errorf("%q: want WIDTHxHEIGHT in CSS pixels, optionally @SCALE from above 0 to 4 (1280x800, 390x844@3)", s)
	}
	return v, nil
}

func anchorSaid(a *api.CaptureAnchor) string {
	if a == nil || a.Box == nil {
		return ""
	}
	return fmt.Sprintf(", the element %s (%gx%g)", a.Selector, a.Box.Width, a.Box.Height)
}

func dotSnag(p string) string {
	if p == "" {
		return ""
	}
	return ".snag/" + p
}
