package board

import (
	"fmt"
	"image/png"
	"math"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/queue"
)

// This file is what the board makes of a capture (the page, the element a
// person pointed at, what went wrong there) and of a visual verify (the
// element's pixels before, after and what changed), for the task's page
// and the inbox review.

// Picture is an image of .snag/shots/ as a page draws it: its address on
// the board and its size in CSS pixels of the page it shows (its pixels
// over the viewport's scale). Width and Height are 0 when the file's
// header could not be read: the page then draws it at its own size.
type Picture struct {
	URL           string
	Width, Height int
}

// Fit is the picture shrunk (never grown) to fit in w by h, keeping its
// shape: a thumbnail's size.
func (p Picture) Fit(w, h int) Picture {
	if p.Width <= 0 || p.Height <= 0 {
		return p
	}
	f := min(1, float64(w)/float64(p.Width), float64(h)/float64(p.Height))
	p.Width, p.Height = max(1, int(math.Round(float64(p.Width)*f))), max(1, int(math.Round(float64(p.Height)*f)))
	return p
}

// Outline is where the captured element stands on the page's screenshot,
// in CSS pixels: the screenshot is View wide and tall, the element's box
// is X, Y, W, H from its top left. The page draws it as an SVG over the
// image whose viewBox is the screenshot's size, so it scales with the
// image as the window does: rendered width over the viewport's width.
type Outline struct {
	ViewW, ViewH float64
	X, Y, W, H   float64
}

// CaptureView is a captured task as its page shows it: the page's
// screenshot with the element outlined on it, the element's crop, and
// what the capture recorded, all of it unvetted data from the page.
type CaptureView struct {
	*queue.Capture
	// Shot is the page's screenshot (the first of the capture's); Crop
	// the element's pixels as captured. Either may be nil.
	Shot, Crop *Picture
	// Outline is where the element is drawn over Shot; nil when it is not.
	Outline *Outline
	// Fold, when set, says the element was below the part of the page
	// the screenshot shows, and where.
	Fold string
	// NoOutline, when set, says why the element is not outlined for a
	// reason other than the fold: no viewport or box was recorded, or the
	// screenshot cannot be read.
	NoOutline string
}

// Window says the window the capture was taken in: "1024 × 640 CSS px
// at 2×".
func (c CaptureView) Window() string {
	v := c.Capture.Viewport
	if v == nil || v.Width <= 0 {
		return ""
	}
	s := fmt.Sprintf("%d × %d CSS px", v.Width, v.Height)
	if v.Scale > 0 && v.Scale != 1 {
		s += " at " + strconv.FormatFloat(v.Scale, 'f', -1, 64) + "×"
	}
	return s
}

// Box says where the element was on the page: "at 40, 530, 60 × 20 CSS px".
func (c CaptureView) Box() string {
	b := c.AnchorBox
	if b == nil {
		return ""
	}
	n := func(f float64) string { return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64) }
	return fmt.Sprintf("at %s, %s, %s × %s CSS px", n(b.X), n(b.Y), n(b.Width), n(b.Height))
}

// Element names the element for a caption: its selector, else its text.
func (c CaptureView) Element() string {
	if c.Anchor != "" {
		return c.Anchor
	}
	return c.AnchorText
}

// VisualView is a visual verify's comparison as the task's page shows it:
// the element before (as captured), after (as the run found it) and what
// changed, with the changed figure.
type VisualView struct {
	Before, After, Diff *Picture
	api.Visual
	// At is when the run that compared ended; Outcome is how it ended.
	At      time.Time
	Outcome string
	// Decide: the task waits in needs_review for a person, whose Resolve
	// and Reopen stand beside the pictures.
	Decide bool
}

// Figure says in words how much of the element changed.
func (v VisualView) Figure() string { return visualFigure(&v.Visual) }

// visualFigure says how much of the element changed: "12.5% of the
// element's pixels changed", or "looks exactly as captured".
func visualFigure(v *api.Visual) string {
	if v == nil {
		return ""
	}
	if v.Identical {
		return "The element looks exactly as captured"
	}
	return percent(v.Changed) + " of the element's pixels changed"
}

// percent writes a fraction as a percentage a person reads at a glance:
// one decimal at most, never rounded to 0% or 100% when it is not.
func percent(f float64) string {
	p := f * 100
	switch {
	case p <= 0:
		return "0%"
	case p < 0.1:
		return "under 0.1%"
	case p >= 100:
		return "100%"
	case p > 99.9:
		return "over 99.9%"
	}
	return strconv.FormatFloat(math.Round(p*10)/10, 'f', -1, 64) + "%"
}

// shots reads the pictures of .snag/shots/ a page draws: their sizes come
// from their PNG headers, read through an os.Root of the folder (no file
// outside it, no symlink).
type shots struct {
	root *os.Root
}

// openShots opens the folder of pictures; a folder that cannot be opened
// gives pictures with no size.
func openShots(dir string) shots {
	root, _ := os.OpenRoot(dir)
	return shots{root: root}
}

// Close closes the folder.
func (s shots) Close() {
	if s.root != nil {
		s.root.Close()
	}
}

// picture is the picture at rel (relative to .snag/, "shots/<name>"),
// its size in CSS pixels at the scale given; nil when rel is not a
// picture the board serves.
func (s shots) picture(rel string, scale float64) *Picture {
	name, ok := strings.CutPrefix(path.Clean(rel), "shots/")
	if !ok || !shotName.MatchString(name) {
		return nil
	}
	p := &Picture{URL: "/board/shots/" + url.PathEscape(name)}
	w, h := s.size(name)
	if w > 0 && h > 0 {
		if scale <= 0 {
			scale = 1
		}
		p.Width, p.Height = max(1, int(math.Round(float64(w)/scale))), max(1, int(math.Round(float64(h)/scale)))
	}
	return p
}

// size reads a PNG's size in pixels from its header; 0, 0 when it cannot.
func (s shots) size(name string) (int, int) {
	if s.root == nil || !strings.HasSuffix(name, ".png") {
		return 0, 0
	}
	fi, err := s.root.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() {
		return 0, 0
	}
	f, err := s.root.Open(name)
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		return 0, 0
	}
	return cfg.Width, cfg.Height
}

// scaleOf is a capture's device scale: 1 when it recorded none.
func scaleOf(c *queue.Capture) float64 {
	if c != nil && c.Viewport != nil && c.Viewport.Scale > 0 {
		return c.Viewport.Scale
	}
	return 1
}

// captureView makes the view of a task's capture. The screenshot is the
// window as the person saw it and the element's box is in CSS pixels of
// the page; the box is placed on the screenshot less the capture's scroll
// (none kept: the page's top), and outlined only when it starts inside
// the window. Else the page says where the element was, and its crop
// beside the screenshot shows it.
func (s shots) captureView(c *queue.Capture) *CaptureView {
	scale := scaleOf(c)
	v := &CaptureView{Capture: c}
	if len(c.Screenshots) > 0 {
		v.Shot = s.picture(c.Screenshots[0], scale)
	}
	if c.Crop != "" {
		v.Crop = s.picture(c.Crop, scale)
	}
	if v.Shot == nil {
		return v
	}
	vp, box := c.Viewport, c.AnchorBox
	switch {
	case box == nil:
		if c.Anchor != "" || c.AnchorText != "" {
			v.NoOutline = "The capture recorded no box for the element, so it is not outlined."
		}
	case vp == nil || vp.Width <= 0:
		v.NoOutline = "The capture recorded no viewport, so the element cannot be placed on the screenshot."
	case v.Shot.Width <= 0 || v.Shot.Height <= 0:
		v.NoOutline = "The screenshot's size cannot be read, so the element is not outlined."
	default:
		// The screenshot is the viewport's width in CSS pixels; its height
		// follows from the image's shape.
		view := Outline{ViewW: float64(vp.Width), ViewH: float64(vp.Width) * float64(v.Shot.Height) / float64(v.Shot.Width)}
		v.Shot.Width, v.Shot.Height = vp.Width, max(1, int(math.Round(view.ViewH)))
		px := func(f float64) string { return strconv.FormatFloat(math.Round(f), 'f', -1, 64) }
		crop := "its crop shows it"
		if v.Crop == nil {
			crop = "no crop of it was captured"
		}
		var sx, sy float64
		if c.Scroll != nil {
			sx, sy = c.Scroll.X, c.Scroll.Y
		}
		x, y := box.X-sx, box.Y-sy
		switch {
		case y >= view.ViewH:
			v.Fold = fmt.Sprintf("The element was below the fold: it starts %s px down the page, and the window showed %s px from %s. It is not outlined; %s.",
				px(box.Y), px(view.ViewH), px(sy), crop)
		case y+box.Height <= 0:
			v.Fold = fmt.Sprintf("The element was above the window: it ends %s px down the page, and the window was scrolled to %s px. It is not outlined; %s.",
				px(box.Y+box.Height), px(sy), crop)
		case x >= view.ViewW || x+box.Width <= 0:
			v.Fold = fmt.Sprintf("The element was beside the window: it starts %s px from the page's left edge, and the window showed %s px from %s. It is not outlined; %s.",
				px(box.X), px(view.ViewW), px(sx), crop)
		default:
			view.X, view.Y, view.W, view.H = x, y, box.Width, box.Height
			v.Outline = &view
		}
	}
	return v
}

// visualView makes the view of the latest visual comparison of a task:
// the newest run that compared pixels, else the verify state's.
func (s shots) visualView(st *api.VerifyState, c *queue.Capture, status queue.Status) *VisualView {
	var v *VisualView
	for _, run := range st.History {
		if run.Visual != nil {
			v = &VisualView{Visual: *run.Visual, At: run.Ended, Outcome: run.Outcome}
			break
		}
	}
	if v == nil && st.Visual != nil {
		v = &VisualView{Visual: *st.Visual, At: st.LastAt, Outcome: st.Outcome}
	}
	if v == nil {
		return nil
	}
	scale := scaleOf(c)
	v.Before, v.After = s.picture(v.Visual.Before, scale), s.picture(v.Visual.After, scale)
	if v.Visual.Diff != "" {
		v.Diff = s.picture(v.Visual.Diff, scale)
	}
	v.Decide = status == queue.StatusNeedsReview
	return v
}

// thumb is an inbox item's picture: the element's crop, else the page's
// screenshot (to load lazily), shrunk to a thumbnail; and its alt text.
func (s shots) thumb(c *queue.Capture) (_ *Picture, alt string, lazy bool) {
	if c == nil {
		return nil, "", false
	}
	scale := scaleOf(c)
	if c.Crop != "" {
		if p := s.picture(c.Crop, scale); p != nil {
			f := p.Fit(thumbW, thumbH)
			return &f, "the element captured", false
		}
	}
	for _, sh := range c.Screenshots {
		if p := s.picture(sh, scale); p != nil {
			f := p.Fit(thumbW, thumbH)
			return &f, "the page captured", true
		}
	}
	return nil, "", false
}

// The largest size of an inbox item's thumbnail, in CSS pixels.
const thumbW, thumbH = 160, 120
