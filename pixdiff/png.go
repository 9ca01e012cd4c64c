package pixdiff

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
)

// DefaultMaxPixels is the pixel count above which [DecodePNG] refuses an
// image when its maxPixels is zero or less: 40 megapixels, a full page at
// a large viewport, decoded into 160 MB.
const DefaultMaxPixels = 40_000_000

// ErrNotPNG is returned, wrapped, by [DecodePNG] for input that is not a
// PNG image.
var ErrNotPNG = errors.New("not a PNG image")

// ErrTooLarge is returned, wrapped, by [DecodePNG] for a PNG image with
// more pixels than the limit.
var ErrTooLarge = errors.New("image too large")

// pngSignature starts every PNG file.
const pngSignature = "\x89PNG\r\n\x1a\n"

// DecodePNG reads a PNG image from r. It refuses input that is not a PNG
// ([ErrNotPNG]) and an image with more than maxPixels pixels
// ([ErrTooLarge]); the size is read from the header, before any pixel is
// allocated. A maxPixels of zero or less means [DefaultMaxPixels]. DecodePNG
// does not bound how many bytes it reads: wrap r in an [io.LimitedReader]
// for that.
func DecodePNG(r io.Reader, maxPixels int) (image.Image, error) {
	if maxPixels <= 0 {
		maxPixels = DefaultMaxPixels
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
	if pixels := int64(cfg.Width) * int64(cfg.Height); pixels > int64(maxPixels) {
		return nil, fmt.Errorf("pixdiff: decode png: %w: %dx%d is %d pixels, over the limit of %d: crop the screenshot to the element", ErrTooLarge, cfg.Width, cfg.Height, pixels, maxPixels)
	}
	img, err := png.Decode(io.MultiReader(&head, r))
	if err != nil {
		return nil, fmt.Errorf("pixdiff: decode png: %w: take the screenshot again", err)
	}
	return img, nil
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
