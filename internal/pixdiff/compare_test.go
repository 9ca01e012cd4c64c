package pixdiff_test

import (
	"image"
	"image/color"
	"image/draw"
	"math"
	"strings"
	"testing"

	"github.com/snagdev/snag/internal/pixdiff"
)

// crop draws the tests' usual element, w by h: a box, a word and a disc
// on white. A test changes one field to change one thing about it.
type crop struct {
	w, h int

	box      image.Rectangle
	boxColor color.RGBA

	word         string
	wordX, wordY float64
	wordCell     float64 // the size of a dot of the font

	discX, discRadius float64
	discSS            int // supersampling of the disc; 1 draws it aliased

	extra func(*image.RGBA) // draws more, last
}

func element() crop {
	return crop{
		w: 240, h: 120,
		box: image.Rect(20, 20, 80, 60), boxColor: red,
		word: "SAVE", wordX: 110, wordY: 30, wordCell: 2,
		discX: 200, discRadius: 20, discSS: 8,
	}
}

func (c crop) draw() *image.RGBA {
	img := blank(c.w, c.h, white)
	fill(img, c.box, c.boxColor)
	paint(img, text(c.word, c.wordX, c.wordY, c.wordCell), ink, 4)
	paint(img, disc(c.discX, 80, c.discRadius), blue, c.discSS)
	if c.extra != nil {
		c.extra(img)
	}
	return img
}

// with returns the element changed by f.
func with(f func(*crop)) *image.RGBA {
	c := element()
	f(&c)
	return c.draw()
}

func TestCompare(t *testing.T) {
	before := element().draw()
	for _, c := range []struct {
		name          string
		before, after image.Image
		identical     bool
		changed       int             // checked when not zero
		bounds        image.Rectangle // checked when changes are expected
		antiAliased   bool            // some pixels differ by anti-aliasing alone
		total         int             // checked when not zero
	}{
		{name: "the same image", before: before, after: before, identical: true},
		{name: "the same image drawn twice", before: before, after: element().draw(), identical: true},
		{
			name: "a box moved right by 20 px", before: before,
			after:   with(func(c *crop) { c.box = c.box.Add(image.Pt(20, 0)) }),
			changed: 2 * 20 * 40, bounds: image.Rect(20, 20, 100, 60),
		},
		{
			name: "a box turned from red to green", before: before,
			after:   with(func(c *crop) { c.boxColor = green }),
			changed: 60 * 40, bounds: image.Rect(20, 20, 80, 60),
		},
		{
			name: "a word removed", before: before,
			after:  with(func(c *crop) { c.word = "" }),
			bounds: image.Rect(110, 30, 156, 44),
		},
		{
			name: "a word changed by one letter", before: before,
			after:   with(func(c *crop) { c.word = "SAVF" }),
			changed: 8 * 2, bounds: image.Rect(148, 42, 156, 44),
		},
		{
			name: "a disc drawn half a pixel to the right", before: before,
			after:     with(func(c *crop) { c.discX += 0.5 }),
			identical: true, antiAliased: true,
		},
		{
			name: "a disc drawn with a radius 2 px larger", before: before,
			after:  with(func(c *crop) { c.discRadius += 2 }),
			bounds: image.Rect(178, 58, 222, 102),
		},
		{
			name: "a word drawn a third of a pixel to the right", before: before,
			after:     with(func(c *crop) { c.wordX += 1.0 / 3 }),
			identical: true, antiAliased: true,
		},
		{
			name:      "small text drawn half a pixel to the right",
			before:    with(func(c *crop) { c.wordCell = 1.5 }),
			after:     with(func(c *crop) { c.wordCell, c.wordX = 1.5, c.wordX+0.5 }),
			identical: true, antiAliased: true,
		},
		{
			name: "a disc drawn aliased, then anti-aliased", before: with(func(c *crop) { c.discSS = 1 }),
			after:     before,
			identical: true, antiAliased: true,
		},
		{
			name: "a box with edges between pixels, anti-aliased coarsely and finely",
			before: with(func(c *crop) {
				c.extra = func(img *image.RGBA) { paint(img, rect(30.3, 70.6, 90.2, 100.45), blue, 2) }
			}),
			after: with(func(c *crop) {
				c.extra = func(img *image.RGBA) { paint(img, rect(30.3, 70.6, 90.2, 100.45), blue, 16) }
			}),
			identical: true, antiAliased: true,
		},
		{
			name: "a word anti-aliased in grey, then with the coloured fringes of LCD text", before: before,
			after: with(func(c *crop) {
				c.word = ""
				c.extra = func(img *image.RGBA) { paintLCD(img, text("SAVE", 110, 30, 2), ink, 4) }
			}),
			identical: true, antiAliased: true,
		},
		{
			name: "a one-pixel border drawn half a pixel to the right and down",
			before: with(func(c *crop) {
				c.extra = func(img *image.RGBA) { outline(img, 10, 10, 230, 110, 0) }
			}),
			after: with(func(c *crop) {
				c.extra = func(img *image.RGBA) { outline(img, 10, 10, 230, 110, 0.5) }
			}),
			identical: true, antiAliased: true,
		},
		{
			name: "a grey one-pixel divider removed",
			before: with(func(c *crop) {
				c.extra = func(img *image.RGBA) { fill(img, image.Rect(10, 112, 230, 113), divider) }
			}),
			after:   before,
			changed: 220, bounds: image.Rect(10, 112, 230, 113),
		},
		{
			name: "a disc anti-aliased in grey, then with LCD fringes", before: before,
			after: with(func(c *crop) {
				c.discRadius = 0
				c.extra = func(img *image.RGBA) { paintLCD(img, disc(200, 80, 20), blue, 8) }
			}),
			identical: true, antiAliased: true,
		},
		{
			name:   "transparent against opaque white",
			before: transparent(before),
			after:  before, identical: true,
		},
		{
			name:   "a crop of a larger image against a copy",
			before: within(before), after: before, identical: true,
		},
		{
			name:   "grey against the same grey in RGBA",
			before: grey(before), after: rgbaCopy(grey(before)), identical: true,
		},
		{
			name: "one pixel taller, the background continuing", before: before,
			after:     with(func(c *crop) { c.h++ }),
			identical: true, total: 240 * 121,
		},
		{
			name: "one pixel wider, with a line in the new column", before: before,
			after: with(func(c *crop) {
				c.w++
				c.extra = func(img *image.RGBA) { fill(img, image.Rect(240, 0, 241, 120), ink) }
			}),
			changed: 120, bounds: image.Rect(240, 0, 241, 120), total: 241 * 120,
		},
		{
			name: "two pixels narrower and shorter", before: before,
			after:     with(func(c *crop) { c.w, c.h = c.w-2, c.h-2 }),
			identical: true, total: 240 * 120,
		},
		{
			name:   "a page with its text and avatar drawn half a pixel to the right",
			before: page(390, 300, 0), after: page(390, 300, 0.5),
			identical: true, antiAliased: true,
		},
		{
			name:   "a page with a banner added and its text drawn half a pixel along",
			before: page(390, 300, 0), after: shiftedPage(390, 300),
			bounds:      image.Rect(16, 180, 374, 240),
			antiAliased: true,
		},
		{
			name: "fifty pixels wider", before: before,
			after:   with(func(c *crop) { c.w += 50 }),
			changed: 290 * 120, bounds: image.Rect(0, 0, 290, 120), total: 290 * 120,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := pixdiff.Compare(c.before, c.after, pixdiff.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("changed %d (%.5f), anti-aliased %d, bounds %v", res.Changed, res.ChangedFraction, res.AntiAliased, res.Bounds)
			if got := res.Identical(); got != c.identical {
				t.Errorf("Identical() = %v, want %v", got, c.identical)
			}
			if c.before == c.after && (res.Changed != 0 || res.AntiAliased != 0) {
				t.Errorf("Changed = %d, AntiAliased = %d for an image against itself, want 0 and 0", res.Changed, res.AntiAliased)
			}
			if !c.identical && res.Bounds != c.bounds {
				t.Errorf("Bounds = %v, want %v", res.Bounds, c.bounds)
			}
			if c.changed != 0 && res.Changed != c.changed {
				t.Errorf("Changed = %d, want %d", res.Changed, c.changed)
			}
			if c.antiAliased && res.AntiAliased == 0 {
				t.Error("AntiAliased = 0, want some: the case draws the same thing anti-aliased differently")
			}
			if c.total != 0 && res.Total != c.total {
				t.Errorf("Total = %d, want %d", res.Total, c.total)
			}
			if want := float64(res.Changed) / float64(res.Total); res.ChangedFraction != want {
				t.Errorf("ChangedFraction = %v, want Changed/Total = %v", res.ChangedFraction, want)
			}
			wantSizeChanged := c.name == "fifty pixels wider"
			if res.SizeChanged != wantSizeChanged {
				t.Errorf("SizeChanged = %v, want %v", res.SizeChanged, wantSizeChanged)
			}
			if res.BeforeSize != c.before.Bounds().Size() || res.AfterSize != c.after.Bounds().Size() {
				t.Errorf("sizes = %v, %v; want %v, %v", res.BeforeSize, res.AfterSize, c.before.Bounds().Size(), c.after.Bounds().Size())
			}
			checkDiff(t, res)
		})
	}
}

// divider is the grey of a rule between two sections: faint enough that,
// spread over a 3 by 3 neighbourhood, it is within the threshold, and
// over half of it not.
var divider = color.RGBA{0xb9, 0xb9, 0xb9, 0xff}

// outline draws the one-pixel border of the rectangle from (x0, y0) to
// (x1, y1), moved right and down by off.
func outline(img *image.RGBA, x0, y0, x1, y1, off float64) {
	x0, y0, x1, y1 = x0+off, y0+off, x1+off, y1+off
	for _, r := range []shape{rect(x0, y0, x1, y0+1), rect(x0, y1-1, x1, y1), rect(x0, y0, x0+1, y1), rect(x1-1, y0, x1, y1)} {
		paint(img, r, ink, 4)
	}
}

// checkDiff checks that the diff image covers the canvas and marks as many
// pixels changed and anti-aliased as the counts say.
func checkDiff(t *testing.T, res pixdiff.Result) {
	t.Helper()
	w, h := max(res.BeforeSize.X, res.AfterSize.X), max(res.BeforeSize.Y, res.AfterSize.Y)
	if res.Diff == nil || res.Diff.Rect != image.Rect(0, 0, w, h) {
		t.Fatalf("Diff covers %v, want %v", res.Diff.Rect, image.Rect(0, 0, w, h))
	}
	if res.SizeChanged {
		return
	}
	changed, aa := 0, 0
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			switch c := res.Diff.RGBAAt(x, y); c {
			case pixdiff.ChangedColor:
				changed++
				if !(image.Point{x, y}.In(res.Bounds)) {
					t.Errorf("changed pixel (%d, %d) outside Bounds %v", x, y, res.Bounds)
				}
			case pixdiff.AntiAliasedColor:
				aa++
			default:
				if c.R != c.G || c.G != c.B || c.R < 0xbf || c.A != 0xff {
					t.Fatalf("Diff pixel (%d, %d) = %v, want a light grey", x, y, c)
				}
			}
		}
	}
	if changed != res.Changed || aa != res.AntiAliased {
		t.Errorf("Diff marks %d changed and %d anti-aliased pixels, want %d and %d", changed, aa, res.Changed, res.AntiAliased)
	}
}

// transparent draws img as non-premultiplied RGBA with white made
// transparent and every other colour as a translucent darker one over
// transparent, so that blended onto white it looks the same.
func transparent(img image.Image) *image.NRGBA {
	b := img.Bounds()
	out := image.NewNRGBA(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			if c == white {
				continue // transparent black, which is white on white
			}
			// Choose the lowest alpha that can still show c over white,
			// and the colour that, at that alpha, blends into c.
			dark := 255 - min(c.R, c.G, c.B)
			a := max(dark, 128)
			ch := func(v uint8) uint8 {
				return uint8(math.Round(255 - float64(255-v)*255/float64(a)))
			}
			out.SetNRGBA(x, y, color.NRGBA{ch(c.R), ch(c.G), ch(c.B), a})
		}
	}
	return out
}

// within returns img drawn into a larger image at (37, 11) and cropped
// back out of it, so its bounds do not start at (0, 0).
func within(img image.Image) image.Image {
	big := blank(400, 300, green)
	r := img.Bounds().Add(image.Pt(37, 11))
	draw.Draw(big, r, img, img.Bounds().Min, draw.Src)
	return big.SubImage(r)
}

// grey returns img in shades of grey.
func grey(img image.Image) *image.Gray {
	out := image.NewGray(img.Bounds())
	draw.Draw(out, out.Rect, img, img.Bounds().Min, draw.Src)
	return out
}

// rgbaCopy returns img as *image.RGBA.
func rgbaCopy(img image.Image) *image.RGBA {
	out := image.NewRGBA(img.Bounds())
	draw.Draw(out, out.Rect, img, img.Bounds().Min, draw.Src)
	return out
}

func TestCompareThreshold(t *testing.T) {
	before := element().draw()
	// The box a little lighter: a change a person may just see.
	after := with(func(c *crop) { c.boxColor = color.RGBA{0xe0, 0x30, 0x30, 0xff} })
	for _, c := range []struct {
		threshold float64
		changed   int
	}{
		{0, 0},
		{pixdiff.DefaultThreshold, 0},
		{0.05, 60 * 40},
		{1, 0},
	} {
		res, err := pixdiff.Compare(before, after, pixdiff.Options{Threshold: c.threshold})
		if err != nil {
			t.Fatal(err)
		}
		if res.Changed != c.changed {
			t.Errorf("threshold %v: Changed = %d, want %d", c.threshold, res.Changed, c.changed)
		}
	}
}

func TestCompareSizeTolerance(t *testing.T) {
	before := element().draw()
	for _, c := range []struct {
		tolerance, grow int
		sizeChanged     bool
	}{
		{0, 0, false},
		{0, 2, false},
		{0, 3, true},
		{-1, 0, false},
		{-1, 1, true},
		{10, 10, false},
		{10, 11, true},
	} {
		after := with(func(cr *crop) { cr.h += c.grow })
		res, err := pixdiff.Compare(before, after, pixdiff.Options{SizeTolerance: c.tolerance})
		if err != nil {
			t.Fatal(err)
		}
		if res.SizeChanged != c.sizeChanged || res.Identical() == c.sizeChanged {
			t.Errorf("tolerance %d, %d px taller: SizeChanged = %v, Identical() = %v; want SizeChanged %v", c.tolerance, c.grow, res.SizeChanged, res.Identical(), c.sizeChanged)
		}
	}
}

func TestCompareRefuses(t *testing.T) {
	img := element().draw()
	for _, c := range []struct {
		name          string
		before, after image.Image
		opts          pixdiff.Options
		want          string
	}{
		{"no before image", nil, img, pixdiff.Options{}, "an image is nil"},
		{"an empty after image", img, image.NewRGBA(image.Rect(0, 0, 0, 5)), pixdiff.Options{}, "an image is empty (before 240x120, after 0x5)"},
		{"a threshold above 1", img, img, pixdiff.Options{Threshold: 1.5}, "threshold 1.5 out of range: pass a fraction between 0 and 1"},
		{"a negative threshold", img, img, pixdiff.Options{Threshold: -0.1}, "threshold -0.1 out of range"},
		{"a threshold that is not a number", img, img, pixdiff.Options{Threshold: math.NaN()}, "threshold NaN out of range"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := pixdiff.Compare(c.before, c.after, c.opts)
			if err == nil || !strings.HasPrefix(err.Error(), "pixdiff: compare: ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one starting %q holding %q", err, "pixdiff: compare: ", c.want)
			}
		})
	}
}

func TestCompareLeavesInputs(t *testing.T) {
	before, after := element().draw(), with(func(c *crop) { c.word = "" })
	b0, a0 := string(before.Pix), string(after.Pix)
	if _, err := pixdiff.Compare(before, after, pixdiff.Options{}); err != nil {
		t.Fatal(err)
	}
	if string(before.Pix) != b0 || string(after.Pix) != a0 {
		t.Error("Compare changed its input images")
	}
}

func BenchmarkCompare(b *testing.B) {
	for _, c := range []struct {
		name          string
		before, after image.Image
	}{
		{"1280x800", page(1280, 800, 0), shiftedPage(1280, 800)},
		{"390x844", page(390, 844, 0), shiftedPage(390, 844)},
		// The worst case: every pixel differs, and each is tested
		// for anti-aliasing and a shift.
		{"1280x800/all_changed", page(1280, 800, 0), blank(1280, 800, green)},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := pixdiff.Compare(c.before, c.after, pixdiff.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// shiftedPage is page with its text and avatar half a pixel to the right
// and a banner added: some noise and one change.
func shiftedPage(w, h int) *image.RGBA {
	img := page(w, h, 0.5)
	fill(img, image.Rect(16, h-120, w-16, h-60), green)
	return img
}
