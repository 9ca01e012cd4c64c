package verifier

import (
	"bytes"
	"fmt"
	"image"
	"os"

	"github.com/snagdev/snag/internal/atomicfile"
	"github.com/snagdev/snag/internal/browser"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/pixdiff"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
)

// visual is a browser verify's comparison of the anchor's pixels: the
// capture's crop (before) with the crop the run takes again at the same
// viewport (after), and the picture of what changed (diff). Paths are
// relative to .snag/.
type visual struct {
	on                  bool
	why                 string // why there is no comparison, when a capture has a crop but it cannot be read
	before, after, diff string
	viewport            browser.Viewport
}

// visualOf plans the comparison of task t's run: one runs when the
// capture has the anchor's crop and the anchor something to find it by.
func visualOf(abs func(string) string, t *queue.Task, run int64) visual {
	c := t.Capture
	if c == nil || c.Crop == "" || c.Anchor == "" && c.AnchorText == "" {
		return visual{}
	}
	if _, err := os.Stat(abs(c.Crop)); err != nil {
		return visual{why: fmt.Sprintf("no visual comparison: the captured crop .snag/%s cannot be read (%v)", c.Crop, err)}
	}
	v := visual{on: true, before: c.Crop,
		after: fmt.Sprintf("shots/%s-verify-%d-anchor.png", t.Key, run), diff: fmt.Sprintf("shots/%s-verify-%d-diff.png", t.Key, run)}
	if vp := c.Viewport; vp != nil {
		v.viewport = browser.Viewport{Width: vp.Width, Height: vp.Height, Scale: vp.Scale}
	}
	return v
}

// judge compares the two crops and decides the outcome with r, what the
// browser check found:
//
//   - a capture with console errors: they decide, as without pixels; the
//     reason adds how much of the element changed;
//   - ux and layout captures: the element looking the same as captured
//     fails (the fix did not change what the person saw), a changed one
//     goes to needs_review for a person to compare before, after and diff;
//   - a11y captures: a change goes to needs_review; looking the same does
//     too, not a failure, since an accessibility fix (a label, a role) may
//     change no pixel;
//   - any other kind: needs_review, with the figure;
//   - an anchor that no longer resolves: said in the reason; without
//     console errors to decide, a person looks at the page's screenshot.
func (v visual) judge(abs func(string) string, t *queue.Task, res browser.Result, r index.RunEnd) index.RunEnd {
	c := t.Capture
	decided := len(c.ConsoleErrors) > 0 // the errors decide
	if !res.Cropped {
		what := fmt.Sprintf("the element captured (%s) is not on the page any more", anchorName(c))
		if res.AnchorFound {
			what = fmt.Sprintf("the element captured (%s) is on the page but its crop could not be taken", anchorName(c))
		}
		if decided {
			r.Reason += "; " + what + ": no visual comparison"
		} else {
			r.Outcome, r.Reason = snag.OutcomeInconclusive, what+": a person looks at the page's screenshot"
		}
		return r
	}
	cmp, err := compareCrops(abs(v.before), abs(v.after))
	if err != nil {
		r.Reason += "; no visual comparison: " + err.Error()
		if !decided {
			r.Outcome = snag.OutcomeInconclusive
		}
		return r
	}
	var diff bytes.Buffer
	if err := pixdiff.EncodePNG(&diff, cmp.Diff); err == nil && atomicfile.WriteFile(abs(v.diff), diff.Bytes(), 0o644) == nil {
		r.Visual = &snag.Visual{Diff: v.diff}
	} else {
		r.Visual = &snag.Visual{}
	}
	r.Visual.Before, r.Visual.After, r.Visual.Changed, r.Visual.Identical = v.before, v.after, cmp.ChangedFraction, cmp.Identical()
	figure := fmt.Sprintf("%s of the element's pixels changed since the capture", percent(cmp.ChangedFraction))
	switch {
	case decided:
		r.Reason += "; " + figure
	case cmp.Identical() && (t.Kind == queue.KindUX || t.Kind == queue.KindLayout):
		r.Outcome, r.Reason = snag.OutcomeFail, "the element looks exactly as it did when captured ("+figure+"): the change did not reach what the person saw"
	case cmp.Identical() && t.Kind == queue.KindA11y:
		r.Outcome, r.Reason = snag.OutcomeInconclusive, "the element looks exactly as it did when captured ("+figure+"); an accessibility fix may change no pixel: a person decides"
	case cmp.Identical():
		r.Outcome, r.Reason = snag.OutcomeInconclusive, "the element looks exactly as it did when captured ("+figure+"): a person decides"
	default:
		r.Outcome, r.Reason = snag.OutcomeInconclusive, figure+": a person compares before, after and diff"
	}
	return r
}

// compareCrops reads the two PNGs and compares them.
func compareCrops(before, after string) (pixdiff.Result, error) {
	var imgs [2]image.Image
	for i, p := range []string{before, after} {
		f, err := os.Open(p)
		if err != nil {
			return pixdiff.Result{}, fmt.Errorf("read %s: %w", p, err)
		}
		img, err := pixdiff.DecodePNG(f, pixdiff.DefaultMaxBytes) // as a capture's images are
		f.Close()
		if err != nil {
			return pixdiff.Result{}, fmt.Errorf("read %s: %w", p, err)
		}
		imgs[i] = img
	}
	return pixdiff.Compare(imgs[0], imgs[1], pixdiff.Options{})
}

// anchorName names the captured anchor for a reason.
func anchorName(c *queue.Capture) string {
	switch {
	case c.Anchor != "" && c.AnchorText != "":
		return fmt.Sprintf("`%s`, %q", queue.Clip(c.Anchor, 80), queue.Clip(c.AnchorText, 60))
	case c.Anchor != "":
		return "`" + queue.Clip(c.Anchor, 80) + "`"
	}
	return fmt.Sprintf("%q", queue.Clip(c.AnchorText, 60))
}

// percent writes a fraction as a percentage a person reads at a glance.
func percent(f float64) string {
	switch p := f * 100; {
	case p == 0:
		return "0%"
	case p < 0.1:
		return "under 0.1%"
	case p < 10:
		return fmt.Sprintf("%.1f%%", p)
	default:
		return fmt.Sprintf("%.0f%%", p)
	}
}
