package capture_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"testing"

	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/engine/capture"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/workspace"
	"github.com/snagdev/snag/internal/workspace/workspacetest"
)

// page is a PNG of w × h pixels.
func page(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{R: uint8(x), G: uint8(y), B: 200, A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// files lists the files of the project's folder .snag/<dir>.
func files(t *testing.T, w *workspace.Workspace, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(w.Engine.Project().Abs(dir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// A capture becomes an unvetted inbox task, its note's first line the
// title, with the page and the anchor cut out of it (at the window's
// device pixel ratio) in .snag/shots/.
func TestCaptureMakesAnUnvettedTask(t *testing.T) {
	t.Parallel()
	w := workspacetest.Open(t)
	shot := page(t, 40, 30)
	tk, path, err := w.Capture.Add(context.Background(), capture.Capture{
		URL: "http://127.0.0.1:3000/checkout", Title: "Checkout",
		Viewport: &queue.Viewport{Width: 20, Height: 15, Scale: 2},
		Selector: "#pay", AnchorText: "Pay\nnow", Box: &queue.Box{X: 5, Y: 5, Width: 4, Height: 3},
		Screenshot: shot, Note: "Pay button is cut off\nIt hides under the footer.",
	}, "dana")
	if err != nil {
		t.Fatal(err)
	}
	if tk.Status != queue.StatusInbox || tk.Source != queue.SourceCapture || tk.Title != "Pay button is cut off" {
		t.Errorf("the task is %s, from %s, titled %q; want inbox, from capture, titled by the note's first line", tk.Status, tk.Source, tk.Title)
	}
	if _, err := os.Stat(w.Engine.Project().Abs(path)); err != nil {
		t.Errorf("the task's file: %v", err)
	}
	c := tk.Capture
	if c == nil || len(c.Screenshots) != 1 || c.Crop == "" || c.AnchorText != "Pay now" {
		t.Fatalf("the task's capture is %+v: want one screenshot, a crop and the anchor's text on one line", c)
	}
	if got, err := os.ReadFile(w.Engine.Project().Abs(c.Screenshots[0])); err != nil || !bytes.Equal(got, shot) {
		t.Errorf("the screenshot in %s is not the page sent (%v)", c.Screenshots[0], err)
	}
	f, err := os.Open(w.Engine.Project().Abs(c.Crop))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	crop, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// The box is 4 × 3 CSS pixels at (5, 5): 8 × 6 device pixels at (10, 10).
	if b := crop.Bounds(); b.Dx() != 8 || b.Dy() != 6 {
		t.Errorf("the anchor's crop is %d × %d pixels, want 8 × 6", b.Dx(), b.Dy())
	}
	if r, g, _, _ := crop.At(0, 0).RGBA(); r>>8 != 10 || g>>8 != 10 {
		t.Errorf("the crop starts at the page's pixel (%d, %d), want (10, 10)", r>>8, g>>8)
	}
}

// A capture that breaks a bound is refused with its code, and leaves
// nothing behind: no task, no picture.
func TestCaptureRefusedWritesNothing(t *testing.T) {
	t.Parallel()
	w := workspacetest.Open(t)
	tasks, pictures := len(files(t, w, "tasks")), len(files(t, w, "shots"))
	good := capture.Capture{URL: "http://localhost:8080/", Screenshot: page(t, 4, 4), Note: "Broken"}
	for _, tc := range []struct {
		name string
		edit func(*capture.Capture)
		kind error
		code string
	}{
		{"no url", func(c *capture.Capture) { c.URL = " " }, engine.ErrInvalid, "bad_url"},
		{"host not allowed", func(c *capture.Capture) { c.URL = "https://example.com/" }, engine.ErrInvalid, "host_not_allowed"},
		{"not a png", func(c *capture.Capture) { c.Screenshot = []byte("GIF89a") }, engine.ErrInvalid, "not_png"},
		{"bad crop", func(c *capture.Capture) { c.Crop = []byte("not an image") }, engine.ErrInvalid, "not_png"},
		{"too large", func(c *capture.Capture) { c.Screenshot = make([]byte, capture.MaxShotBytes+1) }, engine.ErrTooLarge, "too_large"},
		{"bad viewport", func(c *capture.Capture) { c.Viewport = &queue.Viewport{Width: 0, Height: 10} }, engine.ErrInvalid, "bad_viewport"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			_, _, err := w.Capture.Add(context.Background(), c, "dana")
			var refusal *engine.Error
			if !errors.Is(err, tc.kind) || !errors.As(err, &refusal) || refusal.Code != tc.code {
				t.Fatalf("got %v, want a refusal %q of kind %v", err, tc.code, tc.kind)
			}
		})
	}
	if got := files(t, w, "shots"); len(got) != pictures {
		t.Errorf("refused captures left pictures in .snag/shots/: %v, %d files before", got, pictures)
	}
	if got := len(files(t, w, "tasks")); got != tasks {
		t.Errorf("refused captures made tasks: %d task files, want %d", got, tasks)
	}
}

// DecodeImageData reads base64, bare or in a data: URL, and refuses
// anything else as not_png.
func TestDecodeImageData(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want string
		err  bool
	}{
		{"aGVsbG8=", "hello", false},
		{"data:image/png;base64,aGVsbG8=", "hello", false},
		{"data:image/png,hello", "", true},
		{"not base64!", "", true},
	} {
		got, err := capture.DecodeImageData(tc.in)
		if (err != nil) != tc.err || string(got) != tc.want {
			t.Errorf("DecodeImageData(%q) = %q, %v; want %q (an error: %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}
