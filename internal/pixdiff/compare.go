package pixdiff

import (
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
)

// DefaultThreshold is the colour difference, as a fraction of the largest
// there is, above which two pixels differ when Options.Threshold is zero.
// At 0.1 a change a person notices counts, and the grey-level noise of
// compression or of a different rasteriser does not.
const DefaultThreshold = 0.1

// DefaultSizeTolerance is how many pixels the widths, and the heights, of
// the two crops may differ by and still be compared pixel by pixel, when
// Options.SizeTolerance is zero.
const DefaultSizeTolerance = 2

// IdenticalFraction and IdenticalPixels bound what [Result.Identical] still
// calls identical: fewer than IdenticalFraction of the pixels changed, and
// fewer than IdenticalPixels. Together they allow a few stray pixels, and
// not one changed letter of a word.
const (
	IdenticalFraction = 0.001
	IdenticalPixels   = 10
)

// Options tune [Compare]. The zero value uses the defaults.
type Options struct {
	// Threshold is the colour difference, as a fraction of the largest
	// there is, above which two pixels differ. It must be between 0 and
	// 1; zero means DefaultThreshold. A smaller value counts fainter
	// changes.
	Threshold float64

	// SizeTolerance is how many pixels the widths, and the heights, may
	// differ by and still be compared pixel by pixel (see the package
	// comment). Zero means DefaultSizeTolerance; a negative value means
	// the sizes must match exactly.
	SizeTolerance int
}

// Result is what [Compare] found. Coordinates are on the canvas where both
// images' top-left corners are at (0, 0).
type Result struct {
	// Changed counts the pixels that differ perceptually, not counting
	// those in AntiAliased.
	Changed int

	// AntiAliased counts the pixels that differ only by anti-aliasing or
	// because something was drawn less than a pixel away (see the
	// package comment). They are not in Changed.
	AntiAliased int

	// Total counts the pixels compared: the larger width times the larger
	// height.
	Total int

	// ChangedFraction is Changed / Total, from 0 to 1.
	ChangedFraction float64

	// Bounds is the smallest rectangle holding every changed pixel. It is
	// empty when Changed is zero, and the whole canvas when SizeChanged is
	// set.
	Bounds image.Rectangle

	// BeforeSize and AfterSize are the sizes of the two images.
	BeforeSize, AfterSize image.Point

	// SizeChanged says the widths or the heights differ by more than the
	// size tolerance, so every pixel counts as changed. Sizes that differ
	// within the tolerance leave it false (compare BeforeSize and
	// AfterSize to see them).
	SizeChanged bool

	// Diff shows the after image, faded to light grey, with changed
	// pixels in [ChangedColor] and those counted in AntiAliased in
	// [AntiAliasedColor]. It covers the canvas, starting at (0, 0), with
	// the after image extended as the package comment says. When
	// SizeChanged is set, the after image is tinted in ChangedColor, and
	// the canvas beyond it is ChangedColor itself.
	Diff *image.RGBA
}

// Identical says whether the two images look the same to a person: the
// sizes are within tolerance, and fewer than [IdenticalFraction] of the
// pixels and fewer than [IdenticalPixels] changed.
func (r Result) Identical() bool {
	return !r.SizeChanged && r.ChangedFraction < IdenticalFraction && r.Changed < IdenticalPixels
}

// Compare compares before with after (see the package comment for the
// rules) and draws the diff image. It fails only on an image that is nil or
// empty, or on options out of range. While it runs it holds 12 bytes a
// pixel of the canvas, the diff image's 4 included: 12 MB at 1280 by 800.
func Compare(before, after image.Image, opts Options) (Result, error) {
	threshold, tolerance, err := opts.resolve()
	if err != nil {
		return Result{}, err
	}
	if before == nil || after == nil {
		return Result{}, errors.New("pixdiff: compare: an image is nil: pass both the before and the after image")
	}
	bs, as := before.Bounds().Size(), after.Bounds().Size()
	if bs.X <= 0 || bs.Y <= 0 || as.X <= 0 || as.Y <= 0 {
		return Result{}, fmt.Errorf("pixdiff: compare: an image is empty (before %dx%d, after %dx%d): crop a region of at least one pixel", bs.X, bs.Y, as.X, as.Y)
	}
	w, h := max(bs.X, as.X), max(bs.Y, as.Y)
	res := Result{Total: w * h, BeforeSize: bs, AfterSize: as}
	a := flatten(after, w, h)
	res.Diff = image.NewRGBA(image.Rect(0, 0, w, h))

	if abs(bs.X-as.X) > tolerance || abs(bs.Y-as.Y) > tolerance {
		res.SizeChanged = true
		res.Changed = res.Total
		res.ChangedFraction = 1
		res.Bounds = image.Rect(0, 0, w, h)
		drawTinted(res.Diff, a, as)
		return res, nil
	}

	b := flatten(before, w, h)
	c := newCanvas(b, a, w, h, threshold)
	// The marks as the diff's Pix holds them, one little-endian word
	// each.
	changedWord, antiAliasedWord := rgbaWord(ChangedColor), rgbaWord(AntiAliasedColor)
	pix := res.Diff.Pix
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := y*w + x
			pb, pa := b[i], a[i]
			o := pix[4*i : 4*i+4 : 4*i+4]
			if pb == pa || distance(pb, pa) <= c.limit {
				binary.LittleEndian.PutUint32(o, uint32(faded[luma8(pa)])*0x010101|0xff000000)
				continue
			}
			if c.explained(x, y) {
				res.AntiAliased++
				binary.LittleEndian.PutUint32(o, antiAliasedWord)
				continue
			}
			if res.Changed == 0 {
				res.Bounds = image.Rect(x, y, x+1, y+1)
			} else {
				res.Bounds.Min.X = min(res.Bounds.Min.X, x)
				res.Bounds.Max.X = max(res.Bounds.Max.X, x+1)
				res.Bounds.Max.Y = y + 1
			}
			res.Changed++
			binary.LittleEndian.PutUint32(o, changedWord)
		}
	}
	res.ChangedFraction = float64(res.Changed) / float64(res.Total)
	return res, nil
}

// resolve fills in the defaults and checks the options.
func (o Options) resolve() (threshold float64, tolerance int, err error) {
	threshold, tolerance = o.Threshold, o.SizeTolerance
	if threshold == 0 {
		threshold = DefaultThreshold
	}
	if !(threshold > 0 && threshold <= 1) { // also refuses NaN
		return 0, 0, fmt.Errorf("pixdiff: compare: threshold %v out of range: pass a fraction between 0 and 1 (0 means the default, %v)", o.Threshold, DefaultThreshold)
	}
	switch {
	case tolerance == 0:
		tolerance = DefaultSizeTolerance
	case tolerance < 0:
		tolerance = 0
	}
	return threshold, tolerance, nil
}

// flatten converts img, once, into one packed 0xRRGGBB word per pixel,
// blended onto white, on a w by h canvas at least as large as img. Past
// img's right and bottom edges it repeats img's last column and row.
func flatten(img image.Image, w, h int) []uint32 {
	r := img.Bounds()
	sw, sh := r.Dx(), r.Dy()
	out := make([]uint32, w*h)
	switch src := img.(type) {
	case *image.RGBA:
		flattenRGBA(out, w, src.Pix, src.Stride, src.PixOffset(r.Min.X, r.Min.Y), sw, sh)
	case *image.NRGBA:
		for y := 0; y < sh; y++ {
			row := src.Pix[src.PixOffset(r.Min.X, r.Min.Y+y):][: 4*sw : 4*sw]
			dst := out[y*w : y*w+sw : y*w+sw]
			for x := range dst {
				p := row[4*x : 4*x+4 : 4*x+4]
				a := uint32(p[3])
				// The colour is not premultiplied: blend it onto
				// white, c·a + 255·(1−a), rounded.
				bg := 255 * (255 - a)
				dst[x] = (uint32(p[0])*a+bg+127)/255<<16 | (uint32(p[1])*a+bg+127)/255<<8 | (uint32(p[2])*a+bg+127)/255
			}
		}
	default:
		// Any other model (grey, paletted, 16 bits a channel) is drawn
		// into premultiplied RGBA once.
		rgba := image.NewRGBA(image.Rect(0, 0, sw, sh))
		draw.Draw(rgba, rgba.Bounds(), img, r.Min, draw.Src)
		flattenRGBA(out, w, rgba.Pix, rgba.Stride, 0, sw, sh)
	}
	for y := 0; y < sh; y++ {
		row := out[y*w : (y+1)*w]
		last := row[sw-1]
		for x := sw; x < w; x++ {
			row[x] = last
		}
	}
	lastRow := out[(sh-1)*w : sh*w]
	for y := sh; y < h; y++ {
		copy(out[y*w:(y+1)*w], lastRow)
	}
	return out
}

// flattenRGBA fills the first sw words of the first sh rows of out (w words
// a row) from premultiplied RGBA pixels starting at pix[off].
func flattenRGBA(out []uint32, w int, pix []uint8, stride, off, sw, sh int) {
	for y := 0; y < sh; y++ {
		row := pix[off+y*stride:][: 4*sw : 4*sw]
		dst := out[y*w : y*w+sw : y*w+sw]
		for x := range dst {
			v := binary.LittleEndian.Uint32(row[4*x:]) // 0xAABBGGRR
			r, g, b, a := v&0xff, v>>8&0xff, v>>16&0xff, v>>24
			if a != 0xff {
				// Premultiplied onto white is c + 255·(1−a); min
				// keeps a malformed pixel (colour above alpha) in
				// range.
				bg := 255 - a
				r, g, b = min(r+bg, 255), min(g+bg, 255), min(b+bg, 255)
			}
			dst[x] = r<<16 | g<<8 | b
		}
	}
}

// drawTinted draws the after image, a, into d for sizes that differ too
// much: the after image's area tinted in ChangedColor, any canvas beyond it
// in ChangedColor itself.
func drawTinted(d *image.RGBA, a []uint32, as image.Point) {
	w, h := d.Rect.Dx(), d.Rect.Dy()
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := y*w + x
			o := d.Pix[4*i : 4*i+4 : 4*i+4]
			if x >= as.X || y >= as.Y {
				o[0], o[1], o[2], o[3] = ChangedColor.R, ChangedColor.G, ChangedColor.B, 0xff
				continue
			}
			v := uint16(faded[luma8(a[i])])
			o[0] = uint8((v + uint16(ChangedColor.R)) / 2)
			o[1] = uint8((v + uint16(ChangedColor.G)) / 2)
			o[2] = uint8((v + uint16(ChangedColor.B)) / 2)
			o[3] = 0xff
		}
	}
}

// rgbaWord is c as four bytes of an *image.RGBA's Pix, read as one
// little-endian word.
func rgbaWord(c color.RGBA) uint32 {
	return uint32(c.R) | uint32(c.G)<<8 | uint32(c.B)<<16 | uint32(c.A)<<24
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
