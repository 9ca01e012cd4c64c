package board_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/queue"
)

// fill is a rectangle of a picture and its colour.
type fill struct {
	r image.Rectangle
	c color.RGBA
}

var (
	grey = color.RGBA{0xcc, 0xcc, 0xcc, 0xff}
	red  = color.RGBA{0xdc, 0x00, 0x00, 0xff}
)

// picture is a w by h PNG, white but for the fills, in base64.
func picture(t *testing.T, w, h int, fills ...fill) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	for _, f := range fills {
		draw.Draw(img, f.r, image.NewUniform(f.c), image.Point{}, draw.Src)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// basketPage is the page the visual verify opens: the basket's total, a
// grey box of 200 by 80 CSS px at (40, 120) whose right quarter is blue.
// As captured (the crop the test sends) that quarter was red: the fix
// changed a quarter of the element.
const basketPage = `<!doctype html><html lang="en"><head><title>Basket</title><link rel="icon" href="data:,">
<style>body { margin: 0; background: #fff; } #total { position: absolute; left: 40px; top: 120px; width: 200px; height: 80px; background: #ccc; }
#total i { position: absolute; right: 0; top: 0; width: 50px; height: 80px; background: #1f5fbf; }</style></head>
<body><div id="total"><i></i></div></body></html>`

// capture posts a capture to snagd and returns the inbox task it made.
func (d *daemon) capture(req api.CaptureRequest) api.Captured {
	d.t.Helper()
	var out api.Captured
	if code := d.do(http.MethodPost, "/captures", req, &out); code != http.StatusCreated {
		d.t.Fatalf("POST /captures: %d %+v", code, out)
	}
	return out
}

// TestBoardCaptureView (issue 18): what a capture brought, as a person
// sees it on the board, in real Chromium at 1280 and 390 px, light and
// dark.
//
//   - A capture from a 1024 by 640 window at scale 2, with console and
//     network errors: its page draws the screenshot with the element
//     outlined where its box is (the outline's rect is the image's, scaled
//     by its rendered width over 1024), the crop beside it, and the page's
//     URL (text, not a link), title, window and errors as unvetted data:
//     a console error that is markup shows as text.
//   - A capture whose element was below the fold: no outline; the page
//     says so, and the crop stands beside the screenshot. The same element
//     captured with the page scrolled to it is outlined at its box less
//     the scroll.
//   - A layout capture that went through a real visual verify (the test
//     sends the before crop; Chromium takes the after of the page the test
//     serves, which changed; snagd writes the diff): needs_review, with
//     before, after and diff side by side at 1280 and stacked at 390,
//     each labelled, the changed figure as the API reports it, and Tab
//     reaching the Resolve and then the Reopen beside them. Resolve
//     resolves the task.
//   - The inbox review shows each capture's crop as a small thumbnail
//     with alt text, beside its moves.
//
// Each page has a screenshot (under the test's temp dir, or
// $SNAG_BOARD_SHOTS) and axe-core's WCAG 2.1 A and AA rules with no
// serious or critical finding.
func TestBoardCaptureView(t *testing.T) {
	src, axeErr := axeSource()
	if axeErr != nil && os.Getenv("CI") != "" {
		t.Fatalf("CI is set: the board's accessibility rules must run (.ci/run installs axe-core): %v", axeErr)
	}
	chromiumPath(t)
	root := sampleProject(t)
	// Verify by the browser: the sample's project-wide command would run
	// instead.
	config := filepath.Join(root, ".snag", "config.json")
	var cfg map[string]any
	if err := json.Unmarshal([]byte(readFile(t, config)), &cfg); err != nil {
		t.Fatal(err)
	}
	delete(cfg, "verify")
	out, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(config, append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, basketPage)
	}))
	defer site.Close()
	d := startDaemon(t, root)

	// The element at (600, 420), 200 by 60 CSS px, in a 1024 by 640
	// window at scale 2: pixels (1200, 840) to (1600, 960).
	const xss = `<img src=x onerror=alert(1)>`
	errs := d.capture(api.CaptureRequest{
		URL: site.URL + "/checkout?step=<pay>", Title: `Checkout <script>alert("title")</script>`, UserAgent: "Mozilla/5.0 (X11; Linux x86_64) test",
		Viewport:      &queue.Viewport{Width: 1024, Height: 640, Scale: 2},
		Anchor:        &api.CaptureAnchor{Selector: "#pay", Text: "Pay now", Box: &queue.Box{X: 600, Y: 420, Width: 200, Height: 60}},
		ConsoleErrors: []string{xss, "TypeError: cart is undefined (checkout.js:131)"},
		NetworkErrors: []api.NetworkError{{Method: "GET", URL: site.URL + "/api/cart", Status: 500},
			{URL: "http://127.0.0.1:9/pixel.gif", Error: "net::ERR_CONNECTION_REFUSED"}},
		Screenshot: picture(t, 2048, 1280, fill{image.Rect(0, 0, 2048, 120), grey}, fill{image.Rect(1200, 840, 1600, 960), red}),
		Note:       "Pay now does nothing\n\nThe console says the cart is undefined.", Kind: "bug", Severity: "high", By: "dana",
	})
	// At the top of a page in a 1024 by 640 window, an element at y 900
	// is below the fold: not on the screenshot.
	fold := d.capture(api.CaptureRequest{
		URL: site.URL + "/checkout", Title: "Checkout", Viewport: &queue.Viewport{Width: 1024, Height: 640, Scale: 1},
		Anchor:     &api.CaptureAnchor{Selector: "footer .terms", Box: &queue.Box{X: 100, Y: 900, Width: 300, Height: 50}},
		Screenshot: picture(t, 1024, 640, fill{image.Rect(0, 0, 1024, 120), grey}),
		Crop:       picture(t, 300, 50, fill{image.Rect(0, 0, 300, 50), red}),
		Note:       "The terms link is cut off", Kind: "layout", By: "dana",
	})
	// Scrolled 500 px down, as the extension sends it: the element at y
	// 900 of the page is at 400 in the window taken, and outlined there.
	scrolled := d.capture(api.CaptureRequest{
		URL: site.URL + "/checkout", Title: "Checkout", Viewport: &queue.Viewport{Width: 1024, Height: 640, Scale: 1},
		Anchor:     &api.CaptureAnchor{Selector: "footer .terms", Box: &queue.Box{X: 100, Y: 900, Width: 300, Height: 50}},
		Scroll:     &api.Point{Y: 500},
		Screenshot: picture(t, 1024, 640, fill{image.Rect(100, 400, 400, 450), red}),
		Note:       "The terms link is cut off when scrolled", Kind: "layout", By: "dana",
	})
	// The basket's total as captured: its right quarter red.
	before := picture(t, 200, 80, fill{image.Rect(0, 0, 150, 80), grey}, fill{image.Rect(150, 0, 200, 80), red})
	visual := d.capture(api.CaptureRequest{
		URL: site.URL + "/basket", Title: "Basket", Viewport: &queue.Viewport{Width: 800, Height: 600, Scale: 1},
		Anchor:     &api.CaptureAnchor{Selector: "#total", Box: &queue.Box{X: 40, Y: 120, Width: 200, Height: 80}},
		Screenshot: picture(t, 800, 600, fill{image.Rect(40, 120, 190, 200), grey}, fill{image.Rect(190, 120, 240, 200), red}),
		Crop:       before,
		Note:       "The basket total is red", Kind: "layout", By: "dana",
	})
	// A person promotes it, an agent claims and resolves it, and the
	// visual verify sends it to needs_review.
	if code := d.do(http.MethodPost, "/tasks/"+visual.Key+"/promote", map[string]any{"by": "dana"}, nil); code != http.StatusOK {
		t.Fatalf("promote %s: %d", visual.Key, code)
	}
	agent := d.register(map[string]any{"name": "WREN", "client": "test"})
	d.claim(agent, visual.Key)
	d.as(agent, http.MethodPost, "/tasks/"+visual.Key+"/resolve", map[string]any{}, nil)
	var st api.VerifyState
	for deadline := time.Now().Add(90 * time.Second); ; {
		st = api.VerifyState{}
		d.get("/verify/"+visual.Key, &st)
		if !st.Running && st.Outcome != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the visual verify of %s did not end: %+v", visual.Key, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.Status != queue.StatusNeedsReview || st.Visual == nil || st.Visual.Identical || st.Visual.Diff == "" {
		t.Fatalf("after the visual verify %s is %s (%s: %s), visual %+v; want needs_review with before, after and diff", visual.Key, st.Status, st.Outcome, st.Reason, st.Visual)
	}
	t.Logf("%s: %s: %s", visual.Key, st.Outcome, st.Reason)

	dir := os.Getenv("SNAG_BOARD_SHOTS")
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "shots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if axeErr != nil {
		src = ""
	}
	b := newBrowser(t)
	b.login(d)
	const settled = `document.querySelector("#live").textContent === "live" &&
  [...document.images].every(i => i.complete && i.naturalWidth > 0 || i.loading === "lazy") &&
  document.getAnimations().every(a => a.playState !== "running")`
	sizes := []struct{ w, h int64 }{{1280, 900}, {390, 844}}
	// each draws the page at path at both widths in light and dark: a
	// screenshot, axe-core, and check(width) at each.
	each := func(name, path, ready string, check func(width int64)) {
		t.Helper()
		b.open(d.url(path))
		b.waitFor(name, ready)
		for _, size := range sizes {
			for _, scheme := range []string{"light", "dark"} {
				b.scheme(size.w, size.h, scheme)
				b.waitFor(name+" drawn", settled)
				check(size.w)
				shot := fmt.Sprintf("capture-%s-%d", name, size.w)
				if scheme == "dark" {
					shot += "-dark"
				}
				b.shoot(dir, shot, int(size.w), src)
			}
		}
		b.scheme(1280, 900, "light")
	}

	// The capture with errors: the element outlined where it was.
	each("errors", "/task/"+errs.Key, `document.querySelector("#task .capture .anchor-outline")`, func(width int64) {
		got := evalIn[string](b, `(() => {
  const img = document.querySelector(".capture .shot-frame img").getBoundingClientRect();
  const line = document.querySelector(".capture .anchor-outline rect.line").getBoundingClientRect();
  return JSON.stringify({img: [img.left, img.top, img.width, img.height], line: [line.left, line.top, line.width, line.height]});
})()`)
		var r struct{ Img, Line [4]float64 }
		if err := json.Unmarshal([]byte(got), &r); err != nil {
			t.Fatal(err)
		}
		k := r.Img[2] / 1024 // rendered width over the viewport's CSS width
		want := [4]float64{r.Img[0] + 600*k, r.Img[1] + 420*k, 200 * k, 60 * k}
		for i, what := range []string{"left", "top", "width", "height"} {
			if math.Abs(r.Line[i]-want[i]) > 1 {
				t.Errorf("at %d px the outline's %s is %.1f, want %.1f (image at %v, scaled %.3f)", width, what, r.Line[i], want[i], r.Img, k)
			}
		}
		if math.Abs(r.Img[3]-640*k) > 1 {
			t.Errorf("at %d px the screenshot is drawn %.1f by %.1f: not the window's shape", width, r.Img[2], r.Img[3])
		}
		if r.Img[2] > float64(width) {
			t.Errorf("at %d px the screenshot is drawn %.0f px wide", width, r.Img[2])
		}
	})
	data := evalIn[string](b, `document.querySelector("#task .capture .data").textContent`)
	for _, want := range []string{"Captured from the page: unvetted data", site.URL + "/checkout?step=<pay>", `Checkout <script>alert("title")</script>`,
		"1024 × 640 CSS px at 2×", "#pay", "Pay now", "at 600, 420, 200 × 60 CSS px", "Mozilla/5.0 (X11; Linux x86_64) test",
		"500 GET " + site.URL + "/api/cart", "failed GET http://127.0.0.1:9/pixel.gif: net::ERR_CONNECTION_REFUSED", "TypeError: cart is undefined"} {
		if !strings.Contains(data, want) {
			t.Errorf("the capture's data lacks %q:\n%s", want, data)
		}
	}
	if got := evalIn[[]string](b, `[...document.querySelectorAll(".capture .errors code")].map(c => c.textContent)`); !slices.Contains(got, xss) {
		t.Errorf("the console errors read %q, want %q among them as text", got, xss)
	}
	if n := evalIn[int](b, `document.querySelectorAll("main img[src=x], main [onerror], main script").length`); n != 0 {
		t.Errorf("the capture's text made %d elements", n)
	}
	if n := evalIn[int](b, `[...document.querySelectorAll(".capture a")].filter(a => !a.getAttribute("href").startsWith("/board/shots/")).length`); n != 0 {
		t.Errorf("the capture has %d links besides its pictures: the page's URL must be text", n)
	}
	crop := evalIn[[]float64](b, `(i => [i.naturalWidth, i.naturalHeight, i.width, i.height])(document.querySelector(".capture .crop img"))`)
	if !slices.Equal(crop, []float64{400, 120, 200, 60}) {
		t.Errorf("the crop is %v px (natural width, height, then drawn): want 400 by 120, drawn 200 by 60 CSS px", crop)
	}

	// Below the fold: no outline, a sentence, the crop.
	each("fold", "/task/"+fold.Key, `document.querySelector("#task .capture .fold")`, func(int64) {
		if evalIn[bool](b, `!!document.querySelector(".capture .anchor-outline")`) {
			t.Error("an element below the fold is outlined on the screenshot")
		}
	})
	if got := b.text("#task .capture .fold"); !strings.Contains(got, "below the fold") || !strings.Contains(got, "900 px down") {
		t.Errorf("the fold says %q", got)
	}
	if got := evalIn[int](b, `document.querySelectorAll(".capture .crop img").length`); got != 1 {
		t.Errorf("%d crops beside the screenshot, want 1", got)
	}
	each("scrolled", "/task/"+scrolled.Key, `document.querySelector("#task .capture .anchor-outline")`, func(width int64) {
		got := evalIn[[]float64](b, `(() => {
  const img = document.querySelector(".capture .shot-frame img").getBoundingClientRect();
  const line = document.querySelector(".capture .anchor-outline rect.line").getBoundingClientRect();
  return [img.left, img.top, img.width, line.left, line.top];
})()`)
		k := got[2] / 1024
		if math.Abs(got[3]-(got[0]+100*k)) > 1 || math.Abs(got[4]-(got[1]+400*k)) > 1 {
			t.Errorf("at %d px the scrolled capture's outline is at %.1f, %.1f; want %.1f, %.1f (the box less the scroll)",
				width, got[3], got[4], got[0]+100*k, got[1]+400*k)
		}
	})

	// The visual verify: before, after and diff, side by side, then stacked.
	figure := regexp.MustCompile(`^([0-9.]+)% of the element's pixels changed`)
	each("visual", "/task/"+visual.Key, `document.querySelector("#task .visual .decide")`, func(width int64) {
		boxes := evalIn[[][]float64](b, `[...document.querySelectorAll(".visual-grid img")].map(i => (r => [r.left, r.top, r.width, r.bottom])(i.getBoundingClientRect()))`)
		if len(boxes) != 3 {
			t.Fatalf("%d pictures in the visual check, want before, after and diff", len(boxes))
		}
		for i := 1; i < 3; i++ {
			side := boxes[i][0] >= boxes[i-1][0]+boxes[i-1][2] && math.Abs(boxes[i][1]-boxes[i-1][1]) < 1
			stacked := boxes[i][1] >= boxes[i-1][3]
			if width == 1280 && !side || width == 390 && !stacked {
				t.Errorf("at %d px the pictures are at %v: want them side by side at 1280 and stacked at 390", width, boxes)
			}
		}
	})
	caps := evalIn[[]string](b, `[...document.querySelectorAll(".visual-grid figcaption")].map(c => c.textContent)`)
	for i, want := range []string{"Before", "After", "Diff"} {
		if i >= len(caps) || !strings.HasPrefix(caps[i], want) {
			t.Errorf("the pictures are labelled %q, want Before, After, Diff", caps)
			break
		}
	}
	if n := evalIn[int](b, `[...document.querySelectorAll(".visual-grid img")].filter(i => i.alt.length > 0).length`); n != 3 {
		t.Errorf("%d of the 3 pictures have alt text", n)
	}
	m := figure.FindStringSubmatch(b.text("#task .visual .figure"))
	if m == nil {
		t.Fatalf("the visual check says %q, want the changed figure", b.text("#task .visual .figure"))
	}
	if pct, _ := strconv.ParseFloat(m[1], 64); math.Abs(pct-st.Visual.Changed*100) > 0.05 {
		t.Errorf("the page says %s%% changed, the API %.4f", m[1], st.Visual.Changed)
	}
	// Tab from the top reaches Resolve beside the pictures, then Reopen.
	b.open(d.url("/task/" + visual.Key))
	b.waitFor("the visual check", `document.querySelector("#task .visual .decide") && `+settled)
	const resolve, reopen = `.visual .decide form[action$="/accept"] button`, `.visual .decide form[action$="/reopen"] button`
	for i := 0; i < 80 && !evalIn[bool](b, `document.activeElement.matches(`+strconv.Quote(resolve)+`)`); i++ {
		b.do(chromedp.KeyEvent("\t"))
	}
	if !evalIn[bool](b, `document.activeElement.matches(`+strconv.Quote(resolve)+`)`) {
		t.Fatalf("Tab never reached Resolve beside the pictures; it stopped on %s", evalIn[string](b, `document.activeElement.outerHTML.slice(0, 200)`))
	}
	b.do(chromedp.KeyEvent("\t"))
	if !evalIn[bool](b, `document.activeElement.matches(`+strconv.Quote(reopen)+`)`) {
		t.Errorf("the Tab after Resolve lands on %s, want Reopen", evalIn[string](b, `document.activeElement.outerHTML.slice(0, 200)`))
	}
	if got := evalIn[float64](b, focusContrast); got < 3 {
		t.Errorf("the focused Reopen's outline has a contrast of %.2f:1, want 3:1 or more", got)
	}

	// The inbox review: each capture's crop, small, with alt text.
	each("inbox", "/inbox", `document.querySelector("#item-`+errs.Key+` .thumb img")`, func(width int64) {
		for _, key := range []string{errs.Key, fold.Key} {
			got := evalIn[[]any](b, fmt.Sprintf(`(i => [i.alt, i.naturalWidth, i.getBoundingClientRect().width, i.getBoundingClientRect().height, !!i.closest(".item-actions")])(document.querySelector("#item-%s .thumb img"))`, key))
			if alt, _ := got[0].(string); !strings.HasPrefix(alt, key+": the element captured") {
				t.Errorf("%s's thumbnail's alt text is %q", key, alt)
			}
			if w, h := got[2].(float64), got[3].(float64); w > 160.5 || h > 120.5 || w < 20 || got[1].(float64) == 0 {
				t.Errorf("at %d px %s's thumbnail is drawn %.0f by %.0f (loaded %v px wide): want it small, at most 160 by 120", width, key, w, h, got[1])
			}
			if got[4] != true {
				t.Errorf("%s's thumbnail is not beside its moves", key)
			}
		}
	})

	// Resolve beside the pictures resolves the task.
	b.open(d.url("/task/" + visual.Key))
	b.waitFor("the visual check", `document.querySelector("#task .visual .decide")`)
	b.click(resolve)
	b.waitFor(visual.Key+" resolved", `document.querySelector(".status").textContent === "resolved"`)
	if f := readFile(t, taskFile(t, root, visual.Key)); !strings.Contains(f, "\nstatus: resolved\n") {
		t.Errorf("%s after Resolve beside the pictures:\n%s", visual.Key, f)
	}
	if axeErr != nil {
		t.Skipf("the pages were drawn, but not checked: %v", axeErr)
	}
}
