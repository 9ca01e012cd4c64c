// Package pixdiff compares two screenshot crops the way a person would: the
// "before" crop of an element taken when a bug was captured, and the "after"
// crop taken at the same viewport when the fix is verified. It says how many
// pixels changed, where, and draws a diff image a person can read at a
// glance. The browser verifier uses it to tell a region that looks exactly as
// captured (the bug is still there) from one that changed (a person reviews).
//
// # Colour distance
//
// Each pixel is first blended onto white, so a transparent pixel and an
// opaque white one are the same. Two pixels are then compared by their
// distance in the YIQ colour space of NTSC, weighted as Kotsarenko and Ramos
// propose ("Measuring perceived color difference using YIQ NTSC transmission
// color space in mobile applications"): 0.5053 ΔY² + 0.299 ΔI² + 0.1957 ΔQ².
// Luma (Y) counts most, as it does for the eye. Two pixels differ when the
// square root of that distance is above Options.Threshold times its largest
// value (between two opposite corners of the colour cube, such as green and
// magenta; black against white is 97% of it). The default threshold,
// [DefaultThreshold], is 0.1: a difference of about a tenth of the way from
// black to white counts, and the grey-level noise of a different encoder
// does not.
//
// # Anti-aliasing and sub-pixel shifts
//
// An edge drawn a fraction of a pixel further along, or anti-aliased by a
// different rasteriser, changes the grey levels of the pixels along it and
// nothing else. A pixel that differs is therefore not counted as changed
// when one of three tests explains it:
//
//   - Anti-aliasing, as Vysniauskas describes it ("Anti-aliased pixel and
//     intensity slope detector"): in one of the two images the pixel has
//     at most two neighbours of its own brightness, it has both a darker
//     and a brighter neighbour, and the darkest or the brightest of those
//     sits in a flat region (at least three neighbours of exactly its
//     colour, two on the border) in both images.
//   - An edge moved along a row or a column: the new colour is a blend of
//     the old colour and the old colour of the neighbour one step back,
//     and the old colour a blend of the new one and the new colour of the
//     neighbour one step ahead (each within the threshold).
//   - A thin stroke drawn a fraction of a pixel along, which spreads the
//     same ink over one more pixel: the 3 by 3 neighbourhood of the pixel
//     has the same mean colour in both images, within half the threshold.
//     The Vysniauskas test misses this case: a one-pixel stem drawn half a
//     pixel along becomes two half-grey pixels, with no flat region beside
//     them.
//
// Such a pixel is counted in Result.AntiAliased, not in Result.Changed,
// and drawn in the soft colour. Text or a shape drawn less than a pixel
// away therefore compares as identical. So does an edge, or a whole
// element, moved by exactly one pixel: at that scale a move cannot be told
// from a re-rasterised edge, and a person would not see it. Something
// drawn, removed or recoloured fails all three tests; so does a move of
// two pixels or more. The price is paid at the smallest scale: a change
// of one stroke of text a few pixels high can pass as a shift.
//
// # Sizes
//
// Both crops are laid on one canvas, top-left corners together, as large as
// the larger width and the larger height. When the widths and the heights
// each differ by at most Options.SizeTolerance pixels ([DefaultSizeTolerance]
// is 2; an anchor re-resolved after a page change is often a pixel larger or
// smaller), the smaller crop is extended by repeating its last column and
// row, and the whole canvas is compared. An extra strip that continues the
// background, as it usually does, is thus unchanged, and one that shows
// something new is changed. When the sizes differ by more, the element is no
// longer the same shape: every pixel of the canvas counts as changed and
// Result.SizeChanged is set.
//
// # Identical
//
// [Result.Identical] is the verifier's rule: the sizes are within
// tolerance, and fewer than [IdenticalFraction] (0.1%) of the pixels and
// fewer than [IdenticalPixels] (10) changed. The verifier fails such a
// task ("the element looks exactly as it did when captured") and sends
// any other to a person: a few stray pixels are noise, and one changed
// letter of body text is already more than ten.
//
// # Files
//
// [DecodePNG] reads a screenshot with a bound on its pixel count, checked
// from the PNG header before any pixel is allocated, and [EncodePNG] writes
// the diff image.
//
// pixdiff uses the standard library alone and imports nothing of snag's.
package pixdiff
