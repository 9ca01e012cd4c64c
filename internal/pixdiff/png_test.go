package pixdiff_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/snagdev/snag/internal/pixdiff"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// encode returns img as PNG bytes.
func encode(t testing.TB, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := pixdiff.EncodePNG(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pngChunk is one PNG chunk: length, type, data and CRC.
func pngChunk(typ string, data []byte) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	b = append(b, typ...)
	b = append(b, data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(append([]byte(typ), data...)))
}

// hugeHeader is a PNG file of a few dozen bytes whose header claims an
// RGBA image w by h, with no pixel data.
func hugeHeader(w, h uint32) []byte { return header(w, h, 8) }

// deepHeader is hugeHeader at 16 bits a channel: 8 bytes a pixel once
// decoded.
func deepHeader(w, h uint32) []byte { return header(w, h, 16) }

func header(w, h uint32, depth byte) []byte {
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, depth, 6, 0, 0, 0) // RGBA, deflate, no filter, no interlace
	b := []byte("\x89PNG\r\n\x1a\n")
	b = append(b, pngChunk("IHDR", ihdr)...)
	return append(b, pngChunk("IEND", nil)...)
}

func TestDecodePNGReadsWhatEncodePNGWrote(t *testing.T) {
	el := element().draw()
	pal := image.NewPaletted(image.Rect(0, 0, 40, 30), palette.Plan9)
	for i := range pal.Pix {
		pal.Pix[i] = uint8(i % 256)
	}
	g16 := image.NewGray16(image.Rect(0, 0, 20, 10))
	for i := range g16.Pix {
		g16.Pix[i] = uint8(i * 7)
	}
	for _, c := range []struct {
		name string
		img  image.Image
	}{
		{"opaque", el},
		{"translucent", transparent(el)},
		{"paletted", pal},
		{"16-bit grey", g16},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := encode(t, c.img)
			for name, r := range map[string]interface{ Read([]byte) (int, error) }{
				"at once":          bytes.NewReader(data),
				"a byte at a time": iotest.OneByteReader(bytes.NewReader(data)),
			} {
				got, err := pixdiff.DecodePNG(r, 0)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if got.Bounds() != c.img.Bounds() {
					t.Fatalf("%s: bounds %v, want %v", name, got.Bounds(), c.img.Bounds())
				}
				res, err := pixdiff.Compare(c.img, got, pixdiff.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if res.Changed != 0 || res.AntiAliased != 0 {
					t.Errorf("%s: decoded image differs from the encoded one: %d changed, %d anti-aliased", name, res.Changed, res.AntiAliased)
				}
			}
		})
	}
}

func TestDecodePNGRefuses(t *testing.T) {
	el := element().draw()
	var jpg, gf bytes.Buffer
	if err := jpeg.Encode(&jpg, el, nil); err != nil {
		t.Fatal(err)
	}
	if err := gif.Encode(&gf, el, nil); err != nil {
		t.Fatal(err)
	}
	valid := encode(t, el)
	for _, c := range []struct {
		name     string
		data     []byte
		maxBytes int64
		is       error // nil: any error but these two
		want     string
	}{
		{"a JPEG", jpg.Bytes(), 0, pixdiff.ErrNotPNG, "not a PNG image (it starts like a JPEG): take the screenshot as PNG"},
		{"a GIF", gf.Bytes(), 0, pixdiff.ErrNotPNG, "(it starts like a GIF)"},
		{"garbage", []byte("hello, world"), 0, pixdiff.ErrNotPNG, `(it starts with "hello, w")`},
		{"a data URL", []byte("data:image/png;base64,iVBORw0KGgo="), 0, pixdiff.ErrNotPNG, "decode its base64 first"},
		{"nothing", nil, 0, pixdiff.ErrNotPNG, "(the input is empty)"},
		{"half the signature", valid[:4], 0, pixdiff.ErrNotPNG, "not a PNG image"},
		{"a PNG cut in half", valid[:len(valid)/2], 0, nil, "take the screenshot again"},
		{"a PNG cut after its signature", valid[:8], 0, nil, "pixdiff: decode png: header: "},
		{"a PNG with a broken checksum", flipByte(valid, 30), 0, nil, "take the screenshot again"},
		{"a PNG over a small limit", valid, 240*120*4 - 1, pixdiff.ErrTooLarge, "240x120 at 4 bytes a pixel decodes to 0.1 MiB, over the limit of 0.1 MiB: crop the screenshot to the element, or take it at 8 bits a channel"},
		{"a PNG whose header claims 100000x100000", hugeHeader(100000, 100000), 0, pixdiff.ErrTooLarge, "100000x100000 at 4 bytes a pixel decodes to 38146 MiB, over the limit of 160 MiB"},
		{"a small PNG of many 16-bit pixels", deepHeader(6000, 6000), 0, pixdiff.ErrTooLarge, "6000x6000 at 8 bytes a pixel decodes to 274 MiB, over the limit of 160 MiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			img, err := pixdiff.DecodePNG(bytes.NewReader(c.data), c.maxBytes)
			if err == nil {
				t.Fatalf("decoded a %v image, want an error", img.Bounds())
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "pixdiff: decode png: ") || !strings.Contains(msg, c.want) {
				t.Errorf("err = %q, want one starting %q holding %q", msg, "pixdiff: decode png: ", c.want)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("err = %v, want one that is %v", err, c.is)
			}
			if c.is == nil && (errors.Is(err, pixdiff.ErrNotPNG) || errors.Is(err, pixdiff.ErrTooLarge)) {
				t.Errorf("err = %v, a broken PNG is neither ErrNotPNG nor ErrTooLarge", err)
			}
		})
	}
}

// flipByte returns a copy of b with the byte at i inverted.
func flipByte(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0xff
	return b
}

func TestDecodePNGRefusesAHugeHeaderWithoutAllocatingIt(t *testing.T) {
	data := hugeHeader(100000, 100000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := pixdiff.DecodePNG(bytes.NewReader(data), 0)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, pixdiff.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	// Decoding it would need 40 GB; refusing it needs a few hundred
	// bytes.
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("refusing the header allocated %d bytes, want under 1 MiB", n)
	}
	// A header just under the limit is read past the header: the missing
	// pixel data is the error.
	_, err = pixdiff.DecodePNG(bytes.NewReader(hugeHeader(100, 100)), 100*100*4)
	if err == nil || errors.Is(err, pixdiff.ErrTooLarge) || !strings.Contains(err.Error(), "take the screenshot again") {
		t.Errorf("a 100x100 header without pixels: err = %v, want a decoding error", err)
	}
}

func FuzzDecode(f *testing.F) {
	small := blank(6, 4, white)
	fill(small, image.Rect(1, 1, 3, 3), red)
	f.Add(encode(f, small))
	f.Add(encode(f, transparent(small)))
	gray := image.NewGray(image.Rect(0, 0, 3, 3))
	gray.SetGray(1, 1, color.Gray{Y: 0x80})
	f.Add(encode(f, gray))
	f.Add(hugeHeader(100000, 100000))
	f.Add(hugeHeader(16, 16))
	f.Add([]byte("\x89PNG\r\n\x1a\n"))
	f.Add([]byte{0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 'J', 'F', 'I', 'F'})
	f.Add([]byte("garbage"))
	const limit = 1 << 12
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := pixdiff.DecodePNG(bytes.NewReader(data), limit)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "pixdiff: decode png: ") {
				t.Fatalf("err = %q, want the pixdiff: decode png: prefix", err)
			}
			return
		}
		size := img.Bounds().Size()
		if size.X*size.Y > limit {
			t.Fatalf("decoded %v, over the limit of %d pixels", size, limit)
		}
		res, err := pixdiff.Compare(img, img, pixdiff.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Changed != 0 || res.AntiAliased != 0 || !res.Identical() {
			t.Fatalf("an image against itself: %d changed, %d anti-aliased", res.Changed, res.AntiAliased)
		}
		again, err := pixdiff.DecodePNG(bytes.NewReader(encode(t, img)), limit)
		if err != nil {
			t.Fatalf("decode what EncodePNG wrote: %v", err)
		}
		if res, _ := pixdiff.Compare(img, again, pixdiff.Options{}); res.Changed != 0 || res.AntiAliased != 0 {
			t.Fatalf("encoded and decoded again: %d changed, %d anti-aliased", res.Changed, res.AntiAliased)
		}
	})
}

// TestDiffGolden keeps the diff image of one case in testdata, to look at
// and to notice any change in how diffs are drawn. Run with -update to
// rewrite it.
func TestDiffGolden(t *testing.T) {
	before := element().draw()
	after := with(func(c *crop) {
		c.box = c.box.Add(image.Pt(20, 0))
		c.discX += 0.5
		c.word = "SAVF"
	})
	res, err := pixdiff.Compare(before, after, pixdiff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := encode(t, res.Diff)
	path := filepath.Join("testdata", "diff.png")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pixdiff -run TestDiffGolden -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the diff image differs from %s (%d bytes, want %d); look at both, then run go test ./pixdiff -run TestDiffGolden -update if the new one is right", path, len(got), len(want))
	}
	// The diff goes to a person's board and to a model as an image: it
	// stays small.
	if len(got) > 8<<10 {
		t.Errorf("the diff PNG is %d bytes, want at most 8 KiB", len(got))
	}
}
