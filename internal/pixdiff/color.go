package pixdiff

import (
	"image/color"
	"math"
)

// ChangedColor marks a changed pixel in the diff image. It and
// AntiAliasedColor are variables only because Go has no constant structs:
// do not assign to them.
var ChangedColor = color.RGBA{R: 0xe8, G: 0x10, B: 0x10, A: 0xff}

// AntiAliasedColor marks, in the diff image, a pixel that differs only by
// anti-aliasing or a shift of less than a pixel.
var AntiAliasedColor = color.RGBA{R: 0xf5, G: 0xc8, B: 0x20, A: 0xff}

// fade is how much of the after image's contrast the diff image keeps
// around the marks: enough to see the layout, little enough that a mark
// stands out.
const fade = 0.25

// faded maps a luma from 0 to 255 to the grey the diff image draws it in.
var faded [256]uint8

// maxDistance is the largest value distance can take: the weighted YIQ
// length of the widest difference the RGB cube holds. The weights make a
// convex quadratic, so the largest value is at a corner of the cube of
// differences, each channel at −255 or +255.
var maxDistance float64

// The weights Kotsarenko and Ramos give luma (Y) and the two chroma
// channels (I and Q) in the perceived difference of two colours.
const (
	weightY = 0.5053
	weightI = 0.299
	weightQ = 0.1957
)

func init() {
	for l := range faded {
		faded[l] = uint8(255 - float64(255-l)*fade + 0.5)
	}
	for corner := range 8 {
		var d [3]float64
		for c := range d {
			d[c] = -255
			if corner&(1<<c) != 0 {
				d[c] = 255
			}
		}
		maxDistance = max(maxDistance, toYIQ(d[0], d[1], d[2]).norm())
	}
}

// yiq is a colour, or a difference of two, in NTSC's YIQ space: luma and
// two chroma channels.
type yiq struct{ y, i, q float64 }

// toYIQ takes red, green and blue (or differences of them) to YIQ. The
// transform is linear, so the YIQ of a difference is the difference of
// the YIQs.
func toYIQ(r, g, b float64) yiq {
	return yiq{
		y: 0.299*r + 0.587*g + 0.114*b,
		i: 0.596*r - 0.274*g - 0.322*b,
		q: 0.211*r - 0.523*g + 0.312*b,
	}
}

// dot is the weighted inner product of two YIQ differences.
func (v yiq) dot(u yiq) float64 {
	return weightY*v.y*u.y + weightI*v.i*u.i + weightQ*v.q*u.q
}

// norm is the weighted squared length of a YIQ difference: the perceived
// difference of the two colours it is the difference of.
func (v yiq) norm() float64 { return v.dot(v) }

// diff is the YIQ of p − q, for two packed pixels.
func diff(p, q uint32) yiq {
	return toYIQ(
		float64(p>>16&0xff)-float64(q>>16&0xff),
		float64(p>>8&0xff)-float64(q>>8&0xff),
		float64(p&0xff)-float64(q&0xff),
	)
}

// distance is the perceived difference of two packed pixels.
func distance(p, q uint32) float64 { return diff(p, q).norm() }

// luma is a packed pixel's brightness, the Y of YIQ, from 0 to 255.
func luma(p uint32) float64 {
	return 0.299*float64(p>>16&0xff) + 0.587*float64(p>>8&0xff) + 0.114*float64(p&0xff)
}

// luma8 is luma in integers, close enough for drawing.
func luma8(p uint32) uint8 {
	return uint8((77*(p>>16&0xff) + 150*(p>>8&0xff) + 29*(p&0xff)) >> 8)
}

// canvas holds the two images, flattened to the same size, and the limits
// a pixel that differs is tested against.
type canvas struct {
	before, after []uint32
	w, h          int

	// limit is the largest distance two pixels may be apart and count
	// as the same colour.
	limit float64

	// band is how far apart two lumas may be when their colours are
	// within limit: a distance is at least weightY times the square of
	// the difference in luma.
	band float64

	// inkLimit is the largest distance two means of nine pixels may be
	// apart in smeared: a mean over nine pixels hides a change in one of
	// them, so it asks for half of limit's distance.
	inkLimit float64
}

func newCanvas(before, after []uint32, w, h int, threshold float64) *canvas {
	limit := maxDistance * threshold * threshold
	return &canvas{
		before: before, after: after, w: w, h: h,
		limit:    limit,
		band:     math.Sqrt(limit / weightY),
		inkLimit: limit / 4,
	}
}

// explained says whether the pixel at (x, y), which differs between the
// two images, differs only because something was drawn a fraction of a
// pixel away or anti-aliased differently.
func (c *canvas) explained(x, y int) bool {
	if c.solid(x, y) {
		// Neither the anti-aliasing nor the shift test can pass.
		return c.smeared(x, y)
	}
	return c.antiAliased(c.before, c.after, x, y) || c.antiAliased(c.after, c.before, x, y) ||
		c.shifted(x, y) || c.smeared(x, y)
}

// solid says whether the pixel at (x, y) has its colour in its four
// neighbours along the row and the column, in both images: the inside of
// something drawn, not an edge. Such a pixel has more than two neighbours
// of its brightness, so it is not anti-aliased, and nothing lies between
// it and its neighbours, so it has not shifted.
func (c *canvas) solid(x, y int) bool {
	w := c.w
	if x == 0 || y == 0 || x == w-1 || y == c.h-1 {
		return false
	}
	i := y*w + x
	for _, img := range [2][]uint32{c.before, c.after} {
		p := img[i]
		if img[i-1] != p || img[i+1] != p || img[i-w] != p || img[i+w] != p {
			return false
		}
	}
	return true
}

// antiAliased says whether the pixel at (x, y) of img looks like part of an
// anti-aliased edge, other being the image it is compared with. After
// Vysniauskas: the pixel has at most two neighbours as bright as itself,
// it has a darker and a brighter neighbour, and the darkest or the
// brightest of those sits in a flat region in both images. An edge pixel
// lies between two flat regions; a changed detail usually does not.
func (c *canvas) antiAliased(img, other []uint32, x, y int) bool {
	w, h := c.w, c.h
	centre := luma(img[y*w+x])
	same := 0
	var darkest, brightest float64
	dark, bright := -1, -1
	for ny := max(y-1, 0); ny <= min(y+1, h-1); ny++ {
		for nx := max(x-1, 0); nx <= min(x+1, w-1); nx++ {
			if nx == x && ny == y {
				continue
			}
			j := ny*w + nx
			d := luma(img[j]) - centre
			switch {
			case d == 0:
				same++
				if same > 2 {
					return false
				}
			case d < darkest:
				darkest, dark = d, j
			case d > brightest:
				brightest, bright = d, j
			}
		}
	}
	if dark < 0 || bright < 0 {
		return false
	}
	return c.flat(img, dark) && c.flat(other, dark) ||
		c.flat(img, bright) && c.flat(other, bright)
}

// flat says whether the pixel at index i of img has at least three
// neighbours of exactly its colour, or two when it lies on the canvas's
// border and so has fewer neighbours.
func (c *canvas) flat(img []uint32, i int) bool {
	w, h := c.w, c.h
	x, y := i%w, i/w
	need := 3
	if x == 0 || y == 0 || x == w-1 || y == h-1 {
		need = 2
	}
	p := img[i]
	same := 0
	for ny := max(y-1, 0); ny <= min(y+1, h-1); ny++ {
		for nx := max(x-1, 0); nx <= min(x+1, w-1); nx++ {
			if (nx != x || ny != y) && img[ny*w+nx] == p {
				same++
				if same >= need {
					return true
				}
			}
		}
	}
	return false
}

// shifted says whether the pixel at (x, y) differs only because an edge
// through it moved by up to a pixel along a row or a column: the after
// colour there lies, within limit, between the before colour there and
// the before colour one step back, and the before colour lies between the
// after colour there and the after colour one step ahead. A thing drawn
// or removed fails one of the two. Diagonal steps are not tried: where an
// edge of a changed region turns a corner, they would pass, and an edge
// moved diagonally has also moved along a row or a column.
func (c *canvas) shifted(x, y int) bool {
	w, h := c.w, c.h
	i := y*w + x
	for _, d := range [4][2]int{{1, 0}, {-1, 0}, {0, 1}, {0, -1}} {
		bx, by, fx, fy := x-d[0], y-d[1], x+d[0], y+d[1]
		if bx < 0 || by < 0 || bx >= w || by >= h || fx < 0 || fy < 0 || fx >= w || fy >= h {
			continue
		}
		if c.between(c.after[i], c.before[i], c.before[by*w+bx]) && c.between(c.before[i], c.after[i], c.after[fy*w+fx]) {
			return true
		}
	}
	return false
}

// between says whether the colour q lies, within limit, on the segment
// from p to n: whether it is what p and n blend into for some share of
// each.
func (c *canvas) between(q, p, n uint32) bool {
	// Any blend of p and n has a luma between theirs, and a colour
	// within limit of it a luma within band of that: most pixels that
	// changed fail here, cheaply.
	lq, lp, ln := luma(q), luma(p), luma(n)
	if lq < min(lp, ln)-c.band || lq > max(lp, ln)+c.band {
		return false
	}
	d, v := diff(n, p), diff(q, p)
	t := 0.0 // the share of n in the blend nearest q
	if dd := d.norm(); dd > 0 {
		t = min(max(v.dot(d)/dd, 0), 1)
	}
	return yiq{v.y - t*d.y, v.i - t*d.i, v.q - t*d.q}.norm() <= c.limit
}

// smeared says whether the pixel at (x, y) differs only because a thin
// stroke through it was drawn a fraction of a pixel further along,
// spreading its ink over one more pixel: a move keeps the ink, so the
// pixel's 3 by 3 neighbourhood has the same mean colour, within inkLimit,
// in both images. A thing drawn, removed or recoloured changes that mean.
func (c *canvas) smeared(x, y int) bool {
	w, h := c.w, c.h
	var dr, dg, db, n int
	add := func(j int) {
		p, q := c.before[j], c.after[j]
		dr += int(p>>16&0xff) - int(q>>16&0xff)
		dg += int(p>>8&0xff) - int(q>>8&0xff)
		db += int(p&0xff) - int(q&0xff)
		n++
	}
	if x > 0 && y > 0 && x < w-1 && y < h-1 {
		for _, j := range [9]int{-w - 1, -w, -w + 1, -1, 0, 1, w - 1, w, w + 1} {
			add(y*w + x + j)
		}
	} else {
		for ny := max(y-1, 0); ny <= min(y+1, h-1); ny++ {
			for nx := max(x-1, 0); nx <= min(x+1, w-1); nx++ {
				add(ny*w + nx)
			}
		}
	}
	k := float64(n)
	return toYIQ(float64(dr)/k, float64(dg)/k, float64(db)/k).norm() <= c.inkLimit
}
