package pixdiff_test

import (
	"image"
	"image/color"
	"math"
	"strings"
)

var color50 = color.RGBA{0xa0, 0xa0, 0xa0, 0xff}

// The tests draw their images: flat boxes, discs and a blocky text, the
// last two anti-aliased by supersampling, so an edge can be moved by a
// fraction of a pixel the way a browser moves it.

var (
	white = color.RGBA{0xff, 0xff, 0xff, 0xff}
	ink   = color.RGBA{0x1f, 0x23, 0x28, 0xff}
	blue  = color.RGBA{0x1a, 0x5f, 0xd0, 0xff}
	red   = color.RGBA{0xd0, 0x20, 0x20, 0xff}
	green = color.RGBA{0x20, 0xa0, 0x40, 0xff}
	paper = color.RGBA{0xf6, 0xf8, 0xfa, 0xff}
)

// blank is a w by h image of one colour.
func blank(w, h int, c color.RGBA) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	fill(img, img.Rect, c)
	return img
}

// fill paints r in c, crisp.
func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

// shape says whether a point, in pixels, is inside it, and bounds where it
// can be.
type shape struct {
	inside func(x, y float64) bool
	bounds image.Rectangle
}

// paint blends c over img wherever s covers it, each pixel covered by the
// fraction of its ss by ss samples inside s.
func paint(img *image.RGBA, s shape, c color.RGBA, ss int) {
	r := s.bounds.Intersect(img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			in := 0
			for sy := range ss {
				for sx := range ss {
					if s.inside(float64(x)+(float64(sx)+0.5)/float64(ss), float64(y)+(float64(sy)+0.5)/float64(ss)) {
						in++
					}
				}
			}
			if in == 0 {
				continue
			}
			k := float64(in) / float64(ss*ss)
			o := img.RGBAAt(x, y)
			mix := func(a, b uint8) uint8 { return uint8(float64(a)*(1-k) + float64(b)*k + 0.5) }
			img.SetRGBA(x, y, color.RGBA{mix(o.R, c.R), mix(o.G, c.G), mix(o.B, c.B), 0xff})
		}
	}
}

// paintLCD is paint with the sub-pixel anti-aliasing of LCD text: each of
// the red, green and blue channels takes its coverage a third of a pixel
// further right, so edges get coloured fringes.
func paintLCD(img *image.RGBA, s shape, c color.RGBA, ss int) {
	r := s.bounds.Intersect(img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			var k [3]float64
			for ch := range k {
				in := 0
				for sy := range ss {
					for sx := range ss {
						px := float64(x) + (float64(ch)-1)/3 + (float64(sx)+0.5)/float64(ss)
						if s.inside(px, float64(y)+(float64(sy)+0.5)/float64(ss)) {
							in++
						}
					}
				}
				k[ch] = float64(in) / float64(ss*ss)
			}
			o := img.RGBAAt(x, y)
			mix := func(a, b uint8, k float64) uint8 { return uint8(float64(a)*(1-k) + float64(b)*k + 0.5) }
			img.SetRGBA(x, y, color.RGBA{mix(o.R, c.R, k[0]), mix(o.G, c.G, k[1]), mix(o.B, c.B, k[2]), 0xff})
		}
	}
}

// disc is a filled circle.
func disc(cx, cy, r float64) shape {
	return shape{
		inside: func(x, y float64) bool { return (x-cx)*(x-cx)+(y-cy)*(y-cy) <= r*r },
		bounds: image.Rect(int(math.Floor(cx-r))-1, int(math.Floor(cy-r))-1, int(math.Ceil(cx+r))+1, int(math.Ceil(cy+r))+1),
	}
}

// rect is a filled rectangle whose edges may fall between pixels.
func rect(x0, y0, x1, y1 float64) shape {
	return shape{
		inside: func(x, y float64) bool { return x >= x0 && x < x1 && y >= y0 && y < y1 },
		bounds: image.Rect(int(math.Floor(x0))-1, int(math.Floor(y0))-1, int(math.Ceil(x1))+1, int(math.Ceil(y1))+1),
	}
}

// glyphs is a 5 by 7 blocky font, enough for the tests' words.
var glyphs = map[rune][7]string{
	'A': {".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"},
	'C': {".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."},
	'D': {"####.", "#...#", "#...#", "#...#", "#...#", "#...#", "####."},
	'E': {"#####", "#....", "#....", "####.", "#....", "#....", "#####"},
	'F': {"#####", "#....", "#....", "####.", "#....", "#....", "#...."},
	'G': {".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".###."},
	'H': {"#...#", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"},
	'L': {"#....", "#....", "#....", "#....", "#....", "#....", "#####"},
	'N': {"#...#", "##..#", "#.#.#", "#..##", "#...#", "#...#", "#...#"},
	'O': {".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."},
	'R': {"####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"},
	'S': {".####", "#....", "#....", ".###.", "....#", "....#", "####."},
	'V': {"#...#", "#...#", "#...#", "#...#", "#...#", ".#.#.", "..#.."},
	'W': {"#...#", "#...#", "#...#", "#.#.#", "#.#.#", "##.##", "#...#"},
	' ': {".....", ".....", ".....", ".....", ".....", ".....", "....."},
}

// text is s in the blocky font, its top-left corner at (ox, oy), each dot
// of a glyph cell by cell pixels, a glyph six cells apart from the next.
func text(s string, ox, oy, cell float64) shape {
	s = strings.ToUpper(s)
	runes := []rune(s)
	return shape{
		inside: func(x, y float64) bool {
			cx := int(math.Floor((x - ox) / cell))
			cy := int(math.Floor((y - oy) / cell))
			if x < ox || y < oy || cy >= 7 {
				return false
			}
			n, col := cx/6, cx%6
			if n >= len(runes) || col == 5 {
				return false
			}
			return glyphs[runes[n]][cy][col] == '#'
		},
		bounds: image.Rect(int(ox)-1, int(oy)-1, int(math.Ceil(ox+cell*float64(6*len(runes))))+1, int(math.Ceil(oy+7*cell))+1),
	}
}

// page draws something like a web page, w by h: a header, lines of text,
// buttons and an avatar. shift moves the text and the avatar right by a
// fraction of a pixel, as a browser may between two renders.
func page(w, h int, shift float64) *image.RGBA {
	img := blank(w, h, white)
	fill(img, image.Rect(0, 0, w, 48), paper)
	paint(img, text("SNAG", 16+shift, 14, 3), ink, 4)
	paint(img, disc(float64(w)-32+shift, 24, 14), blue, 4)
	words := []string{"SAVE CHANGES", "HELLO WORLD", "GOOD CODE", "NO LOSS", "READ ALL"}
	for i, y := 0, 72; y+40 < h; i, y = i+1, y+40 {
		paint(img, text(words[i%len(words)], 24+shift, float64(y), 2), ink, 4)
		if bx := w - 160; bx > 200 {
			fill(img, image.Rect(bx, y-6, bx+120, y+22), blue)
			paint(img, text("SAVE", float64(bx)+36+shift, float64(y)+1, 2), white, 4)
		}
	}
	return img
}
