package verifier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/snagdev/snag/internal/browser"
	"github.com/snagdev/snag/internal/engine"
	"github.com/snagdev/snag/internal/index"
	"github.com/snagdev/snag/internal/project"
	"github.com/snagdev/snag/internal/queue"
	"github.com/snagdev/snag/internal/snag"
	"github.com/snagdev/snag/internal/verify"
)

// abs is the path of a file under .snag/, given relative to it.
func (v *Verifier) abs(path string) string {
	return filepath.Join(v.e.Root(), project.Folder, filepath.FromSlash(path))
}

// check runs the verifier of a run and says what it found.
func (v *Verifier) check(ctx context.Context, t *queue.Task, run snag.VerifyRun) index.RunEnd {
	cfg := v.e.Config()
	timeout := time.Duration(cfg.Verify.TimeoutSeconds) * time.Second
	switch run.Verifier {
	case "command":
		from := project.ConfigFile
		if t.Verify != nil && t.Verify.Command == run.Command {
			from = "task"
		}
		if !v.approved(run.Command, run.Dir, cfg.Verify.Shell) {
			return index.RunEnd{Outcome: snag.OutcomeNeedsApproval, Reason: engine.NeedsApprovalReason(run.Command, from, t.Key)}
		}
		res, err := verify.RunCommand(ctx, verify.Command{Dir: run.Dir, Line: run.Command, Shell: cfg.Verify.Shell, Timeout: timeout})
		switch {
		case err != nil:
			return index.RunEnd{Outcome: snag.OutcomeInconclusive, Reason: "the command could not run: " + strings.TrimPrefix(err.Error(), "verify: ")}
		case res.TimedOut:
			return index.RunEnd{Outcome: snag.OutcomeFail, Reason: failReason(fmt.Sprintf("`%s` timed out after %s", run.Command, timeout), res)}
		case res.ExitCode == 0:
			return index.RunEnd{Outcome: snag.OutcomePass, Reason: fmt.Sprintf("`%s` passed (exit 0) in %s", run.Command, res.Took.Round(time.Millisecond))}
		default:
			return index.RunEnd{Outcome: snag.OutcomeFail, Reason: failReason(fmt.Sprintf("`%s` failed with exit %d", run.Command, res.ExitCode), res)}
		}
	case "browser":
		c := t.Capture
		if c == nil {
			c = &queue.Capture{URL: run.Command}
		}
		shots := v.abs("shots")
		if err := os.MkdirAll(shots, 0o755); err != nil {
			return index.RunEnd{Outcome: snag.OutcomeInconclusive, Reason: fmt.Sprintf("cannot make .snag/shots for the screenshot: %v", err)}
		}
		name := fmt.Sprintf("%s-verify-%d.png", t.Key, run.ID)
		check := browser.Check{Chromium: cfg.Browser.Chromium, URL: run.Command, Anchor: c.Anchor, AnchorText: c.AnchorText,
			CapturedErrors: c.ConsoleErrors, AllowedHosts: cfg.Browser.AllowedHosts, Shot: filepath.Join(shots, name),
			Settle: time.Duration(cfg.Browser.SettleMS) * time.Millisecond, Timeout: min(timeout, browser.DefaultTimeout)}
		vis := visualOf(v.abs, t, run.ID)
		if vis.on {
			check.Crop, check.Viewport = v.abs(vis.after), vis.viewport
		}
		res, err := browser.Run(ctx, check)
		if errors.Is(err, browser.ErrUnavailable) {
			return index.RunEnd{Outcome: snag.OutcomeUnavailable, Reason: err.Error() + "; the task stays verifying: resolve it again once a browser is available"}
		}
		if err != nil {
			return index.RunEnd{Outcome: snag.OutcomeInconclusive, Reason: capReason(fmt.Sprintf("the browser check could not run: %v", err))}
		}
		shot := ""
		if res.Shot != "" {
			shot = "shots/" + name
		}
		r := index.RunEnd{Outcome: res.Outcome, Reason: res.Reason, Shot: shot}
		if vis.on {
			r = vis.judge(v.abs, t, res, r)
		} else if vis.why != "" {
			r.Reason += "; " + vis.why
		}
		r.Reason = capReason(r.Reason)
		return r
	}
	return index.RunEnd{Outcome: snag.OutcomeInconclusive, Reason: "unknown verifier " + run.Verifier}
}

// failReason words a failed command's run: what happened, the lines of
// its output that name the failure (wherever they were), then its last
// output, cut from the front so that the whole fits maxReason.
func failReason(what string, res verify.CommandResult) string {
	head := what + "; last output:\n"
	if len(res.Failing) > 0 {
		head = what + "; failing:\n" + strings.Join(res.Failing, "\n") + "\nlast output:\n"
	}
	return head + keepEnd(res.Tail, maxReason-len(head))
}

// maxReason bounds a verify reason: what a person and a model read at a
// glance.
const maxReason = 2000

// capReason keeps a reason to maxReason bytes, its end.
func capReason(s string) string { return keepEnd(s, maxReason) }

// keepEnd is s, or its last bytes within n with "…" before them, starting
// on a whole character.
func keepEnd(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= len("…") {
		return ""
	}
	cut := s[len(s)-(n-len("…")):]
	for len(cut) > 0 && cut[0]&0xC0 == 0x80 {
		cut = cut[1:]
	}
	return "…" + cut
}
