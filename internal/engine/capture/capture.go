// Package capture makes a person's capture (a screenshot of a page and
// what they say of it, from snag capture or the browser extension) an
// unvetted task: it checks the capture's bounds, decodes its pictures
// (one capture at a time), cuts the anchor out of the page, writes the
// pictures into .snag/shots/ and the task through the engine's Add.
//
// It uses the engine over the small seam it declares (Engine), and must
// not import a transport (net/http, the daemon, mcp, the client, the
// board, the CLI) nor another service of the engine.
package capture

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/snagdev/snag/internal/atomicfile"
	"github.com/snagdev/snag/internal/browser"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/pixdiff"
	"github.com/snagdev/snag/internal/queue"
)

// Bounds of a capture ([Service.Add]).
const (
	// MaxShotBytes bounds each image of a capture, as PNG bytes.
	MaxShotBytes = 8 << 20
	// MaxShotDecoded bounds each image's decoded size in bytes (its
	// pixels times their depth), read from its header before it is
	// decoded: a small PNG of many 16-bit pixels is refused.
	MaxShotDecoded = pixdiff.DefaultMaxBytes
	maxCaptureURL  = 4096
	maxSelector    = 1024
	maxAnchorText  = 200
	maxPageTitle   = 300
	maxUserAgent   = 500
	maxNote        = 64 << 10
	maxCaptured    = 20  // console and network errors, each
	maxErrorText   = 500 // bytes of each
)

// Capture is what a capture brings: the page as a person saw it, the
// element pointed at, what went wrong, and the pictures. snag capture
// and the browser extension send it through POST /captures.
type Capture struct {
	URL       string
	Title     string // the page's
	Viewport  *queue.Viewport
	UserAgent string
	// Selector, AnchorText and Box are the anchor: the element the person
	// pointed at, its text, and its box in CSS pixels of the page. Scroll
	// is where the page was scrolled to when Screenshot was taken, to cut
	// the anchor out of it when no Crop comes.
	Selector, AnchorText string
	Box                  *queue.Box
	Scroll               image.Point
	ConsoleErrors        []string
	NetworkErrors        []string
	// Screenshot is the page as seen, a PNG; Crop the anchor's pixels, a
	// PNG, else cut from Screenshot by Box.
	Screenshot, Crop []byte
	// Note is what the person says; its first line is the task's title
	// unless Summary is given.
	Note, Summary  string
	Kind           queue.Kind
	Severity       queue.Severity
	Files          []queue.FileRef
	AllowWiderHost bool // the person widened the allowed hosts for this one capture
}

// Engine is what the service needs of the engine: its Add, the move
// that writes a new task, and the project's configuration (the hosts a
// capture may come from). *engine.Engine satisfies it.
type Engine interface {
	Add(ctx context.Context, nt engine.NewTask, actor queue.Actor, who string) (*queue.Task, string, error)
	Config() queue.Config
}

// Service makes captures tasks. It is safe for concurrent use: one
// capture's pictures are decoded at a time.
type Service struct {
	e     Engine
	shots string     // the folder the pictures go in, .snag/shots/
	mu    sync.Mutex // captures' images are decoded one capture at a time (up to 160 MB each)
}

// New returns the capture service of the engine e, writing pictures into
// the folder shots (the project's .snag/shots/).
func New(e Engine, shots string) *Service {
	return &Service{e: e, shots: shots}
}

// Add makes a capture an inbox task: unvetted, source: capture, its
// pictures in .snag/shots/ named by the task's id. Nothing is written
// unless all of it is good: each bound it breaks is refused with what to
// change.
func (s *Service) Add(ctx context.Context, c Capture, who string) (*queue.Task, string, error) {
	if err := s.check(&c); err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	shot, err := decodeShot("screenshot", c.Screenshot)
	if err != nil {
		return nil, "", err
	}
	var crop image.Image
	switch {
	case len(c.Crop) > 0:
		if crop, err = decodeShot("crop", c.Crop); err != nil {
			return nil, "", err
		}
	case c.Box != nil:
		crop = cutAnchor(shot, *c.Box, c.Scroll, scaleOf(c.Viewport))
	}
	id := queue.NewID(time.Now())
	shots := s.shots
	if err := os.MkdirAll(shots, 0o755); err != nil {
		return nil, "", fmt.Errorf("capture: make .snag/shots: %w", err)
	}
	pageName := id + "-page.png"
	written := []string{filepath.Join(shots, pageName)}
	defer func() {
		for _, p := range written { // removed again unless the task was made
			os.Remove(p)
		}
	}()
	if err := atomicfile.WriteFile(written[0], c.Screenshot, 0o644); err != nil {
		return nil, "", fmt.Errorf("capture: write the screenshot: %w", err)
	}
	qc := &queue.Capture{URL: c.URL, Title: c.Title, Viewport: c.Viewport, UserAgent: c.UserAgent,
		Anchor: c.Selector, AnchorText: c.AnchorText, AnchorBox: c.Box,
		ConsoleErrors: c.ConsoleErrors, NetworkErrors: c.NetworkErrors, Screenshots: []string{"shots/" + pageName}}
	if c.Scroll != (image.Point{}) {
		qc.Scroll = &queue.Point{X: float64(c.Scroll.X), Y: float64(c.Scroll.Y)}
	}
	if crop != nil {
		var b bytes.Buffer
		if len(c.Crop) > 0 {
			b.Write(c.Crop)
		} else if err := pixdiff.EncodePNG(&b, crop); err != nil {
			return nil, "", fmt.Errorf("capture: encode the anchor's crop: %w", err)
		}
		cropName := id + "-anchor.png"
		written = append(written, filepath.Join(shots, cropName))
		if err := atomicfile.WriteFile(written[1], b.Bytes(), 0o644); err != nil {
			return nil, "", fmt.Errorf("capture: write the anchor's crop: %w", err)
		}
		qc.Crop = "shots/" + cropName
	}
	nt := engine.NewTask{Title: captureTitle(c), Body: []byte(captureBody(c)), Kind: c.Kind, Severity: c.Severity,
		Files: c.Files, Capture: qc, Source: queue.SourceCapture, ID: id}
	t, path, err := s.e.Add(ctx, nt, queue.Tool, who)
	if err != nil {
		return nil, "", err
	}
	written = nil
	return t, path, nil
}

// check refuses a capture that breaks a bound, and clips the lists of
// errors to what a person reads.
func (s *Service) check(c *Capture) error {
	bad := func(code, format string, args ...any) error {
		return refuse(engine.ErrInvalid, code, "capture: "+format, args...)
	}
	c.URL = strings.TrimSpace(c.URL)
	switch {
	case c.URL == "":
		return bad("bad_url", "no url: send the page's address, http or https")
	case len(c.URL) > maxCaptureURL:
		return bad("bad_url", "the url is over %d bytes: send the page's address without its long query", maxCaptureURL)
	}
	u, err := url.Parse(c.URL)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return bad("bad_url", "%q is not an http or https address: capture a page served over http(s)", queue.Clip(c.URL, 80))
	}
	cfg := s.e.Config()
	if err := browser.CheckURL(c.URL, cfg.Browser.AllowedHosts); err != nil && !c.AllowWiderHost {
		return bad("host_not_allowed", "%v; add the host to browser.allowed_hosts in .snag/config.json (or pass --allow-host to snag capture) if its pages are yours to check", err)
	}
	switch {
	case len(c.Selector) > maxSelector:
		return bad("bad_anchor", "the anchor's selector is %d bytes, over %d: point at the element again, or give a shorter selector", len(c.Selector), maxSelector)
	case strings.ContainsAny(c.Selector, "\x00\n\r"):
		return bad("bad_anchor", "the anchor's selector has a control character: give a CSS selector on one line")
	case len(c.Title) > maxPageTitle || len(c.UserAgent) > maxUserAgent:
		return bad("bad_capture", "the page's title or user agent is too long (over %d or %d bytes)", maxPageTitle, maxUserAgent)
	case len(c.Note) > maxNote:
		return bad("long_body", "the note is over %d KiB: put the long part in the task's file once it is made", maxNote>>10)
	case len(c.Screenshot) == 0:
		return bad("no_screenshot", "no screenshot: a capture sends the page as a PNG")
	case len(c.Screenshot) > MaxShotBytes || len(c.Crop) > MaxShotBytes:
		return &engine.Error{Kind: engine.ErrTooLarge, Code: "too_large", Message: fmt.Sprintf("capture: a screenshot is over %d MiB: capture a smaller window, or the element alone", MaxShotBytes>>20)}
	}
	if v := c.Viewport; v != nil {
		if v.Scale == 0 {
			v.Scale = 1
		}
		if v.Width < 1 || v.Height < 1 || v.Width > 100_000 || v.Height > 100_000 || !(v.Scale > 0 && v.Scale <= 10) {
			return bad("bad_viewport", "viewport %dx%d at scale %g: send the window's size in CSS pixels and its device pixel ratio", v.Width, v.Height, v.Scale)
		}
	}
	if b := c.Box; b != nil {
		if !finite(b.X, b.Y, b.Width, b.Height) || b.Width < 0 || b.Height < 0 || math.Abs(b.X) >= 1e6 || math.Abs(b.Y) >= 1e6 || b.Width >= 1e6 || b.Height >= 1e6 {
			return bad("bad_anchor", "the anchor's box is not a rectangle on the page: send x, y, width and height in CSS pixels")
		}
	}
	c.AnchorText = queue.Clip(oneLine(c.AnchorText), maxAnchorText)
	c.Title = oneLine(c.Title)
	c.ConsoleErrors = clipList(c.ConsoleErrors)
	c.NetworkErrors = clipList(c.NetworkErrors)
	return nil
}

// decodeShot reads a capture's PNG, refusing anything else, and an image
// over MaxShotDecoded before it is decoded.
func decodeShot(what string, data []byte) (image.Image, error) {
	img, err := pixdiff.DecodePNG(bytes.NewReader(data), MaxShotDecoded)
	switch {
	case errors.Is(err, pixdiff.ErrNotPNG):
		return nil, refuse(engine.ErrInvalid, "not_png", "capture: the %s is not a PNG image: send what the browser's screenshot gave, as PNG", what)
	case errors.Is(err, pixdiff.ErrTooLarge):
		// The header's size and depth, and the limit: the fix follows.
		why := strings.TrimPrefix(err.Error(), "pixdiff: decode png: "+pixdiff.ErrTooLarge.Error()+": ")
		return nil, &engine.Error{Kind: engine.ErrTooLarge, Code: "too_large", Message: fmt.Sprintf("capture: the %s is too large: %s", what, why)}
	case err != nil:
		return nil, refuse(engine.ErrInvalid, "bad_png", "capture: the %s: %v", what, err)
	}
	return img, nil
}

// DecodeImageData reads an image sent in JSON: base64, with or without a
// data: URL's header.
func DecodeImageData(s string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(s, "data:"); ok {
		head, data, found := strings.Cut(rest, ",")
		if !found || !strings.HasSuffix(head, ";base64") {
			return nil, refuse(engine.ErrInvalid, "not_png", "capture: an image's data URL must be base64 (data:image/png;base64,...)")
		}
		s = data
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, refuse(engine.ErrInvalid, "not_png", "capture: an image is not base64: send the PNG's bytes in standard base64")
	}
	return b, nil
}

// cutAnchor cuts the anchor's box out of the screenshot: the box is in CSS
// pixels of the page, the screenshot the window scrolled to scroll, at
// scale device pixels a CSS pixel. It is nil when the box is not on it.
func cutAnchor(shot image.Image, box queue.Box, scroll image.Point, scale float64) image.Image {
	r := image.Rect(
		int(math.Floor((box.X-float64(scroll.X))*scale)), int(math.Floor((box.Y-float64(scroll.Y))*scale)),
		int(math.Ceil((box.X+box.Width-float64(scroll.X))*scale)), int(math.Ceil((box.Y+box.Height-float64(scroll.Y))*scale)),
	).Add(shot.Bounds().Min).Intersect(shot.Bounds())
	if r.Empty() {
		return nil
	}
	out := image.NewNRGBA(image.Rect(0, 0, r.Dx(), r.Dy()))
	draw.Draw(out, out.Bounds(), shot, r.Min, draw.Src)
	return out
}

// captureTitle is the task's title: the summary, else the note's first
// line, else the page's title or address.
func captureTitle(c Capture) string {
	for _, s := range []string{c.Summary, firstLine(c.Note)} {
		if s = strings.TrimSpace(s); s != "" {
			return queue.Clip(s, 120)
		}
	}
	if c.Title != "" {
		return queue.Clip("Captured on "+c.Title, 120)
	}
	return queue.Clip("Captured on "+c.URL, 120)
}

// captureBody is the task's body: the person's note, less its first line
// when that became the title, and where the capture was made.
func captureBody(c Capture) string {
	note := strings.TrimSpace(c.Note)
	if strings.TrimSpace(c.Summary) == "" {
		_, rest, _ := strings.Cut(note, "\n")
		note = strings.TrimSpace(rest)
	}
	where := "Captured from " + c.URL
	if v := c.Viewport; v != nil {
		where += fmt.Sprintf(" in a %d × %d window", v.Width, v.Height)
		if v.Scale != 1 {
			where += fmt.Sprintf(" at %g×", v.Scale)
		}
	}
	where += "."
	if note == "" {
		return where
	}
	return note + "\n\n" + where
}

func scaleOf(v *queue.Viewport) float64 {
	if v == nil || v.Scale <= 0 {
		return 1
	}
	return v.Scale
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// oneLine turns control characters into spaces.
func oneLine(s string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "")))
}

// clipList keeps the first maxCaptured entries, each on one line and at
// most maxErrorText bytes.
func clipList(in []string) []string {
	var out []string
	for _, s := range in {
		if s = queue.Clip(oneLine(s), maxErrorText); s != "" && len(out) < maxCaptured {
			out = append(out, s)
		}
	}
	return out
}

// refuse makes a refusal of kind with code and a formatted message.
func refuse(kind error, code, format string, args ...any) *engine.Error {
	return &engine.Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

func finite(fs ...float64) bool {
	for _, f := range fs {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
	}
	return true
}
