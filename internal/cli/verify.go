package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/snagdev/snag/api"
	"github.com/snagdev/snag/internal/queue"
)

func init() {
	register(&command{
		name: "verify", args: "ID [--dry-run] [--wait] [--json]", daemon: true,
		summary: "Check a task now: run its verify command, or re-open its captured page in headless Chromium.\n\n" +
			"--dry-run says which verifier would run, or why none can (no_capture_url, verify_disabled,\n" +
			"verify_unavailable). A task that is claimed, verifying or needs_review can be checked; a pass\n" +
			"resolves it (verified), a failure gives it back to its holder. --wait waits for the outcome\n" +
			"and exits 1 unless it passed. A command from a task or config.json runs only once approved\n" +
			"(snag approve).",
		flags: func(fs *flag.FlagSet, c *call) {
			fs.BoolVar(&c.opt.dryRun, "dry-run", false, "say what would check it; change nothing")
			fs.BoolVar(&c.opt.wait, "wait", false, "wait for the outcome")
			fs.BoolVar(&c.opt.json, "json", false, "print JSON")
		},
		run: runVerify,
	})
}

// verifyAnswer is POST /verify/{ref} and GET /verify/{ref}, the parts the
// CLI shows.
type verifyAnswer struct {
	Key      string    `json:"key"`
	Code     string    `json:"code,omitempty"`
	Status   string    `json:"status,omitempty"`
	Verifier string    `json:"verifier,omitempty"`
	Command  string    `json:"command,omitempty"`
	URL      string    `json:"url,omitempty"`
	Approved *bool     `json:"approved,omitempty"`
	Message  string    `json:"message,omitempty"`
	Running  bool      `json:"running,omitempty"`
	Outcome  string    `json:"outcome,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	LastAt   time.Time `json:"last_at,omitzero"`
	Shot     string    `json:"shot,omitempty"`
	// Visual is a visual verify's comparison of the element's pixels.
	Visual *api.Visual `json:"visual,omitempty"`
	// Verify and ETA come with a check that was just started.
	Verify struct {
		Verifier string `json:"verifier"`
		History  []struct {
			Command string `json:"command"`
		} `json:"history"`
	} `json:"verify,omitzero"`
	ETA int `json:"eta_seconds,omitempty"`
}

// stateAnswer is GET /verify/{ref}'s answer as the CLI shows it.
func stateAnswer(st api.VerifyState) verifyAnswer {
	return verifyAnswer{Key: st.Key, Status: string(st.Status), Running: st.Running, Outcome: st.Outcome,
		Reason: st.Reason, LastAt: st.LastAt, Verifier: st.Verifier, Shot: st.Shot, Visual: st.Visual}
}

// planAnswer is a dry run's answer as the CLI shows it.
func planAnswer(p api.VerifyPlan) verifyAnswer {
	return verifyAnswer{Key: p.Key, Code: p.Code, Verifier: p.Verifier, Command: p.Command, URL: p.URL,
		Approved: p.Approved, Message: p.Message}
}

// resolvedAnswer is a started check's answer as the CLI shows it.
func resolvedAnswer(r api.Resolved) verifyAnswer {
	a := verifyAnswer{Key: r.Key, Code: r.Code, Status: string(r.Status), Command: r.Command, Message: r.Message,
		Outcome: r.Outcome, Reason: r.Reason, ETA: r.ETASeconds}
	if v := r.Verify; v != nil {
		a.Verify.Verifier = v.Verifier
		for _, run := range v.History {
			a.Verify.History = append(a.Verify.History, struct {
				Command string `json:"command"`
			}{run.Command})
		}
	}
	return a
}

func runVerify(ctx context.Context, c *call) error {
	if len(c.args) != 1 {
		return usagef("verify takes one task: snag verify SNAG-12 [--dry-run] [--wait]")
	}
	if _, err := queue.ParseRef(c.args[0]); err != nil {
		return usagef("%v", err)
	}
	r, err := connect(ctx, c, true)
	if err != nil {
		return err
	}
	ref := c.args[0]
	var ans verifyAnswer
	if c.opt.dryRun {
		p, err := r.cl.VerifyPlan(ctx, ref, api.VerifyRequest{By: who()})
		if err != nil {
			return said(err)
		}
		ans = planAnswer(p)
	} else {
		res, err := r.cl.Verify(ctx, ref, api.VerifyRequest{By: who()})
		if err != nil {
			return said(err)
		}
		ans = resolvedAnswer(res)
	}
	switch {
	case c.opt.json && (c.opt.dryRun || !c.opt.wait):
		return writeJSON(c.Stdout, ans)
	case c.opt.dryRun:
		fmt.Fprintf(c.Stdout, "%s: %s\n", ans.Key, safeText(ans.Message))
		return nil
	case ans.Code == "needs_approval" && !c.opt.json:
		// Nothing ran and nothing will until a person approves: snagd
		// says so at once, with the outcome.
		fmt.Fprintf(c.Stdout, "%s: %s, now %s\n%s\n", ans.Key, ans.Outcome, ans.Status, indent(ans.Reason))
		return errFound
	case ans.Status != string(queue.StatusVerifying): // verify disabled: resolved at once
		fmt.Fprintf(c.Stdout, "%s is %s: %s\n", ans.Key, ans.Status, safeText(ans.Message))
		return nil
	case !c.opt.wait:
		fmt.Fprintf(c.Stdout, "%s is verifying: snag verify %s --wait waits for the outcome\n", ans.Key, ans.Key)
		return nil
	case !c.opt.json:
		// A check can take a while (a first go test compiles): say what
		// runs, so the wait is not a silent one.
		fmt.Fprintf(c.Stdout, "%s is verifying: %s\n", ans.Key, waitingFor(ans))
		flush(c.Stdout) // said now, not when the check ends
	}
	ctx, cancel := c.interruptible(ctx)
	defer cancel()
	// On a terminal a long wait says it is still waiting, now and then;
	// piped, the output is the outcome alone.
	started, told := time.Now(), time.Now()
	progress := !c.opt.json && isTerminal(c.Stderr)
	for {
		st, err := r.cl.VerifyState(ctx, ref)
		if err != nil {
			return said(err)
		}
		ans = stateAnswer(st)
		if !ans.Running && ans.Status != string(queue.StatusVerifying) {
			break
		}
		if progress && time.Since(told) >= progressEvery {
			told = time.Now()
			fmt.Fprintf(c.Stderr, "  still verifying %s: %d s so far\n", ans.Key, int(time.Since(started).Seconds()))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	if c.opt.json {
		if err := writeJSON(c.Stdout, ans); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(c.Stdout, "%s: %s, now %s\n", ans.Key, ans.Outcome, ans.Status)
		if ans.Reason != "" {
			fmt.Fprintln(c.Stdout, indent(safeText(ans.Reason)))
		}
		if ans.Shot != "" {
			fmt.Fprintf(c.Stdout, "  screenshot: .snag/%s\n", ans.Shot)
		}
		if v := ans.Visual; v != nil {
			fmt.Fprintf(c.Stdout, "  the element: before .snag/%s, after .snag/%s", v.Before, v.After)
			if v.Diff != "" {
				fmt.Fprintf(c.Stdout, ", diff .snag/%s", v.Diff)
			}
			fmt.Fprintln(c.Stdout)
		}
	}
	if ans.Outcome != "pass" {
		return errFound
	}
	return nil
}

// waitingFor says what a started check waits for, from its answer.
func waitingFor(ans verifyAnswer) string {
	what := "waiting for the check to end"
	switch v := ans.Verify; {
	case v.Verifier == "browser":
		what = "waiting for headless Chromium to re-open the captured page"
	case len(v.History) > 0 && v.History[0].Command != "":
		what = "waiting for `" + safe(v.History[0].Command) + "` to exit"
	}
	if ans.ETA > 0 {
		// snagd's guess: the last run's length, or a default before any.
		what += fmt.Sprintf(" (snagd expects about %d s)", ans.ETA)
	}
	return what + "; Ctrl-C stops the wait, not the check"
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}

// runMoveAs is runMove for a command named apart from its action.
func runMoveAs(ctx context.Context, c *call, action queue.Action, name string) error {
	if len(c.args) == 0 {
		return usagef("%s takes one or more tasks: snag %s SNAG-12", name, name)
	}
	for _, a := range c.args {
		if _, err := queue.ParseRef(a); err != nil {
			return usagef("%v", err)
		}
	}
	r, err := connect(ctx, c, true)
	if err != nil {
		return err
	}
	var errs []error
	var done []api.Moved
	for _, a := range c.args {
		req := api.MoveRequest{By: who(), Reason: c.opt.reason}
		var m api.Moved
		var err error
		if action == queue.ActRelease {
			var rel api.Released
			rel, err = r.cl.TakeBack(ctx, a, req)
			m = api.Moved{Key: rel.Key, Status: rel.Status}
		} else {
			m, err = r.cl.Move(ctx, a, string(action), req)
		}
		if err != nil {
			errs = append(errs, said(err))
			continue
		}
		done = append(done, m)
		if c.opt.json {
			continue
		}
		if action == queue.ActAccept {
			fmt.Fprintf(c.Stdout, "%s is %s (not verified: a person's word)\n", m.Key, m.Status)
		} else {
			fmt.Fprintf(c.Stdout, "%s is %s\n", m.Key, m.Status)
		}
	}
	if c.opt.json {
		if done == nil {
			done = []api.Moved{}
		}
		// The stable shape of a move's --json: the tasks moved; what was
		// refused goes to stderr, and the exit code says so.
		if err := writeJSON(c.Stdout, struct {
			Tasks []api.Moved `json:"tasks"`
		}{done}); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}
