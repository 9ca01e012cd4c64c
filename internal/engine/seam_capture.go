package engine

import (
	"unicode/utf8"

	"github.com/snagdev/snag/internal/pixdiff"
)

// What the engine keeps of captures, now that the capture service
// (internal/engine/capture) makes them tasks through Add: the bound both
// it and the visual check read a capture's pictures with, and the clip of
// an anchor's text the visual check names it by.

// MaxShotDecoded bounds each image of a capture's decoded size in bytes
// (its pixels times their depth), read from its header before it is
// decoded: a small PNG of many 16-bit pixels is refused.
const MaxShotDecoded = pixdiff.DefaultMaxBytes

// clipText cuts s to at most n bytes on a character's boundary, marking
// the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
