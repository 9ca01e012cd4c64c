package api

import (
	"github.com/snagdev/snag/internal/ops"
)

// CaptureRequest is ops.CaptureRequest: the body of POST /captures: a page
// as a person saw it, from snag capture or the browser extension.
type CaptureRequest = ops.CaptureRequest

// CaptureAnchor is ops.CaptureAnchor: the element a person pointed at: a CSS
// selector that finds it again, its text, and its box in CSS pixels of the
// page.
type CaptureAnchor = ops.CaptureAnchor

// Point is ops.Point: a position in CSS pixels.
type Point = ops.Point

// NetworkError is ops.NetworkError: a request that failed: an HTTP status of
// 400 or more, or no answer at all (Error says why, as the browser put it).
type NetworkError = ops.NetworkError

// Captured is ops.Captured: the answer of POST /captures (201): the inbox
// task made of the capture, and its pictures, relative to .snag/.
type Captured = ops.Captured
