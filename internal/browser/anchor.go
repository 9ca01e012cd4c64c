package browser

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// anchorJS finds an anchor by selector or text, scrolls it into view and
// builds a selector for one found by text (see anchor.js).
//
//go:embed anchor.js
var anchorJS string

// maxCropSide bounds each side of a crop, in device pixels: an anchor
// larger than that (a whole page's wrapper, say) is cut to its top-left
// 4096 by 4096 pixels, so a crop stays a few megabytes.
const maxCropSide = 4096

// found is what anchor.js answers.
type found struct {
	Error    string  `json:"error"`
	Found    bool    `json:"found"`
	By       string  `json:"by"` // "selector" or "text"
	Selector string  `json:"selector"`
	Text     string  `json:"text"`
	X        float64 `json:"x"`
	Y        float64 `json:"y"`
	Width    float64 `json:"width"`
	Height   float64 `json:"height"`
}

// box returns where the element is.
func (f found) box() Box {
	return Box{X: f.X, Y: f.Y, Width: f.Width, Height: f.Height}
}

// world returns a fresh isolated world of the page's main frame: its
// scripts see the page's document but none of the page's own globals, so
// the page cannot change what they are told.
func (t *tab) world() (runtime.ExecutionContextID, error) {
	w, err := chromedp.Call(t.ctx, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: t.main, WorldName: "snag"})
	if err != nil {
		return 0, fmt.Errorf("make an isolated world: %w", err)
	}
	return w.ExecutionContextID, nil
}

// eval evaluates expr in an isolated world of the page, awaiting a promise
// it returns, and decodes its JSON value into v.
func (t *tab) eval(expr string, v any) error {
	w, err := t.world()
	if err != nil {
		return err
	}
	r, err := chromedp.Call(t.ctx, runtime.Evaluate, runtime.EvaluateParams{
		Expression:    expr,
		ContextID:     w,
		ReturnByValue: new(true),
		AwaitPromise:  new(true),
		Silent:        new(true),
	})
	if err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return errors.New(exceptionText(r.ExceptionDetails))
	}
	if r.Result == nil || len(r.Result.Value) == 0 {
		return errors.New("the script returned nothing")
	}
	return json.Unmarshal(r.Result.Value, v)
}

// call returns the JavaScript that calls the function fn with args, each
// written as JSON.
func call(fn string, args ...any) (string, error) {
	expr := "(" + fn + ")("
	for i, a := range args {
		b, err := json.Marshal(a)
		if err != nil {
			return "", err
		}
		if i > 0 {
			expr += ", "
		}
		expr += string(b)
	}
	return expr + ")", nil
}

// resolve finds the anchor by sel, else by text, scrolls it into view if it
// is not wholly in it, and says where it is. An element found by text gets
// a selector built for it; one found by sel keeps sel. Nothing found is
// not an error: the answer's Found is false.
func (t *tab) resolve(sel, text string) (found, error) {
	expr, err := call(anchorJS, sel, text)
	if err != nil {
		return found{}, err
	}
	var f found
	if err := t.eval(expr, &f); err != nil {
		return found{}, err
	}
	if f.Error != "" {
		return found{}, errors.New(f.Error)
	}
	return f, nil
}

// validSelector returns an error when sel is not a CSS selector, asking the
// page's document as it stands (before a navigation it is about:blank).
func (t *tab) validSelector(sel string) error {
	expr, err := call(`function (s) { try { document.querySelector(s); return ""; } catch (e) { return e.message; } }`, sel)
	if err != nil {
		return err
	}
	var msg string
	if err := t.eval(expr, &msg); err != nil {
		return err
	}
	if msg != "" {
		return errors.New(msg)
	}
	return nil
}

// crop takes a PNG of box, a rectangle of the page in CSS pixels, beyond
// the viewport if need be. The image has scale device pixels per CSS pixel,
// which must be the scale the viewport was set to. Each edge of the box is
// first moved to the nearest device pixel, so the crop is the box's size
// times scale give or take a pixel; each side is then cut to maxCropSide
// device pixels.
func (t *tab) crop(b Box, scale float64) ([]byte, error) {
	if scale <= 0 {
		scale = 1
	}
	left, top := math.Round(b.X*scale), math.Round(b.Y*scale)
	w := min(math.Round((b.X+b.Width)*scale)-left, maxCropSide)
	h := min(math.Round((b.Y+b.Height)*scale)-top, maxCropSide)
	if w < 1 || h < 1 {
		return nil, fmt.Errorf("the anchor is %gx%g CSS pixels, too small to crop (point at an element that shows)", b.Width, b.Height)
	}
	x, y := left/scale, top/scale
	w, h = w/scale, h/scale
	r, err := chromedp.Call(t.ctx, page.CaptureScreenshot, page.CaptureScreenshotParams{
		Format:                page.CaptureScreenshotFormatPng,
		Clip:                  &page.Viewport{X: x, Y: y, Width: w, Height: h, Scale: 1},
		FromSurface:           new(true),
		CaptureBeyondViewport: new(true),
	})
	if err != nil {
		return nil, fmt.Errorf("crop the anchor: %w", err)
	}
	return r.Data, nil
}

// screenshot takes a PNG of the viewport.
func (t *tab) screenshot() ([]byte, error) {
	r, err := chromedp.Call(t.ctx, page.CaptureScreenshot, page.CaptureScreenshotParams{
		Format:      page.CaptureScreenshotFormatPng,
		FromSurface: new(true),
	})
	if err != nil {
		return nil, fmt.Errorf("take the screenshot: %w", err)
	}
	return r.Data, nil
}
