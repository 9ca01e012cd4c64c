package daemon_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"image"
	"image/color"
	"image/draw"
	"image/gif"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/codec"
	"github.com/snagdev/snag/internal/queue"
)

// pagePNG draws a page of w by h pixels with a red box at r, as PNG.
func pagePNG(t *testing.T, w, h int, r image.Rectangle) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	draw.Draw(img, r, image.NewUniform(color.RGBA{R: 220, A: 255}), image.Point{}, draw.Src)
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// shotsAndTasks lists the files of .snag/shots and .snag/tasks.
func shotsAndTasks(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{"shots", "tasks"} {
		ents, _ := os.ReadDir(filepath.Join(root, ".snag", dir))
		for _, e := range ents {
			out = append(out, dir+"/"+e.Name())
		}
	}
	return out
}

// TestCaptureMakesAnInboxTask: POST /captures writes the screenshot and
// the anchor's crop (cut from the screenshot by the anchor's box, less the
// scroll, at the viewport's scale) to .snag/shots/, and an inbox task,
// unvetted, source: capture, whose capture block has all of it. GET
// /tasks/{ref} and the file agree.
func TestCaptureMakesAnInboxTask(t *testing.T) {
	t.Parallel()
	root := sampleProject(t)
	d := startDaemon(t, root, "")
	req := api.CaptureRequest{
		URL: "http://localhost:3000/checkout", Title: "Checkout", UserAgent: "Mozilla/5.0 test",
		Viewport:      &queue.Viewport{Width: 200, Height: 150, Scale: 2},
		Anchor:        &api.CaptureAnchor{Selector: "#pay", Text: "Pay now", Box: &queue.Box{X: 40, Y: 530, Width: 60, Height: 20}},
		Scroll:        &api.Point{X: 0, Y: 500},
		ConsoleErrors: []string{"TypeError: cart is undefined"},
		NetworkErrors: []api.NetworkError{{Method: "get", URL: "http://localhost:3000/api/cart", Status: 500},
			{URL: "http://localhost:9/x", Error: "net::ERR_CONNECTION_REFUSED"}},
		Screenshot: "data:image/png;base64," + base64.StdEncoding.EncodeToString(pagePNG(t, 400, 300, image.Rect(80, 60, 200, 100))),
		Note:       "The pay button overlaps the total\n\nOn narrow windows only.", Kind: "layout", Severity: "high", By: "ana",
	}
	var got api.Captured
	if code := d.do("POST", "/captures", req, &got); code != http.StatusCreated {
		t.Fatalf("POST /captures: %d %+v", code, got)
	}
	if got.Status != queue.StatusInbox || got.Trust != queue.TrustUnvetted || got.Source != queue.SourceCapture {
		t.Fatalf("answer %+v: want inbox, unvetted, source capture", got)
	}
	raw, err := os.ReadFile(filepath.Join(root, got.Path))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := codec.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	c := tk.Capture
	switch {
	case tk.Title != "The pay button overlaps the total" || tk.Kind != queue.KindLayout || tk.Severity != queue.SeverityHigh || tk.Source != queue.SourceCapture:
		t.Errorf("task %q %s %s source %q", tk.Title, tk.Kind, tk.Severity, tk.Source)
	case !strings.Contains(string(tk.Body), "On narrow windows only."):
		t.Errorf("body %q lacks the note", tk.Body)
	case c == nil || c.URL != req.URL || c.Anchor != "#pay" || c.AnchorText != "Pay now" || *c.AnchorBox != *req.Anchor.Box || *c.Viewport != *req.Viewport ||
		c.Scroll == nil || *c.Scroll != (queue.Point{X: 0, Y: 500}):
		t.Errorf("capture %+v", c)
	case !slices.Equal(c.ConsoleErrors, req.ConsoleErrors) ||
		!slices.Equal(c.NetworkErrors, []string{"500 GET http://localhost:3000/api/cart", "failed GET http://localhost:9/x: net::ERR_CONNECTION_REFUSED"}):
		t.Errorf("errors %q %q", c.ConsoleErrors, c.NetworkErrors)
	case len(c.Screenshots) != 1 || c.Screenshots[0] != got.Screenshot || c.Crop != got.Crop || !strings.HasPrefix(c.Crop, "shots/"+tk.ID):
		t.Errorf("pictures %q %q, answer %q %q", c.Screenshots, c.Crop, got.Screenshot, got.Crop)
	}
	// The box is at (40, 530) on the page, scrolled to 500: (40, 30) in
	// the window, (80, 60) at scale 2, 120 by 40 pixels: the red box.
	f, err := os.Open(filepath.Join(root, ".snag", got.Crop))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	crop, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := crop.Bounds(); b.Dx() != 120 || b.Dy() != 40 {
		t.Errorf("crop is %v, want 120x40", b)
	}
	for _, p := range []image.Point{{0, 0}, {119, 39}, {60, 20}} {
		if r, g, _, _ := crop.At(p.X, p.Y).RGBA(); r>>8 != 220 || g != 0 {
			t.Errorf("crop at %v is %v, want the red box", p, crop.At(p.X, p.Y))
		}
	}
	var shown api.TaskDetail
	if code := d.get("/tasks/"+got.Key, &shown); code != http.StatusOK || shown.Task == nil || shown.Task.Trust != queue.TrustUnvetted ||
		shown.Task.Source != queue.SourceCapture || shown.Task.Capture == nil || shown.Task.Capture.Crop != got.Crop {
		t.Errorf("GET /tasks/%s: %d %+v", got.Key, code, shown.Task)
	}
}

// TestCaptureBadInput (issue 18): each bad capture gets a clear error that
// names the fix, and nothing is written: no task, no picture.
func TestCaptureBadInput(t *testing.T) {
	t.Parallel()
	root := sampleProject(t)
	d := startDaemon(t, root, "")
	good := func() api.CaptureRequest {
		return api.CaptureRequest{URL: "http://127.0.0.1:8080/", Anchor: &api.CaptureAnchor{Selector: "main"},
			Screenshot: base64.StdEncoding.EncodeToString(pagePNG(t, 50, 40, image.Rect(0, 0, 10, 10)))}
	}
	var gifData bytes.Buffer
	gif.Encode(&gifData, image.NewPaletted(image.Rect(0, 0, 4, 4), []color.Color{color.Black, color.White}), nil)
	before := shotsAndTasks(t, root)
	for _, tc := range []struct {
		name   string
		change func(*api.CaptureRequest)
		status int
		code   string
		says   string
	}{
		{"javascript url", func(r *api.CaptureRequest) { r.URL = "javascript:alert(document.cookie)" }, 400, "bad_url", "http or https"},
		{"data url", func(r *api.CaptureRequest) { r.URL = "data:text/html,<b>x</b>" }, 400, "bad_url", "http or https"},
		{"host not allowed", func(r *api.CaptureRequest) { r.URL = "https://example.com/" }, 400, "host_not_allowed", "browser.allowed_hosts"},
		{"selector of 100 KB", func(r *api.CaptureRequest) { r.Anchor.Selector = strings.Repeat("div > ", 100<<10/6) }, 400, "bad_anchor", "shorter selector"},
		{"not a PNG", func(r *api.CaptureRequest) { r.Screenshot = base64.StdEncoding.EncodeToString(gifData.Bytes()) }, 400, "not_png", "PNG"},
		{"not base64", func(r *api.CaptureRequest) { r.Screenshot = "%%%" }, 400, "not_png", "base64"},
		{"no screenshot", func(r *api.CaptureRequest) { r.Screenshot = "" }, 400, "no_screenshot", "PNG"},
		{"crop not a PNG", func(r *api.CaptureRequest) { r.Crop = base64.StdEncoding.EncodeToString([]byte("GIF89a")) }, 400, "not_png", "crop"},
		{"box not finite", func(r *api.CaptureRequest) { r.Anchor.Box = &queue.Box{X: -1, Y: 0, Width: -5, Height: 3} }, 400, "bad_anchor", "rectangle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := good()
			tc.change(&req)
			var e api.Error
			code := d.do("POST", "/captures", req, &e)
			if code != tc.status || e.Code != tc.code || !strings.Contains(e.Message, tc.says) {
				t.Errorf("%d %s %q; want %d %s saying %q", code, e.Code, e.Message, tc.status, tc.code, tc.says)
			}
		})
	}
	t.Run("screenshot of 100 MB", func(t *testing.T) {
		// Sent as it is made, without a length: snagd stops reading at
		// its cap.
		body := io.MultiReader(strings.NewReader(`{"url":"http://127.0.0.1/","screenshot":"`),
			io.LimitReader(repeatReader('A'), 100<<20), strings.NewReader(`"}`))
		req, _ := http.NewRequest("POST", d.url("/captures"), body)
		req.Header.Set("Authorization", "Bearer "+d.token)
		req.Header.Set("Content-Type", "application/json")
		resp := d.raw(req)
		defer resp.Body.Close()
		var e api.Error
		json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || e.Code != "too_large" || !strings.Contains(e.Message, "8 MiB") {
			t.Errorf("%d %s %q; want 413 too_large naming 8 MiB", resp.StatusCode, e.Code, e.Message)
		}
	})
	t.Run("a small PNG of many 16-bit pixels", func(t *testing.T) {
		// 6000x6000 at 16 bits a channel: a header of a few bytes that
		// would decode to 274 MiB.
		ihdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 6000), 6000)
		ihdr = append(ihdr, 16, 6, 0, 0, 0)
		chunk := func(typ string, data []byte) []byte {
			b := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
			b = append(append(b, typ...), data...)
			return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(append([]byte(typ), data...)))
		}
		deep := append(append([]byte("\x89PNG\r\n\x1a\n"), chunk("IHDR", ihdr)...), chunk("IEND", nil)...)
		req := good()
		req.Screenshot = base64.StdEncoding.EncodeToString(deep)
		var e api.Error
		if code := d.do("POST", "/captures", req, &e); code != http.StatusRequestEntityTooLarge || !strings.Contains(e.Message, "6000x6000 at 8 bytes a pixel decodes to 274 MiB") {
			t.Errorf("%d %s %q; want 413 naming the decoded size", code, e.Code, e.Message)
		}
	})
	t.Run("screenshot of 9 MiB under the body's cap", func(t *testing.T) {
		req := good()
		big := append(pagePNG(t, 50, 40, image.Rect(0, 0, 10, 10)), make([]byte, 9<<20)...)
		req.Screenshot = base64.StdEncoding.EncodeToString(big)
		var e api.Error
		if code := d.do("POST", "/captures", req, &e); code != http.StatusRequestEntityTooLarge || !strings.Contains(e.Message, "8 MiB") {
			t.Errorf("%d %s %q; want 413 naming 8 MiB", code, e.Code, e.Message)
		}
	})
	if after := shotsAndTasks(t, root); !slices.Equal(before, after) {
		t.Errorf("refused captures wrote files: before %q, after %q", before, after)
	}
	var e api.Error
	if code := d.do("POST", "/captures", good(), &e); code != http.StatusCreated {
		t.Fatalf("a good capture after the bad ones: %d %+v", code, e)
	}
}

// repeatReader reads c for ever.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}
