package verifier

import (
	"strings"
	"testing"

	"github.com/snagdev/snag/internal/verify"
)

// A failed verify's reason names the lines that say what failed, then as
// much of the end of the output as fits: a long trace never pushes the
// failing assertion out.
func TestFailReasonKeepsTheFailingLines(t *testing.T) {
	trace := strings.Repeat("    at frame (/app/lib/x.js:1:7)\n", 60)
	res := verify.CommandResult{ExitCode: 1, Failing: []string{"    cart_test.go:42: total = 1199, want 1200"}, Tail: trace}
	got := failReason("`go test ./...` failed with exit 1", res)
	if !strings.HasPrefix(got, "`go test ./...` failed with exit 1; failing:\n    cart_test.go:42: total = 1199, want 1200\nlast output:\n…") {
		t.Errorf("reason starts:\n%s", got[:min(len(got), 200)])
	}
	if len(got) > maxReason || !strings.HasSuffix(got, "x.js:1:7)\n") {
		t.Errorf("reason is %d bytes (at most %d), ending %q", len(got), maxReason, got[max(0, len(got)-40):])
	}
	if short := failReason("`true` failed with exit 1", verify.CommandResult{Tail: "no such file"}); short != "`true` failed with exit 1; last output:\nno such file" {
		t.Errorf("a short reason: %q", short)
	}
}
