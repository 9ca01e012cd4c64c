package pixdiff

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
)

// DefaultMaxBytes is the decoded size above which [DecodePNG] refuses an
// image when its maxBytes is zero or less: 160 MiB, a full page at a large
// viewport (40 megapixels at 8 bits a channel; half as many at 16).
const DefaultMaxBytes = 160 << 20

// ErrNotPNG is returned, wrapped, by [DecodePNG] for input that is not a
// PNG image.
var ErrNotPNG = errors.New("not a PNG image")

// ErrTooLarge is returned, wrapped, by [DecodePNG] for a PNG image that
// decodes to more bytes than the limit.
var ErrTooLarge = errors.New("image too large")

// pngSignature starts every PNG file.
const pngSignature = "\x89PNG\r\n\x1a\n"

// DecodePNG reads a PNG image from r. It refuses input that is not a PNG
// ([ErrNotPNG]) and an image that would decode to more than maxBytes
// ([ErrTooLarge]): its size and bit depth are read from the header,
// before any pixel is allocated. A maxBytes of zero or less means
// [DefaultMaxBytes]. DecodePNG does not bound how many bytes it reads:
// wrap r in an [io.LimitedReader] for that.
func DecodePNG(r io.Reader, maxBytes int64) (image.Image, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	// The header is read twice, once for its size and once to decode:
	// keep what the first read took, to read it again.
	var head bytes.Buffer
	tee := io.TeeReader(r, &head)
	var sig [len(pngSignature)]byte
	n, err := io.ReadFull(tee, sig[:])
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("pixdiff: decode png: read: %w", err)
	}
	if string(sig[:n]) != pngSignature {
		return nil, fmt.Errorf("pixdiff: decode png: %w (%s): take the screenshot as PNG", ErrNotPNG, describe(sig[:n]))
	}
	cfg, err := png.DecodeConfig(io.MultiReader(bytes.NewReader(sig[:]), tee))
	if err != nil {
		return nil, fmt.Errorf("pixdiff: decode png: header: %w: take the screenshot again", err)
	}
	per := bytesPerPixel(cfg.ColorModel)
	if size := int64(cfg.Width) * int64(cfg.Height) * per; size > maxBytes {
		return nil, fmt.Errorf("pixdiff: decode png: %w: %dx%d at %d bytes a pixel decodes to %s, over the limit of %s: crop the screenshot to the element, or take it at 8 bits a channel",
			ErrTooLarge, cfg.Width, cfg.Height, per, mib(size), mib(maxBytes))
	}
	img, err := png.Decode(io.MultiReader(&head, r))
	if err != nil {
		return nil, fmt.Errorf("pixdiff: decode png: %w: take the screenshot again", err)
	}
	return img, nil
}

// bytesPerPixel is what one pixel of an image of colour model m takes
// once decoded by image/png.
func bytesPerPixel(m color.Model) int64 {
	switch m {
	case color.GrayModel:
		return 1
	case color.Gray16Model:
		return 2
	case color.RGBA64Model, color.NRGBA64Model:
		return 8
	}
	if _, ok := m.(color.Palette); ok {
		return 1
	}
	return 4 // RGBA, NRGBA
}

// mib writes n bytes in MiB, with one decimal below 10.
func mib(n int64) string {
	if m := float64(n) / (1 << 20); m < 10 {
		return fmt.Sprintf("%.1f MiB", m)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// describe names what the first bytes of some input that is not a PNG
// look like.
func describe(start []byte) string {
	switch {
	case len(start) == 0:
		return "the input is empty"
	case bytes.HasPrefix(start, []byte{0xff, 0xd8, 0xff}):
		return "it starts like a JPEG"
	case bytes.HasPrefix(start, []byte("GIF8")):
		return "it starts like a GIF"
	case bytes.HasPrefix(start, []byte("RIFF")):
		return "it starts like a RIFF file, such as WebP"
	case bytes.HasPrefix(start, []byte("data:")):
		return "it is a data: URL; decode its base64 first"
	default:
		return fmt.Sprintf("it starts with %q", start)
	}
}

// EncodePNG writes img, such as [Result.Diff], to w as a PNG image.
func EncodePNG(w io.Writer, img image.Image) error {
	if err := png.Encode(w, img); err != nil {
		return fmt.Errorf("pixdiff: encode png: %w", err)
	}
	return nil
}
