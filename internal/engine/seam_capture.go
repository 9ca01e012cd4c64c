package engine

import (
	"unicode/utf8"

	"github.com/snagdev/snag/internal/pixdiff"
)

// What the engine keeps of captures, now that the capture service
// (internal/engine/capture) makes them tasks through Add: what the visual
// check (visual.go) still reads here, since it must not import the
// capture service. Once the visual check moves into a service of its own,
// with its own copies, nothing here is used and this file goes.

// MaxShotDecoded bounds each image of a capture's decoded size in bytes
// (its pixels times their depth), as capture.MaxShotDecoded does.
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
